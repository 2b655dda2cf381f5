"""Spliced responses decode exactly like responses encoded whole by kio; spliced requests
(the producer's templates) are the bytes kio encodes whole."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import (
    RequestTemplates,
    Spliced,
    decode_response,
    encode_request,
    encode_response,
    encode_spliced,
    placeholder,
    response_class,
)


def _fetch_response(version: int, records: list[bytes]) -> dict:  # type: ignore[type-arg]
    key = "topic_id" if version >= 13 else "topic"
    import uuid

    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": [
        {key: uuid.UUID(int=7) if version >= 13 else "t", "partitions": [
            {"partition_index": i, "error_code": ErrorCode.none, "high_watermark": 10,
             "last_stable_offset": 10, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": r} for i, r in enumerate(records)]}]}


@pytest.mark.parametrize("version", [4, 11, 12, 13])
@pytest.mark.parametrize("sizes", [[0, 5], [300, 0, 70_000], [1]])
def test_spliced_equals_whole(version: int, sizes: list[int]) -> None:
    records = [bytes([i + 1]) * n for i, n in enumerate(sizes)]
    cls = response_class(1, version)
    whole = encode_response(9, build(cls, _fetch_response(version, records)))
    payloads: list[bytes | memoryview] = []
    marked = []
    for r in records:
        if r:
            payloads.append(memoryview(r))
            marked.append(placeholder(len(payloads) - 1))
        else:
            marked.append(r)
    spliced = encode_spliced(9, Spliced(build(cls, _fetch_response(version, marked)), payloads))
    joined = b"".join(bytes(c) for c in spliced)
    assert joined == whole
    cid, body = decode_response(joined[4:], 1, version)
    assert cid == 9
    got = [p.records or b"" for p in body.responses[0].partitions]
    assert got == records


@pytest.mark.parametrize("version", [4, 12])
def test_placeholders_in_any_order(version: int) -> None:
    """Payloads numbered against the entity's order (last partition first) still land in
    their own places; a payload without a placeholder is an error, not a wrong frame."""
    records = [b"a" * 5, b"b" * 300, b"c" * 70]
    cls = response_class(1, version)
    whole = encode_response(3, build(cls, _fetch_response(version, records)))
    payloads: list[bytes | memoryview] = list(reversed(records))
    marked = [placeholder(len(records) - 1 - i) for i in range(len(records))]
    spliced = encode_spliced(3, Spliced(build(cls, _fetch_response(version, marked)), payloads))
    assert b"".join(bytes(c) for c in spliced) == whole
    with pytest.raises(ValueError, match="placeholder 3 missing"):
        encode_spliced(3, Spliced(build(cls, _fetch_response(version, marked)),
                                  [*payloads, b"orphan"]))


def _produce_body(batches: list[bytes]) -> dict:  # type: ignore[type-arg]
    return {"transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 3, "records": batches[0]}]},
        {"name": "u", "partition_data": [{"index": i, "records": b}
                                         for i, b in enumerate(batches[1:])]}]}


@pytest.mark.parametrize("version", [3, 7, 8, 9])
def test_request_templates_splice_like_whole_requests(version: int) -> None:
    """A Produce frame from a cached template, with other batches and correlation ids each
    time, is byte for byte the frame kio encodes whole."""
    templates = RequestTemplates()
    cls = load_request_schema(ApiKey.PRODUCE, version)
    for corr, sizes in enumerate([[5, 0, 300], [70_000, 1, 2], [0, 0, 0], [9, 200, 130]]):
        batches = [bytes([corr + 1]) * n for n in sizes]
        whole = encode_request(ApiKey.PRODUCE, version, corr, "client", build(
            cls, _produce_body(batches)))
        marked = _produce_body([placeholder(i) for i in range(len(batches))])
        chunks = templates.encode(ApiKey.PRODUCE, version, corr, "client", ("shape", 3),
                                  lambda m=marked: build(cls, m), [*batches])
        assert b"".join(chunks) == whole
    assert len(templates._cuts) == 1


def test_request_templates_keep_nothing_without_a_key() -> None:
    templates = RequestTemplates()
    cls = load_request_schema(ApiKey.PRODUCE, 9)
    marked = _produce_body([placeholder(i) for i in range(3)])
    chunks = templates.encode(ApiKey.PRODUCE, 9, 1, None, None, build(cls, marked),
                              [b"a", b"b", b"c"])
    assert b"".join(chunks) == encode_request(ApiKey.PRODUCE, 9, 1, None, build(
        cls, _produce_body([b"a", b"b", b"c"])))
    assert not templates._cuts
