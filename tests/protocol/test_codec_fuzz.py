"""The request decoding path never fails with anything but FrameError/UnsupportedApi."""

from __future__ import annotations

import contextlib
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from samsa.broker.handlers import registry
from samsa.protocol.codec import FrameError, decode_request, encode_request

SUPPORTED = {key: versions for key, (versions, _) in registry().items()}


def _valid_frame() -> bytes:
    body = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="t"),),
                           allow_auto_topic_creation=True,
                           include_topic_authorized_operations=False)
    return encode_request(3, 12, 1, "fuzz", body)[4:]


def test_valid_frame_decodes() -> None:
    req = decode_request(_valid_frame(), SUPPORTED)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (3, 12, 1, "fuzz")
    assert req.body.topics[0].name == "t"


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    with contextlib.suppress(FrameError):
        decode_request(data, SUPPORTED)


@settings(max_examples=400, deadline=None)
@given(
    key=st.sampled_from(sorted(SUPPORTED)),
    version=st.integers(-1, 20),
    tail=st.binary(max_size=120),
)
def test_random_bodies_for_every_api(key: int, version: int, tail: bytes) -> None:
    frame = struct.pack(">hhi", key, version, 9) + tail
    with contextlib.suppress(FrameError):
        decode_request(frame, SUPPORTED)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_valid_frame(data: st.DataObject) -> None:
    frame = bytearray(_valid_frame())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    with contextlib.suppress(FrameError):
        decode_request(bytes(frame[:cut]), SUPPORTED)
