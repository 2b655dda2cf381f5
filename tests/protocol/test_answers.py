"""Answers encoded once (protocol.answers): the bytes kio encodes whole for the request's
version, with the request's correlation id; equal answers are encoded once."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from kio.schema.consumer_group_heartbeat.v1 import response as cgh
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.static.primitive import i32, i32Timedelta

from samsa.protocol.answers import AnswerMemo
from samsa.protocol.build import NO_THROTTLE, convert
from samsa.protocol.codec import decode_response, encode_response, response_class


def _heartbeat(code: int) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode(code))


@pytest.mark.parametrize("version", [0, 1, 3, 4])
@pytest.mark.parametrize("code", [0, 27, 82])
def test_an_encoded_answer_is_kios_frame_for_the_version(version: int, code: int) -> None:
    memo = AnswerMemo(12, _heartbeat)
    whole = encode_response(4242, convert(_heartbeat(code), response_class(12, version)))
    assert memo(version, code).frame(4242) == whole
    cid, body = decode_response(memo(version, code).frame(-7)[4:], 12, version)
    assert cid == -7 and body.error_code == code


def _member(answer: tuple[str, int]) -> cgh.ConsumerGroupHeartbeatResponse:
    member_id, epoch = answer
    return cgh.ConsumerGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        member_id=member_id, member_epoch=i32(epoch),
        heartbeat_interval=i32Timedelta.parse(timedelta(milliseconds=5000)),
        assignment=cgh.Assignment(topic_partitions=(cgh.TopicPartitions(
            topic_id=uuid.UUID(int=1), partitions=(i32(0),)),)) if epoch == 9 else None)


def test_equal_answers_are_built_once_and_the_memo_is_bounded() -> None:
    built: list[tuple[str, int]] = []

    def build(answer: tuple[str, int]) -> cgh.ConsumerGroupHeartbeatResponse:
        built.append(answer)
        return _member(answer)

    memo = AnswerMemo(68, build, limit=2)
    first = memo(1, ("m1", 3))
    assert memo(1, ("m1", 3)) is first and built == [("m1", 3)]
    assert memo(0, ("m1", 3)).frame(1) == encode_response(1, convert(
        _member(("m1", 3)), response_class(68, 0)))  # each version its own bytes
    memo(1, ("m2", 3))  # a third answer: the memo starts over
    memo(1, ("m1", 3))
    assert built == [("m1", 3), ("m1", 3), ("m2", 3), ("m1", 3)]
    _, body = decode_response(memo(1, ("m2", 9)).frame(5)[4:], 68, 1)
    assert body.member_id == "m2" and body.member_epoch == 9
    assert body.assignment.topic_partitions[0].partitions == (0,)
