"""Byte-exact record encodings, computed by hand from Kafka's formats."""

import pytest

from samsa.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)


def i16(v: int) -> bytes:
    return v.to_bytes(2, "big", signed=True)


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def i64(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def s(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def b(v: bytes) -> bytes:
    return i32(len(v)) + v


def test_offset_commit_key_v1() -> None:
    key = encode_offset_commit_key("grp", "topic", 7)
    assert key == b"\x00\x01" + b"\x00\x03grp" + b"\x00\x05topic" + b"\x00\x00\x00\x07"
    assert decode_key(key) == OffsetCommitKey("grp", "topic", 7)


def test_offset_commit_key_v0_decodes() -> None:
    assert decode_key(i16(0) + s("g") + s("t") + i32(1)) == OffsetCommitKey("g", "t", 1)


def test_group_metadata_key_v2() -> None:
    key = encode_group_metadata_key("grp")
    assert key == b"\x00\x02\x00\x03grp"
    assert decode_key(key) == GroupMetadataKey("grp")


def test_unknown_key_versions_are_skipped() -> None:
    assert decode_key(i16(3) + s("g")) is None


def test_offset_commit_value_v3() -> None:
    value = OffsetCommitValue(offset=10, leader_epoch=5, metadata="m", commit_timestamp=1000)
    raw = encode_offset_commit_value(value)
    assert raw == (
        b"\x00\x03"
        + b"\x00\x00\x00\x00\x00\x00\x00\x0a"
        + b"\x00\x00\x00\x05"
        + b"\x00\x01m"
        + b"\x00\x00\x00\x00\x00\x00\x03\xe8"
    )
    assert decode_offset_commit_value(raw) == value


def test_offset_commit_value_v1_when_expire_timestamp() -> None:
    value = OffsetCommitValue(10, -1, "", 1000, 5000)
    raw = encode_offset_commit_value(value)
    assert raw == i16(1) + i64(10) + s("") + i64(1000) + i64(5000)
    assert decode_offset_commit_value(raw) == value


def test_offset_commit_value_old_versions_decode() -> None:
    v0 = i16(0) + i64(3) + s("x") + i64(9)
    v2 = i16(2) + i64(3) + s("x") + i64(9)
    expected = OffsetCommitValue(3, -1, "x", 9, -1)
    assert decode_offset_commit_value(v0) == expected
    assert decode_offset_commit_value(v2) == expected


def test_offset_commit_value_v4_flexible_decodes() -> None:
    # compact string: uvarint(len + 1); then an empty tagged-field section
    raw = i16(4) + i64(3) + i32(2) + b"\x02x" + i64(9) + b"\x00"
    assert decode_offset_commit_value(raw) == OffsetCommitValue(3, 2, "x", 9, -1)


MEMBER = MemberMetadataValue(
    member_id="m1",
    group_instance_id="i1",
    client_id="c",
    client_host="/h",
    rebalance_timeout=300000,
    session_timeout=45000,
    subscription=b"\x01\x02",
    assignment=b"\x03",
)
GROUP = GroupMetadataValue(
    protocol_type="consumer",
    generation=2,
    protocol="range",
    leader="m1",
    current_state_timestamp=1234,
    members=(MEMBER,),
)


def test_group_metadata_value_v3() -> None:
    raw = encode_group_metadata_value(GROUP)
    expected = (
        i16(3)
        + s("consumer")
        + i32(2)
        + s("range")
        + s("m1")
        + i64(1234)
        + i32(1)
        + s("m1")
        + s("i1")
        + s("c")
        + s("/h")
        + i32(300000)
        + i32(45000)
        + b(b"\x01\x02")
        + b(b"\x03")
    )
    assert raw == expected
    assert decode_group_metadata_value(raw) == GROUP


def test_empty_group_metadata_value_with_nulls() -> None:
    value = GroupMetadataValue("consumer", 3, None, None, -1, ())
    raw = encode_group_metadata_value(value)
    assert raw == i16(3) + s("consumer") + i32(3) + i16(-1) + i16(-1) + i64(-1) + i32(0)
    assert decode_group_metadata_value(raw) == value


def test_group_metadata_value_old_versions_decode() -> None:
    member_v0 = s("m1") + s("c") + s("/h") + i32(45000) + b(b"\x01") + b(b"")
    v0 = i16(0) + s("consumer") + i32(1) + s("range") + s("m1") + i32(1) + member_v0
    got = decode_group_metadata_value(v0)
    assert got.current_state_timestamp == -1
    assert got.members[0].rebalance_timeout == 45000
    assert got.members[0].group_instance_id is None

    member_v1 = s("m1") + s("c") + s("/h") + i32(1000) + i32(45000) + b(b"\x01") + b(b"")
    v2 = i16(2) + s("consumer") + i32(1) + s("range") + s("m1") + i64(77) + i32(1) + member_v1
    got = decode_group_metadata_value(v2)
    assert got.current_state_timestamp == 77
    assert got.members[0].rebalance_timeout == 1000


def test_group_metadata_value_v4_flexible_decodes() -> None:
    def cs(v: str) -> bytes:
        return bytes([len(v) + 1]) + v.encode()

    member = cs("m1") + b"\x00" + cs("c") + cs("/h") + i32(1) + i32(2) + b"\x02\x09" + b"\x01"
    member += b"\x00"  # member tagged fields
    raw = i16(4) + cs("consumer") + i32(5) + cs("range") + cs("m1") + i64(8) + b"\x02" + member
    raw += b"\x00"
    got = decode_group_metadata_value(raw)
    assert got.generation == 5
    assert got.members == (MemberMetadataValue("m1", None, "c", "/h", 1, 2, b"\x09", b""),)


def test_truncated_record_raises() -> None:
    raw = encode_group_metadata_value(GROUP)
    with pytest.raises(RecordDecodeError):
        decode_group_metadata_value(raw[:-1])
    with pytest.raises(RecordDecodeError):
        decode_offset_commit_value(i16(9) + i64(1))


def test_serde_round_trips_typed_records() -> None:
    from samsa.coordinator.records import deserialize, serialize

    records = [
        (OffsetCommitKey("g", "t", 3), OffsetCommitValue(7, 1, "m", 99, -1)),
        (OffsetCommitKey("g", "t", 3), OffsetCommitValue(7, -1, "", 99, 500)),
        (OffsetCommitKey("g", "t", 3), None),
        (GroupMetadataKey("g"), GROUP),
        (GroupMetadataKey("g"), None),
    ]
    for key, value in records:
        assert deserialize(*serialize(key, value)) == (key, value)
    # key 3 is a consumer group (KIP-848) record now; 15 (a share group's state partition
    # metadata) and 17+ (streams groups) are read and skipped
    assert deserialize(i16(15) + s("g"), b"\x00\x00") is None
    assert deserialize(i16(17) + s("g"), b"\x00\x00") is None
