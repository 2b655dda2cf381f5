"""Decode limits: declared sizes that do not fit in the frame are refused before kio
allocates (samsa.protocol.limits)."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from samsa.protocol.codec import FrameError, decode_request, encode_request
from samsa.protocol.limits import LimitExceeded, check

SERVED = {0: (3, 9), 3: (0, 12)}


def _uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


H1 = struct.pack(">hhih", 3, 1, 7, 1) + b"x"  # Metadata v1 header
H9 = struct.pack(">hhih", 3, 9, 7, 1) + b"x"  # Metadata v9 header (then its tagged fields)

BAD = {
    "legacy array": H1 + struct.pack(">i", 0x7FFFFFFF),
    "compact array": H9 + b"\x00" + _uvarint(0x7FFFFFF0),
    "header tagged count": H9 + _uvarint(0x7FFFFFF0),
    "header tagged size": H9 + b"\x01\x05" + _uvarint(0x7FFFFFF0),
    "body tagged count": H9 + b"\x00\x01\x01\x00\x00" + _uvarint(0x7FFFFFF0),
    "compact string": H9 + b"\x00\x02" + _uvarint(0x7FFFFFF0),
    "legacy string": H1 + struct.pack(">ih", 1, 0x7FFF),
    "records": struct.pack(">hhih", 0, 3, 7, 1) + b"x" + struct.pack(
        ">hhiihbiii", -1, 1, 100, 1, 1, ord("t"), 1, 0, 0x7FFFFFF0),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_oversized_declarations_are_refused(name: str) -> None:
    with pytest.raises(FrameError, match="left"):
        decode_request(BAD[name], SERVED)


def test_an_impossible_array_does_not_abort_the_process() -> None:
    """Without the limits, kio's native reader allocates 16 GiB for this 20-byte request
    and the process aborts; it must be an ordinary FrameError."""
    code = (
        "import resource, struct\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "from samsa.protocol.codec import FrameError, decode_request\n"
        f"frame = {BAD['legacy array']!r}\n"
        "try:\n    decode_request(frame, {3: (0, 12)})\n"
        "except FrameError:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "refused", done.stderr[-500:]


def test_valid_requests_pass_the_limits() -> None:
    from kio.index import load_request_schema

    from samsa.protocol.build import build

    schema = load_request_schema(3, 12)
    body = build(schema, {"topics": [{"name": f"t{i}"} for i in range(50)],
                          "allow_auto_topic_creation": False})
    frame = encode_request(3, 12, 1, "client", body)[4:]
    check(frame, schema)
    assert len(decode_request(frame, SERVED).body.topics) == 50
    with pytest.raises(LimitExceeded):
        check(frame[:-30], schema)


def test_a_request_without_arrays_or_tags_is_refused_by_the_reader() -> None:
    """Heartbeat v3 has neither arrays nor tagged fields: no walk, and a string declared
    longer than the frame is still a FrameError (kio reads a string only once it fits)."""
    from kio.index import load_request_schema

    from samsa.protocol.limits import _counted

    assert not _counted(load_request_schema(12, 3))
    assert _counted(load_request_schema(12, 4)) and _counted(load_request_schema(3, 1))
    frame = struct.pack(">hhih", 12, 3, 7, 1) + b"x" + struct.pack(">h", 0x7FFF) + b"g"
    with pytest.raises(FrameError):
        decode_request(frame, {12: (0, 4)})
