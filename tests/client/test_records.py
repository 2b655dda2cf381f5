"""Client record codec: round trips, compression codecs, CRC checks, timestamps."""

from __future__ import annotations

import random
import struct
import time
from typing import Any

import cramjam
import pytest

from samsa.protocol.records import (
    COMPRESSION_CODES,
    BatchBuilder,
    CorruptRecordError,
    ProducerRecordData,
    _PyRecords,
    decode_batches,
    decompress,
    encode_batch,
)
from tests.records import make_batch

RECORDS = [
    ProducerRecordData(1_700_000_000_123, b"k1", b"v1", [("h", b"x"), ("n", None)]),
    ProducerRecordData(1_700_000_000_456, None, b"v2" * 300, []),
    ProducerRecordData(1_700_000_000_999, b"k3", None, []),
]


@pytest.mark.parametrize("codec", sorted(COMPRESSION_CODES))
def test_round_trip_every_codec(codec: str) -> None:
    data = encode_batch(RECORDS, base_offset=10, compression=COMPRESSION_CODES[codec],
                        producer_id=7, producer_epoch=1, base_sequence=3)
    (batch,) = list(decode_batches(data))
    assert batch.base_offset == 10 and batch.next_offset == 13
    assert batch.producer_id == 7
    assert [(o, ts, k, v, h) for o, ts, k, v, h in batch.records] == [
        (10, 1_700_000_000_123, b"k1", b"v1", [("h", b"x"), ("n", None)]),
        (11, 1_700_000_000_456, None, b"v2" * 300, []),
        (12, 1_700_000_000_999, b"k3", None, []),
    ]


def test_reads_kio_written_batches_with_millisecond_timestamps() -> None:
    data = make_batch([(b"a", b"1"), (None, b"2")], timestamp_ms=1_700_000_000_777)
    (batch,) = list(decode_batches(data + data))[:1]
    assert [r[1] for r in batch.records] == [1_700_000_000_777] * 2
    assert [r[2:4] for r in batch.records] == [(b"a", b"1"), (None, b"2")]


def test_crc_mismatch_raises() -> None:
    data = bytearray(encode_batch(RECORDS))
    data[data.index(b"v2v2") + 1] ^= 0xFF  # inside a value: decodable, wrong CRC
    with pytest.raises(CorruptRecordError):
        list(decode_batches(bytes(data)))
    assert len(list(decode_batches(bytes(data), check_crc=False))) == 1


def test_truncated_last_batch_is_ignored() -> None:
    one = encode_batch(RECORDS[:1])
    two = encode_batch(RECORDS[1:], base_offset=1)
    batches = list(decode_batches(one + two[:-5]))
    assert [b.base_offset for b in batches] == [0]


def test_xerial_framed_snappy() -> None:
    raw = b"hello snappy " * 50
    chunk = bytes(cramjam.snappy.compress_raw(raw))
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(chunk)) + chunk
    assert decompress(2, framed) == raw
    assert decompress(2, chunk) == raw


def test_log_append_time_uses_max_timestamp() -> None:
    data = bytearray(encode_batch(RECORDS))
    data[22] |= 0x08  # timestampType bit in attributes (low byte at offset 22)
    struct.pack_into(">q", data, 35, 42)
    from crc32c import crc32c

    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    (batch,) = list(decode_batches(bytes(data)))
    assert batch.timestamp_type == 1
    assert {r[1] for r in batch.records} == {42}


def _random_records(rnd: random.Random, n: int) -> list[tuple[int | None, bytes | None,
                                                              bytes | None, list[Any]]]:
    base = 1_700_000_000_000
    return [(
        None if rnd.random() < 0.05 else base + rnd.choice([0, 1, -1, 5000, -9000, 10**7]),
        None if rnd.random() < 0.4 else bytes(rnd.choice([0, 5, 127, 128, 9000])),
        None if rnd.random() < 0.1 else rnd.choice([bytes(rnd.choice([0, 100, 8200, 20000])),
                                                    bytearray(b"ba"), memoryview(b"mv")]),
        [] if rnd.random() < 0.7 else [(f"h{j}é", None if j % 2 else b"v" * rnd.randint(0, 300))
                                       for j in range(rnd.randint(1, 3))],
    ) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_c_record_encoder_writes_what_the_python_one_writes(seed: int) -> None:
    """``samsa._speedups.Records`` (the producer's encoder) against its pure-Python twin:
    the same bytes, timestamps and counts, offset deltas past the varint table included."""
    speedups = pytest.importorskip("samsa._speedups")
    rnd = random.Random(seed)
    ours, theirs = speedups.Records(), _PyRecords()
    records = _random_records(rnd, 9000 if seed == 0 else 300)
    for ts, key, value, headers in records:
        if ts is None:  # "now": give both the same clock reading
            ours.append(None, key, value, headers)
            ts = ours.timestamp(ours.count - 1)
            theirs.append(ts, key, value, headers)
        else:
            ours.append(ts, key, value, headers)
            theirs.append(ts, key, value, headers)
    assert bytes(ours._buf) == bytes(theirs._buf)
    assert (ours.count, ours.base_timestamp, ours.max_timestamp) == (
        theirs.count, theirs.base_timestamp, theirs.max_timestamp)
    assert [ours.timestamp(i) for i in range(ours.count)] == [
        theirs.timestamp(i) for i in range(theirs.count)]


def test_record_encoders_refuse_what_is_not_bytes() -> None:
    for records in (_PyRecords(), BatchBuilder()):
        with pytest.raises(TypeError):
            records.append(1, None, 42)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            records.append(1, "text", b"v")  # type: ignore[arg-type]
        assert records.count == 0
        records.append(None, None, b"v")
        assert abs(records.timestamp(0) - time.time() * 1000) < 60_000
        with pytest.raises(IndexError):
            records.timestamp(1)
