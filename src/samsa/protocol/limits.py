"""Decode limits: a request's declared sizes checked before kio allocates anything.

kio's native reader sizes an array by its declared count before reading an element, so a
20-byte request declaring two billion topics makes it allocate 16 GiB and abort the whole
process. Kafka refuses such frames before allocating (its generated readers check every
count against the bytes left; Kafka 4.4 bounds tagged-field sections too). :func:`check`
walks a request body the same way, without building anything: every array count, string,
bytes and tagged field must fit in the bytes left of the frame, and a tagged-field section
may not declare more fields than bytes left. A frame that fails raises
:class:`~samsa.protocol.codec.FrameError` (the connection is closed, as for any frame that
does not decode).

A walk is a list of small steps compiled once per request schema (:func:`_plan`).
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

Step = Callable[[Any, int, int], int]
"""(buffer, position, end) -> the position after the field; raises _Invalid."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FIXED = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
          "float64": 8, "uuid": 16, "timedelta_i32": 4, "timedelta_i64": 8, "error_code": 2,
          "datetime_i64": 8}


class LimitExceeded(ValueError):
    """A declared size larger than what is left of the frame."""


def _uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise LimitExceeded("malformed unsigned varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fixed(size: int) -> Step:
    def step(buf: Any, pos: int, end: int) -> int:
        if pos + size > end:
            raise LimitExceeded("frame ends inside a field")
        return pos + size
    return step


def _length(buf: Any, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length or count: uvarint(n + 1) when ``flexible``, else int32 (``wide``) or int16;
    -1 for null."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    width, fmt = (4, _I32) if wide else (2, _I16)
    if pos + width > end:
        raise LimitExceeded("frame ends inside a length")
    return fmt.unpack_from(buf, pos)[0], pos + width


def _sized(kind: str, flexible: bool) -> Step:
    """A string (int16 length) or bytes/records (int32 length), or their compact forms."""
    wide = kind != "string"

    def step(buf: Any, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, wide)
        if n < 0:
            return pos  # null
        if n > end - pos:
            raise LimitExceeded(f"a {kind} of {n} bytes with {end - pos} left")
        return pos + n
    return step


def _array(item: Step, flexible: bool) -> Step:
    def step(buf: Any, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, True)
        if n > end - pos:
            raise LimitExceeded(f"an array of {n} elements with {end - pos} bytes left")
        for _ in range(n):
            pos = item(buf, pos, end)
        return pos
    return step


def tagged_section(buf: Any, pos: int, end: int, known: dict[int, Step] | None = None) -> int:
    """Skip a tagged-field section whose count and sizes fit in the frame; the fields in
    ``known`` (tag -> walk) are walked within their size."""
    count, pos = _uvarint(buf, pos, end)
    if count > end - pos:
        raise LimitExceeded(f"{count} tagged fields with {end - pos} bytes left")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        if size > end - pos:
            raise LimitExceeded(f"a tagged field of {size} bytes with {end - pos} left")
        if known and tag in known:
            known[tag](buf, pos, pos + size)
        pos += size
    return pos


def _inner(tp: Any) -> tuple[Any, bool]:
    """(the element or field type without None, whether it is a tuple)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    if origin is tuple:
        return _inner(typing.get_args(tp)[0])[0], True
    return tp, False


_PLANS: dict[type[Any], Step] = {}


def _plan(cls: type[Any]) -> Step:
    """The walk of one entity class (one API version), compiled once."""
    found = _PLANS.get(cls)
    if found is None:
        found = _PLANS[cls] = _compile(cls)
    return found


def _compile(cls: type[Any]) -> Step:
    flexible = bool(cls.__flexible__)
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        inner, is_tuple = _inner(hints[f.name])
        kafka_type = f.metadata.get("kafka_type")
        if dataclasses.is_dataclass(inner):
            one = _plan(typing.cast(type[Any], inner))
        elif kafka_type in ("string", "bytes", "records"):
            one = _sized(kafka_type, flexible)
        elif kafka_type in _FIXED:
            one = _fixed(_FIXED[kafka_type])
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unknown kafka type {kafka_type!r}")
        one = _array(one, flexible) if is_tuple else one
        if "tag" in f.metadata:  # in the tagged section
            tagged[int(f.metadata["tag"])] = one
        else:
            steps.append(one)
    if flexible:
        steps.append(lambda buf, pos, end: tagged_section(buf, pos, end, tagged))

    def walk(buf: Any, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        return pos
    return walk


def header_end(frame: Any, flexible: bool) -> int:
    """Where a request header (v1, or v2 with its tagged fields) ends."""
    end = len(frame)
    pos = _sized("string", False)(frame, 8, end)  # api key, version, correlation id, client id
    return tagged_section(frame, pos, end) if flexible else pos


_COUNTED: dict[type[Any], bool] = {}


def _counted(cls: type[Any]) -> bool:
    """Does ``cls`` (or an entity in it) have an array or a tagged-field section, what kio's
    reader sizes by a declared count? Strings and bytes it reads only once they fit
    (BufferUnderflow otherwise), so a request of a version with neither (a Heartbeat v0-v3)
    needs no walk."""
    found = _COUNTED.get(cls)
    if found is None:
        found = bool(cls.__flexible__)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            inner, is_tuple = _inner(hints[f.name])
            found = found or is_tuple or (dataclasses.is_dataclass(inner)
                                          and _counted(typing.cast(type[Any], inner)))
        _COUNTED[cls] = found
    return found


def check(frame: Any, schema: type[Any]) -> None:
    """LimitExceeded when ``frame`` (a request without its size prefix) declares a size that
    does not fit in it (where a wrong size could make kio allocate: :func:`_counted`)."""
    if not _counted(schema):
        return
    end = len(frame)
    _plan(schema)(frame, header_end(frame, bool(schema.__flexible__)), end)
