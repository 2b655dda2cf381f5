"""build(): fields a version lacks are dropped, a field no version knows raises."""

from __future__ import annotations

import pytest

from samsa.protocol.build import UnknownField, build
from samsa.protocol.codec import response_class


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
