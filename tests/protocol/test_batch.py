from __future__ import annotations

import datetime
import io
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from samsa.protocol.batch import (
    BATCH_OVERHEAD,
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    InvalidRecords,
    TruncatedBatch,
    check_batch,
    last_sequence,
    parse_header,
    patch_base_offset,
    patch_log_append_time,
    split_batches,
)
from tests.protocol.recordbuild import batch


def kio_batch(n: int, producer_id: int = 7, epoch: int = 3, seq: int = 11) -> bytes:
    ts = TZAwareMicros.parse(datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC))
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=ts,
            offset=i64(i),
            key=b"k%d" % i,
            value=b"value-%d" % i,
            headers=(),
        )
        for i in range(n)
    )
    new = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(epoch),
        base_sequence=i32(seq),
        records=records,
        attributes=i16(0),
    )
    buf = io.BytesIO()
    write_new_batch(buf, new)
    return buf.getvalue()


def test_parse_header_of_kio_written_batch() -> None:
    data = kio_batch(3)
    h = parse_header(data)
    assert (h.base_offset, h.magic, h.record_count, h.last_offset_delta) == (0, 2, 3, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, 11)
    assert h.size == len(data)
    assert h.end == len(data)
    assert h.base_timestamp == h.max_timestamp == 1704164645000
    assert h.last_sequence == 13
    assert h.compression == 0 and h.timestamp_type == 0
    assert not h.is_transactional and not h.is_control
    assert h.crc == crc32c(data[21:])


def test_attribute_properties() -> None:
    h = parse_header(batch((b"k", b"v"), attributes=0x08 | 0x10 | 0x20, compression=4))
    assert h.compression == 4
    assert h.timestamp_type == 1
    assert h.is_transactional and h.is_control


def test_split_batches_returns_positions() -> None:
    a, b = kio_batch(2), batch((b"x", b"y"), (b"z", None))
    headers = split_batches(a + b + a)
    assert [h.position for h in headers] == [0, len(a), len(a) + len(b)]
    assert [h.record_count for h in headers] == [2, 2, 2]


def test_short_buffers_raise_truncated() -> None:
    data = kio_batch(2)
    with pytest.raises(TruncatedBatch):
        parse_header(data[:60])
    for cut in (1, 12, 60, 61, len(data) - 1):
        with pytest.raises(InvalidRecords) as exc:
            split_batches(data[:cut])
        assert exc.value.error_code == CORRUPT_MESSAGE
    with pytest.raises(InvalidRecords):
        split_batches(data + data[:30])


def test_empty_blob_is_invalid() -> None:
    with pytest.raises(InvalidRecords) as exc:
        split_batches(b"")
    assert exc.value.error_code == INVALID_RECORD


def test_crc_mismatch_is_corrupt_message() -> None:
    data = bytearray(kio_batch(2))
    data[-1] ^= 0x01
    with pytest.raises(InvalidRecords) as exc:
        split_batches(bytes(data))
    assert exc.value.error_code == CORRUPT_MESSAGE


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_wrong_magic(magic: int) -> None:
    data = bytearray(kio_batch(1))
    data[16] = magic
    with pytest.raises(InvalidRecords) as exc:
        split_batches(bytes(data))
    assert exc.value.error_code == INVALID_RECORD


def test_bad_batch_length() -> None:
    data = bytearray(kio_batch(1))
    struct.pack_into(">i", data, 8, 10)
    with pytest.raises(InvalidRecords) as exc:
        split_batches(bytes(data))
    assert exc.value.error_code == CORRUPT_MESSAGE


def _with_counts(data: bytes, count: int, delta: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, delta)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_record_count_must_match_offset_delta() -> None:
    data = kio_batch(3)
    for count, delta in ((2, 2), (0, -1), (-1, 2), (3, 5)):
        with pytest.raises(InvalidRecords) as exc:
            split_batches(_with_counts(data, count, delta))
        assert exc.value.error_code == INVALID_RECORD
    # Non-strict (log) validation accepts compacted batches with holes.
    assert check_batch(_with_counts(data, 2, 4), strict=False).record_count == 2


def test_patch_base_offset_keeps_crc_valid() -> None:
    data = bytearray(kio_batch(2) + kio_batch(3))
    headers = split_batches(data)
    patch_base_offset(data, headers[0].position, 100)
    patch_base_offset(data, headers[1].position, 102)
    patched = split_batches(data)
    assert [h.base_offset for h in patched] == [100, 102]
    assert [h.last_offset for h in patched] == [101, 104]
    assert patched[1].next_offset == 105
    decoded, _ = read_batch(bytes(data), headers[1].position)
    assert [r.offset for r in decoded.records] == [102, 103, 104]


def test_patch_log_append_time() -> None:
    data = bytearray(kio_batch(2))
    before = parse_header(data)
    patch_log_append_time(data, 0, 1_800_000_000_123)
    (h,) = split_batches(data)  # CRC recomputed
    assert h.timestamp_type == 1
    assert h.max_timestamp == 1_800_000_000_123
    assert h.base_timestamp == before.base_timestamp
    assert h.attributes == before.attributes | 0x08
    assert bytes(data[BATCH_OVERHEAD:]) == kio_batch(2)[BATCH_OVERHEAD:]


def test_last_sequence_wraps() -> None:
    assert last_sequence(5, 3) == 8
    assert last_sequence(2**31 - 2, 3) == 1
    assert last_sequence(-1, 3) == -1


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_split_batches_on_arbitrary_bytes(data: bytes) -> None:
    try:
        headers = split_batches(data)
    except InvalidRecords:
        return
    assert sum(h.size for h in headers) == len(data)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=255))
def test_split_batches_on_mutated_batches(index: int, value: int) -> None:
    good = kio_batch(2) + batch((b"a", b"b"))
    data = bytearray(good)
    data[index % len(data)] = value
    try:
        headers = split_batches(bytes(data))
    except InvalidRecords:
        return
    # Only the base offset and the leader epoch are outside the CRC.
    assert sum(h.size for h in headers) == len(data)
