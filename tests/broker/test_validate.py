"""Record-level produce checks (Kafka's LogValidator), on batches built here."""

from __future__ import annotations

import struct

import pytest

from samsa.broker.validate import INVALID_TIMESTAMP, Rejection, check, needs_records
from samsa.log import LogConfig
from samsa.protocol.batch import CORRUPT_MESSAGE, INVALID_RECORD, set_crc, split_batches
from samsa.protocol.records import ProducerRecordData, compress, encode_batch
from tests.protocol.recordbuild import varint

NOW = 1_700_000_000_000
COMPACT = LogConfig(cleanup_policy="compact")
WINDOW = LogConfig(message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=1_000)


def _batch(keys: list[bytes | None], compression: int = 0, ts: list[int] | None = None) -> bytes:
    stamps = ts or [NOW] * len(keys)
    return encode_batch([ProducerRecordData(t, k, b"value", []) for k, t in zip(keys, stamps,
                                                                                  strict=True)],
                        compression=compression)


def _check(buf: bytes, config: LogConfig) -> Rejection | None:
    return check(buf, split_batches(buf)[0], config, NOW, "t-0")


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_keyless_records_on_compacted_topic(compression: int) -> None:
    keys = [b"a", None, b"c", None, b"e"]
    rejection = _check(_batch(keys, compression), COMPACT)
    assert rejection is not None
    assert rejection.error_code == INVALID_RECORD
    assert [i for i, _ in rejection.record_errors] == [1, 3]
    assert all(m == "Compacted topic cannot accept message without key in topic partition t-0"
               for _, m in rejection.record_errors)
    assert rejection.message.startswith(
        "One or more records have been rejected due to 2 record errors in total")
    assert _check(_batch([b"a", b"", b"c"], compression), COMPACT) is None  # empty key is a key
    assert _check(_batch(keys, compression), LogConfig()) is None  # delete policy: not read


def test_timestamps_outside_the_window() -> None:
    stamps = [NOW, NOW - 61_000, NOW + 500, NOW + 2_000, -1]
    rejection = _check(_batch([b"k"] * 5, ts=stamps), WINDOW)
    assert rejection is not None and rejection.error_code == INVALID_TIMESTAMP
    assert [i for i, _ in rejection.record_errors] == [1, 3]
    assert rejection.record_errors[0][1] == (
        f"Timestamp {NOW - 61_000} of message with offset 1 is out of range. The timestamp "
        f"should be within [{NOW - 60_000}, {NOW + 1_000}]")
    assert rejection.message == "One or more records have been rejected due to invalid timestamp"
    # LogAppendTime topics ignore producer timestamps
    assert _check(_batch([b"k"] * 5, ts=stamps),
                  LogConfig(message_timestamp_type="LogAppendTime",
                            message_timestamp_before_max_ms=1)) is None


def test_key_error_wins_and_any_timestamp_error_sets_the_code() -> None:
    config = LogConfig(cleanup_policy="compact", message_timestamp_before_max_ms=1000)
    rejection = _check(_batch([None, b"k"], ts=[NOW - 5000, NOW - 5000]), config)
    assert rejection is not None and rejection.error_code == INVALID_TIMESTAMP
    assert [(i, m.split()[0]) for i, m in rejection.record_errors] == [
        (0, "Compacted"), (1, "Timestamp")]


def test_needs_records() -> None:
    assert not needs_records(LogConfig())
    assert needs_records(COMPACT) and needs_records(WINDOW)
    assert not needs_records(LogConfig(message_timestamp_type="LogAppendTime",
                                       message_timestamp_after_max_ms=1))


def _patch_counts(buf: bytes, count: int) -> bytes:
    out = bytearray(buf)
    struct.pack_into(">i", out, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", out, 57, count)  # recordCount
    set_crc(out, 0)
    return bytes(out)


@pytest.mark.parametrize("compression", [0, 4])
def test_record_count_not_matching_the_records(compression: int) -> None:
    more = _patch_counts(_batch([b"a", b"b", b"c", b"d"], compression), 3)
    rejection = _check(more, COMPACT)
    assert rejection is not None and rejection.error_code == INVALID_RECORD
    assert "records still remaining" in rejection.message
    fewer = _patch_counts(_batch([b"a", b"b"], compression), 3)
    rejection = _check(fewer, COMPACT)
    assert rejection is not None and rejection.error_code == INVALID_RECORD
    assert "premature EOF" in rejection.message


def _raw_batch(offset_deltas: list[int], compression: int = 0) -> bytes:
    body = bytearray()
    for delta in offset_deltas:
        rec = b"\x00" + varint(0) + varint(delta) + varint(1) + b"k" + varint(1) + b"v" + varint(0)
        body += varint(len(rec)) + rec
    payload = compress(compression, bytes(body)) if compression else bytes(body)
    n = len(offset_deltas)
    header = struct.pack(">qiibIhiqqqhii", 0, 49 + len(payload), -1, 2, 0, compression, n - 1,
                         NOW, NOW, -1, -1, -1, n)
    out = bytearray(header + payload)
    set_crc(out, 0)
    return bytes(out)


@pytest.mark.parametrize("compression", [0, 3])
def test_inner_offsets_must_follow_the_header(compression: int) -> None:
    assert _check(_raw_batch([0, 1, 2], compression), COMPACT) is None
    rejection = _check(_raw_batch([0, 2, 3], compression), COMPACT)
    assert rejection is not None and rejection.error_code == CORRUPT_MESSAGE
    assert "offset delta 2" in rejection.message


def test_undecompressable_and_garbled_records() -> None:
    garbage = bytearray(_raw_batch([0, 1]))
    struct.pack_into(">h", garbage, 21, 1)  # claims gzip
    set_crc(garbage, 0)
    rejection = _check(bytes(garbage), COMPACT)
    assert rejection is not None and rejection.error_code == CORRUPT_MESSAGE
    garbled = bytearray(_raw_batch([0, 1]))
    garbled[61] = 0x7F  # first record's length runs past the batch
    set_crc(garbled, 0)
    rejection = _check(bytes(garbled), COMPACT)
    assert rejection is not None and rejection.error_code == INVALID_RECORD


def test_log_append_time_flag_from_a_producer() -> None:
    flagged = bytearray(_batch([b"a", b"b"]))
    struct.pack_into(">h", flagged, 21, 0x08)
    set_crc(flagged, 0)
    lat = LogConfig(message_timestamp_type="LogAppendTime")
    rejection = _check(bytes(flagged), lat)
    assert rejection is not None and rejection.error_code == INVALID_TIMESTAMP
    assert [i for i, _ in rejection.record_errors] == [0, 1]
    assert _check(bytes(flagged), LogConfig()) is None


def test_too_large_batches_are_left_to_the_log() -> None:
    assert _check(_batch([None]), LogConfig(cleanup_policy="compact", max_message_bytes=10)) \
        is None
