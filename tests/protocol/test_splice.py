"""Spliced responses decode exactly like responses encoded whole by kio."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from samsa.protocol.build import build
from samsa.protocol.codec import (
    Spliced,
    decode_response,
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
