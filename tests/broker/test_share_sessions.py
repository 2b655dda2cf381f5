"""Share sessions of the broker's share runtime, in process: epochs, the session limit,
a closing connection ending the sessions last used on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.shares import SessionError, ShareRuntime
from samsa.broker.topics import TopicManager


def _runtime(tmp_path: Path, sessions: int = 2000) -> ShareRuntime:
    config = BrokerConfig(data_dir=tmp_path, values={"group.share.max.share.sessions":
                                                     sessions})
    # sessions never touch topics: an unopened topic manager stands in
    return ShareRuntime(config, TopicManager.__new__(TopicManager), lambda group: {})


def _code(runtime: ShareRuntime, *args: object) -> ErrorCode:
    with pytest.raises(SessionError) as refused:
        runtime.session(*args)  # type: ignore[arg-type]
    return refused.value.code


def test_epochs(tmp_path: Path) -> None:
    rt = _runtime(tmp_path)
    conn = object()
    assert _code(rt, "g", "m", 0, conn, False) == ErrorCode.invalid_share_session_epoch
    assert _code(rt, "g", "m", 1, conn, True) == ErrorCode.share_session_not_found
    session = rt.session("g", "m", 0, conn, True)
    assert session.epoch == 1
    assert rt.session("g", "m", 1, conn, False) is session and session.epoch == 2
    assert _code(rt, "g", "m", 1, conn, True) == ErrorCode.invalid_share_session_epoch
    assert rt.session("g", "m", -1, conn, False) is session  # -1 closes: the caller ends it


def test_the_session_limit(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, sessions=2)
    conn = object()
    rt.session("g", "a", 0, conn, True)
    rt.session("g", "b", 0, conn, True)
    assert _code(rt, "g", "c", 0, conn, True) == ErrorCode.share_session_limit_reached
    rt.session("g", "a", 0, conn, True)  # reopening one is not a new one
    rt.connection_closed(conn)
    assert not rt.sessions
    rt.session("g", "c", 0, conn, True)
