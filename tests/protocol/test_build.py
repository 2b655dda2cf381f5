"""build() and convert(): fields a version lacks are dropped, a field no version knows raises."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from samsa.protocol.build import NO_THROTTLE, UnknownField, build, convert
from samsa.protocol.codec import decode_response, encode_response, response_class


def test_field_of_another_version_is_dropped() -> None:
    v4 = response_class(1, 4)  # Fetch v4 has no session_id (v7+)
    r = build(v4, {"throttle_time": 0, "session_id": 0, "responses": []})
    assert not hasattr(r, "session_id")


def test_misspelled_field_raises() -> None:
    with pytest.raises(UnknownField, match="throtle_time"):
        build(response_class(1, 12), {"throtle_time": 0})


def test_misspelled_nested_field_raises() -> None:
    cls = response_class(11, 9)  # JoinGroup
    with pytest.raises(UnknownField, match="metadata_bytes"):
        build(cls, {"members": [{"member_id": "m", "metadata_bytes": b""}]})


def _join_v9() -> Any:
    from kio.schema.join_group.v9 import response as v9

    return v9.JoinGroupResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, generation_id=i32(3),
        protocol_type="consumer", protocol_name="range", leader="a", skip_assignment=True,
        member_id="b", members=(v9.JoinGroupResponseMember(member_id="a", group_instance_id="i",
                                                           metadata=b"x"),))


def test_convert_keeps_an_entity_of_the_asked_version() -> None:
    entity = _join_v9()
    assert convert(entity, response_class(11, 9)) is entity


def test_convert_drops_fields_and_converts_nested_entities() -> None:
    old = convert(_join_v9(), response_class(11, 5))
    assert type(old) is response_class(11, 5)
    assert not hasattr(old, "skip_assignment") and not hasattr(old, "protocol_type")
    (member,) = old.members
    assert type(member).__module__ == "kio.schema.join_group.v5.response"
    assert (member.member_id, member.group_instance_id, member.metadata) == ("a", "i", b"x")
    assert (old.generation_id, old.protocol_name, old.leader) == (3, "range", "a")
    v0 = convert(_join_v9(), response_class(11, 0))
    assert not hasattr(v0.members[0], "group_instance_id")
    _, decoded = decode_response(encode_response(7, v0)[4:], 11, 0)
    assert decoded.members[0].member_id == "a" and decoded.generation_id == 3


def test_convert_fills_fields_the_source_lacks() -> None:
    from kio.schema.offset_fetch.v7 import response as v7

    v1 = response_class(9, 1)  # no error_code, no throttle_time before v2/v3
    entity = v7.OffsetFetchResponse(throttle_time=NO_THROTTLE, topics=(),
                                    error_code=ErrorCode.not_coordinator)
    assert not hasattr(convert(entity, v1), "error_code")
    v5 = response_class(9, 5)
    assert convert(entity, v5).error_code == ErrorCode.not_coordinator


def test_convert_refuses_an_entity_of_another_api() -> None:
    from kio.schema.heartbeat.v4.response import HeartbeatResponse

    with pytest.raises(UnknownField):
        convert(HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none),
                response_class(8, 2))  # OffsetCommit has no error_code at the top


def test_a_negative_start_time_of_describe_transactions_is_decoded() -> None:
    """Kafka sends -1 for no open transaction; kio refuses a negative datetime, so the
    response is decoded with samsa.protocol.kio_fixes' schema (the start in ms)."""
    from kio.schema.describe_transactions.v0 import response as v0

    from samsa.protocol.build import build
    from samsa.protocol.codec import decode_response, encode_response

    row = {"error_code": 0, "transactional_id": "t", "transaction_state": "Empty",
           "transaction_timeout": 60000, "transaction_start_time": -1, "producer_id": 7,
           "producer_epoch": 0, "topics": []}
    resp = v0.DescribeTransactionsResponse(throttle_time=build(
        v0.DescribeTransactionsResponse, {"transaction_states": []}).throttle_time,
        transaction_states=(build(v0.TransactionState, row),))
    frame = encode_response(3, resp)[4:]
    correlation, body = decode_response(frame, 65, 0)
    (state,) = body.transaction_states
    assert (correlation, state.transaction_start_time, state.producer_id) == (3, -1, 7)
