"""Request/response framing: Kafka's size-prefixed frames around kio entities.

A request frame is ``int32 size`` then a request header (v1, or v2 for flexible versions)
and the body. The API key, version and correlation id sit at fixed positions in every
header version, so they are read first; the header and body are then decoded with kio.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.protocol.kio_fixes import RESPONSE_SCHEMAS
from samsa.protocol.limits import LimitExceeded
from samsa.protocol.limits import check as check_limits

_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class FrameError(Exception):
    """A frame that cannot be decoded: the connection is closed."""


class UnsupportedApi(FrameError):
    """Unknown API key, or a version this broker does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported api_key={api_key} version={api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: header fields plus the kio body entity."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame without its size prefix."""
    if len(frame) < _PREFIX.size:
        raise FrameError(f"request frame of {len(frame)} bytes is shorter than a header")
    key, version, correlation_id = _PREFIX.unpack_from(frame, 0)
    return key, version, correlation_id


@cache
def _request_codec(api_key: int, api_version: int) -> tuple[Any, Any, Any]:
    """(schema, header reader, body reader): kio resolves a schema by name on every
    lookup, a tenth of a small request's cost."""
    schema = load_request_schema(api_key, api_version)
    return schema, entity_reader(schema.__header_schema__), entity_reader(schema)


_WRITERS: dict[type[Any], tuple[Any, tuple[Any, Any]]] = {}


def _response_writers(cls: type[Any]) -> tuple[Any, tuple[Any, Any]]:
    found = _WRITERS.get(cls)
    if found is None:
        header = cls.__header_schema__
        found = _WRITERS[cls] = (header, (entity_writer(header), entity_writer(cls)))
    return found


def decode_request(frame: bytes | memoryview, supported: dict[int, tuple[int, int]]) -> Request:
    """Decode ``frame`` (no size prefix) if its API and version are in ``supported``.

    Raises :class:`UnsupportedApi` for an API/version we do not serve and
    :class:`FrameError` for bytes that do not decode as that request.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    versions = supported.get(api_key)
    if versions is None or not versions[0] <= api_version <= versions[1]:
        raise UnsupportedApi(api_key, api_version, correlation_id)
    schema, read_header, read_body = _request_codec(api_key, api_version)
    try:
        check_limits(frame, schema)
    except LimitExceeded as exc:
        raise FrameError(f"malformed {api_key}v{api_version} request: {exc}") from None
    try:
        header, used = read_header(frame, 0)
        body, _ = read_body(frame, used)
    except Exception as exc:  # kio raises many types on malformed input
        raise FrameError(f"malformed {api_key}v{api_version} request: {exc!r}") from exc
    # Like Kafka, bytes after the body are ignored (librdkafka sends some on Metadata v12).
    return Request(api_key, api_version, correlation_id, header.client_id, body)


@cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    """The kio response entity class for an API version (kio looks it up by name)."""
    return load_response_schema(api_key, api_version)


def decoded_class(api_key: int, api_version: int) -> type[Any]:
    """The schema a client decodes a response with: :func:`response_class`, or its
    replacement where kio cannot read what Kafka sends (:mod:`samsa.protocol.kio_fixes`)."""
    return RESPONSE_SCHEMAS.get((api_key, api_version)) or response_class(api_key, api_version)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Size-prefixed response frame: response header (v0 or v1 per schema) then body."""
    header_cls, (write_header, write_body) = _response_writers(type(response))
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    write_header(buf, header_cls(correlation_id=correlation_id))
    write_body(buf, response)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response already encoded by kio (:func:`encode_answer`): the frame after its
    correlation id (the rest of the response header, then the body), sent as is."""

    tail: bytes

    def frame(self, correlation_id: int) -> bytes:
        """The size-prefixed frame of this answer to request ``correlation_id``."""
        return _SIZE_AND_CORRELATION.pack(len(self.tail) + 4, correlation_id) + self.tail


_SIZE_AND_CORRELATION = struct.Struct(">ii")


def encode_answer(response: Any) -> Encoded:
    """``response`` (a kio entity) encoded for any correlation id."""
    return Encoded(encode_response(0, response)[8:])


@dataclass(frozen=True, slots=True)
class Spliced:
    """A response whose large byte fields travel as separate buffers (no copies).

    The entity carries :func:`placeholder` ``i`` where ``payloads[i]`` belongs;
    :func:`encode_spliced` replaces each placeholder and its length prefix. Placeholders may
    stand in any order in the entity: each names its payload.
    """

    response: Any
    payloads: list[bytes | memoryview]


_MARK = b"\xffsamsa\xff"
_MARK_INDEX = struct.Struct(">I")


def placeholder(i: int) -> bytes:
    """A marker that cannot occur in the rest of a response (0xff is never in a name)."""
    return _MARK + _MARK_INDEX.pack(i)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_spliced(correlation_id: int, spliced: Spliced) -> list[bytes | memoryview]:
    """Buffers of a size-prefixed frame, the payloads spliced in where their markers are.

    Markers are found in the order they were encoded, whatever order the payloads were
    numbered in; every payload must be placed exactly once.
    """
    frame = encode_response(correlation_id, spliced.response)
    flexible = bool(type(spliced.response).__flexible__)
    return _assemble(_cut(frame, flexible, len(spliced.payloads)), spliced.payloads)


@dataclass(frozen=True, slots=True)
class _Cut:
    """An encoded frame around its placeholders: ``pieces[k]``, then payload ``order[k]``
    with its length prefix, ..., then the last piece (the size prefix is left out)."""

    pieces: list[bytes]
    order: list[int]
    flexible: bool


def _cut(frame: bytes, flexible: bool, count: int) -> _Cut:
    placed = [False] * count
    pieces: list[bytes] = []
    order: list[int] = []
    pos = 4
    while (at := frame.find(_MARK, pos)) >= 0:
        end = at + len(_MARK) + _MARK_INDEX.size
        (i,) = _MARK_INDEX.unpack_from(frame, at + len(_MARK))
        if i >= count or placed[i]:
            raise ValueError(f"placeholder {i} is unknown or appears twice in the frame")
        placed[i] = True
        # the placeholder's length prefix: compact bytes uvarint(length + 1), else int32
        pieces.append(frame[pos:at - 1 if flexible else at - 4])
        order.append(i)
        pos = end
    if not all(placed):
        raise ValueError(f"placeholder {placed.index(False)} missing from the encoded frame")
    pieces.append(frame[pos:])
    return _Cut(pieces, order, flexible)


def _assemble(cut: _Cut, payloads: list[bytes | memoryview],
              first: bytes | None = None) -> list[bytes | memoryview]:
    chunks: list[bytes | memoryview] = []
    for k, i in enumerate(cut.order):
        data = payloads[i]
        prefix = _uvarint(len(data) + 1) if cut.flexible else _SIZE.pack(len(data))
        chunks += [first if k == 0 and first is not None else cut.pieces[k], prefix, data]
    chunks.append(first if not cut.order and first is not None else cut.pieces[-1])
    total = sum(len(c) for c in chunks)
    return [_SIZE.pack(total), *chunks]


class RequestTemplates:
    """Request frames whose large byte fields (a Produce request's record batches) are
    spliced in as separate buffers, the rest encoded by kio once per template key.

    The caller's ``key`` must name everything of the body but the payloads (for Produce:
    acks, timeout, and which partitions of which topics in which order), so a frame encoded
    once serves every later request with that key: only the correlation id and the length
    prefixes change. kio's per-field encoding costs ~30 us a request; this, a few.
    """

    def __init__(self, limit: int = 1024) -> None:
        self._cuts: dict[tuple[int, int, str | None, Hashable], _Cut] = {}
        self._limit = limit

    def encode(self, api_key: int, api_version: int, correlation_id: int,
               client_id: str | None, key: Hashable, body: Any,
               payloads: list[bytes | memoryview]) -> list[bytes | memoryview]:
        """Buffers of the size-prefixed frame; ``body`` (a kio entity, or a callable
        making one) carries :func:`placeholder` ``i`` where ``payloads[i]`` belongs.
        ``key`` None: encoded afresh, not kept."""
        ident = (api_key, api_version, client_id, key)
        cut = self._cuts.get(ident) if key is not None else None
        if cut is None:
            entity = body() if callable(body) else body
            schema = load_request_schema(api_key, api_version)
            frame = encode_request(api_key, api_version, 0, client_id, entity)
            cut = _cut(frame, bool(schema.__flexible__), len(payloads))
            if key is not None:
                if len(self._cuts) >= self._limit:
                    self._cuts.clear()
                self._cuts[ident] = cut
        # api key, version, correlation id: the first bytes of the header (and frame)
        head = cut.pieces[0]
        first = head[:4] + _CORRELATION.pack(correlation_id) + head[8:]
        return _assemble(cut, payloads, first)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: Any) -> bytes:
    """Size-prefixed request frame (for clients and tests)."""
    schema = load_request_schema(api_key, api_version)
    header_cls = schema.__header_schema__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    header_fields: dict[str, Any] = {
        "request_api_key": api_key,
        "request_api_version": api_version,
        "correlation_id": correlation_id,
    }
    if "client_id" in header_cls.__dataclass_fields__:
        header_fields["client_id"] = client_id
    entity_writer(header_cls)(buf, header_cls(**header_fields))
    entity_writer(schema)(buf, body)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    """Decode a response frame (no size prefix): (correlation_id, body)."""
    cls = decoded_class(api_key, api_version)
    header, used = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(cls)(frame, used)
    return header.correlation_id, body
