"""Client record codec: round trips, compression codecs, CRC checks, timestamps."""

from __future__ import annotations

import struct

import cramjam
import pytest

from samsa.protocol.records import (
    COMPRESSION_CODES,
    CorruptRecordError,
    ProducerRecordData,
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
