"""Fetch responses spliced from segment bytes decode exactly like the same response encoded
whole by kio, for any order of topics and partitions in the request (topics interleaved, as
librdkafka's rotating fetch start produces), empty partitions, errors and byte limits."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from samsa.broker.handlers import fetch
from samsa.protocol.build import build
from samsa.protocol.codec import (
    decode_response,
    encode_response,
    encode_spliced,
    response_class,
)


@dataclass
class FakeLog:
    """A log of whole 'batches' (pure-code stand-in for PartitionLog.read's contract)."""

    batches: list[bytes]
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.batches)

    def read(self, offset: int, max_bytes: int) -> bytes:
        out = b""
        for batch in self.batches[offset:]:
            if out and len(out) + len(batch) > max_bytes:
                break
            out += batch
            if len(out) >= max_bytes:
                break
        return out


@dataclass
class FakePartition:
    log: FakeLog


TOPIC_IDS = [uuid.UUID(int=i + 1) for i in range(4)]

want = st.tuples(
    st.integers(0, 3),  # topic
    st.integers(0, 5),  # partition
    st.lists(st.integers(1, 300), max_size=4),  # batch sizes; [] is an empty partition
    st.integers(0, 3),  # fetch offset
    st.integers(1, 600),  # partition max bytes
    st.booleans(),  # unknown partition (an error, no data)
)


def _wants(raw: list[tuple[int, int, list[int], int, int, bool]], version: int
           ) -> list[fetch._Want]:
    out = []
    for n, (topic, partition, sizes, offset, max_bytes, unknown) in enumerate(raw):
        key: Any = TOPIC_IDS[topic] if version >= 13 else f"t{topic}"
        batches = [bytes([(n * 7 + i) % 251 + 1]) * size for i, size in enumerate(sizes)]
        part = None if unknown else FakePartition(FakeLog(batches))
        error = ErrorCode.unknown_topic_or_partition if unknown else ErrorCode.none
        out.append(fetch._Want(key, partition, min(offset, len(batches)), max_bytes,
                               part, error))  # type: ignore[arg-type]
    return out


@settings(max_examples=300, deadline=None)
@given(raw=st.lists(want, min_size=1, max_size=12), max_bytes=st.integers(1, 2000),
       version=st.sampled_from([4, 7, 11, 12, 13]))
def test_spliced_fetch_equals_whole(raw: list[Any], max_bytes: int, version: int) -> None:
    wants = _wants(raw, version)
    results, _ = fetch._read(wants, max_bytes)
    cls = response_class(fetch.API_KEY, version)
    fields = {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0}
    whole = build(cls, {**fields, "responses": fetch._group(wants, copy.deepcopy(results),
                                                           version)})
    payloads = fetch._take_payloads(results)
    marked = build(cls, {**fields, "responses": fetch._group(wants, results, version)})
    frame = b"".join(bytes(c) for c in encode_spliced(5, fetch.Spliced(marked, payloads)))
    assert frame == encode_response(5, whole)
    _, decoded = decode_response(frame[4:], fetch.API_KEY, version)
    # every wanted partition is answered once, in request order
    answered = [(t.topic_id if version >= 13 else t.topic, p.partition_index)
                for t in decoded.responses for p in t.partitions]
    assert answered == [(w.topic_key, w.partition) for w in wants]


def test_interleaved_topics_keep_request_order() -> None:
    """t0 p1, t1 p0, t0 p0 (a rotated librdkafka fetch): t0 comes back twice, as in Kafka."""
    raw = [(0, 1, [10], 0, 100, False), (1, 0, [20], 0, 100, False),
           (0, 0, [30], 0, 100, False)]
    wants = _wants(raw, 12)
    results, _ = fetch._read(wants, 1000)
    grouped = fetch._group(wants, results, 12)
    assert [(g["topic"], [p["partition_index"] for p in g["partitions"]]) for g in grouped] \
        == [("t0", [1]), ("t1", [0]), ("t0", [0])]
