"""Test harness: answer group APIs with samsa's pure coordinator in front of a broker.

Until the broker serves the group APIs itself, client group tests run through this proxy.
It forwards every request to the broker except the group APIs (FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit/Fetch/Delete, Describe/List/DeleteGroups),
which it answers with :class:`samsa.coordinator.Coordinator` (state in memory, records not
persisted). It adds those APIs to the broker's ApiVersions answer. Responses on a
connection keep request order, as a Kafka broker's do. The broker must advertise the
proxy's port (``advertised.port``) so clients reach it for everything.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import struct
import threading
import time
import traceback
from typing import Any

from kio.index import load_response_schema

from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
    Coordinator,
    CoordinatorConfig,
    DeleteGroups,
    DescribeGroups,
    FetchGroup,
    FetchTopic,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
)
from samsa.protocol.build import build, millis
from samsa.protocol.codec import decode_request, decode_response, encode_response, peek_header

GROUP_APIS: dict[int, tuple[int, int]] = {
    8: (2, 8), 9: (1, 7), 10: (0, 4), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5),
    15: (0, 5), 16: (0, 4), 42: (0, 2), 47: (0, 0)}


class _Slot:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: bytes | None = None


class _Conn:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.slots: collections.deque[_Slot] = collections.deque()
        self.forwarded: collections.deque[tuple[_Slot, int, int]] = collections.deque()
        self.lock = threading.Lock()
        self.closed = False

    def flush(self) -> None:
        with self.lock:
            out = []
            while self.slots and self.slots[0].data is not None:
                out.append(self.slots.popleft().data)
            if out and not self.closed:
                with contextlib.suppress(OSError):
                    self.client.sendall(b"".join(x for x in out if x))


class GroupProxy:
    """See module docstring."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.lock = threading.RLock()
        self.deadlines: dict[Any, int] = {}
        self.coord = Coordinator(CoordinatorConfig(initial_rebalance_delay_ms=0,
                                                   min_session_timeout_ms=1000), self)
        now = self._now()
        for p in range(self.coord.config.offsets_topic_num_partitions):
            self.coord.load(p, [], now)
        self.target: tuple[str, int] | None = None
        self.errors: list[str] = []
        """Tracebacks of failures inside the proxy (tests assert it stays empty)."""
        self._closed = threading.Event()

    # Timer protocol for the coordinator.
    def schedule(self, key: Any, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms

    def cancel(self, key: Any) -> None:
        self.deadlines.pop(key, None)

    @staticmethod
    def _now() -> int:
        return int(time.monotonic() * 1000)

    def start(self, target: tuple[str, int]) -> GroupProxy:
        self.target = target
        threading.Thread(target=self._accept, daemon=True).start()
        threading.Thread(target=self._timers, daemon=True).start()
        return self

    def close(self) -> None:
        self._closed.set()
        self.listener.close()

    def _timers(self) -> None:
        while not self._closed.wait(0.01):
            now = self._now()
            with self.lock:
                due = [k for k, d in self.deadlines.items() if d <= now]
                for key in due:
                    if self.deadlines.get(key, now + 1) <= now:
                        del self.deadlines[key]
                        try:
                            self._deliver(self.coord.fire(key, now))
                        except Exception:
                            self.errors.append(traceback.format_exc())

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.target is not None
            upstream = socket.create_connection(self.target)
            conn = _Conn(client, upstream)
            threading.Thread(target=self._read_client, args=(conn,), daemon=True).start()
            threading.Thread(target=self._read_upstream, args=(conn,), daemon=True).start()

    @staticmethod
    def _frame(sock: socket.socket) -> bytes | None:
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        (size,) = struct.unpack(">i", head)
        body = bytearray()
        while len(body) < size:
            chunk = sock.recv(min(size - len(body), 1 << 20))
            if not chunk:
                return None
            body += chunk
        return bytes(body)

    def _read_client(self, conn: _Conn) -> None:
        with contextlib.suppress(OSError):
            while (frame := self._frame(conn.client)) is not None:
                api, version, _corr = peek_header(frame)
                if api in GROUP_APIS:
                    slot = _Slot()
                    with conn.lock:
                        conn.slots.append(slot)
                    request = decode_request(frame, GROUP_APIS)
                    try:
                        self._handle(conn, slot, request)
                    except Exception:
                        self.errors.append(traceback.format_exc())
                        raise
                    conn.flush()
                    continue
                if api == 0 and self._acks_zero(frame):
                    conn.upstream.sendall(struct.pack(">i", len(frame)) + frame)
                    continue
                slot = _Slot()
                with conn.lock:
                    conn.slots.append(slot)
                    conn.forwarded.append((slot, api, version))
                conn.upstream.sendall(struct.pack(">i", len(frame)) + frame)
        self._close(conn)

    @staticmethod
    def _acks_zero(frame: bytes) -> bool:
        try:
            return int(decode_request(frame, {0: (3, 9)}).body.acks) == 0
        except Exception:
            return False

    def _read_upstream(self, conn: _Conn) -> None:
        with contextlib.suppress(OSError):
            while (frame := self._frame(conn.upstream)) is not None:
                with conn.lock:
                    slot, api, version = conn.forwarded.popleft()
                if api == 18:
                    frame = self._patch_api_versions(frame, version)
                    slot.data = frame
                else:
                    slot.data = struct.pack(">i", len(frame)) + frame
                conn.flush()
        self._close(conn)

    def _close(self, conn: _Conn) -> None:
        conn.closed = True
        for s in (conn.client, conn.upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _patch_api_versions(self, frame: bytes, version: int) -> bytes:
        corr, resp = decode_response(frame, 18, version)
        keys = [{"api_key": int(k.api_key), "min_version": int(k.min_version),
                 "max_version": int(k.max_version)} for k in resp.api_keys
                if int(k.api_key) not in GROUP_APIS]
        keys += [{"api_key": k, "min_version": lo, "max_version": hi}
                 for k, (lo, hi) in GROUP_APIS.items()]
        patched = build(load_response_schema(18, version),
                        {"error_code": resp.error_code, "api_keys": keys,
                         "throttle_time": 0})
        return encode_response(corr, patched)

    # ---- group APIs ---------------------------------------------------------------------

    def _handle(self, conn: _Conn, slot: _Slot, request: Any) -> None:
        api, version, body = request.api_key, request.api_version, request.body
        token = (conn, slot, request.correlation_id, api, version)
        if api == 10:
            key = body.key if version < 4 else body.coordinator_keys[0]
            node = {"node_id": 0, "host": "127.0.0.1", "port": self.port, "error_code": 0,
                    "error_message": None, "key": key}
            mapping = {"coordinators": [node]} if version >= 4 else node
            self._answer(token, mapping)
            return
        event = _event(api, version, body, request.client_id or "")
        with self.lock:
            self._deliver(self.coord.handle(event, self._now(), reply_to=token))

    def _deliver(self, result: Any) -> None:
        for reply in result.replies:
            token = reply.token
            self._answer(token, _mapping(token[3], token[4], reply.response))
            token[0].flush()

    @staticmethod
    def _answer(token: Any, mapping: dict[str, Any]) -> None:
        _, slot, corr, api, version = token
        slot.data = encode_response(corr, build(load_response_schema(api, version), mapping))
        token[0].flush()


def _event(api: int, version: int, b: Any, client_id: str) -> Any:
    if api == 11:
        rebalance = getattr(b, "rebalance_timeout", None)
        return JoinGroup(
            b.group_id, b.member_id, b.protocol_type,
            tuple((p.name, bytes(p.metadata)) for p in b.protocols),
            millis(b.session_timeout),
            millis(rebalance) if rebalance is not None else millis(b.session_timeout),
            getattr(b, "group_instance_id", None), client_id, "/127.0.0.1",
            getattr(b, "reason", None), version >= 4, version >= 9)
    if api == 14:
        return SyncGroup(b.group_id, b.generation_id, b.member_id,
                         tuple((a.member_id, bytes(a.assignment)) for a in b.assignments),
                         getattr(b, "group_instance_id", None),
                         getattr(b, "protocol_type", None), getattr(b, "protocol_name", None))
    if api == 12:
        return Heartbeat(b.group_id, b.generation_id, b.member_id,
                         getattr(b, "group_instance_id", None))
    if api == 13:
        if version >= 3:
            members = tuple(LeavingMember(m.member_id, m.group_instance_id,
                                          getattr(m, "reason", None)) for m in b.members)
        else:
            members = (LeavingMember(b.member_id),)
        return LeaveGroup(b.group_id, members)
    if api == 8:
        gen = getattr(b, "generation_id_or_member_epoch", getattr(b, "generation_id", -1))
        return OffsetCommit(
            b.group_id,
            tuple(CommitTopic(t.name, tuple(CommitPartition(
                p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                for p in t.partitions)) for t in b.topics),
            gen, b.member_id, getattr(b, "group_instance_id", None))
    if api == 9:
        topics = None if b.topics is None else tuple(
            FetchTopic(t.name, tuple(t.partition_indexes)) for t in b.topics)
        return OffsetFetch((FetchGroup(b.group_id, topics),),
                           bool(getattr(b, "require_stable", False)))
    if api == 47:
        return OffsetDelete(b.group_id, tuple(FetchTopic(t.name, tuple(
            p.partition_index for p in t.partitions)) for t in b.topics))
    if api == 15:
        return DescribeGroups(tuple(b.groups))
    if api == 16:
        return ListGroups(tuple(getattr(b, "states_filter", ())))
    if api == 42:
        return DeleteGroups(tuple(b.groups_names))
    raise AssertionError(api)


def _errors(topics: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "partitions": [{"partition_index": p.partition,
                                             "error_code": p.error_code}
                                            for p in t.partitions]} for t in topics]


def _mapping(api: int, version: int, r: Any) -> dict[str, Any]:
    if api == 11:
        return {"error_code": r.error_code, "generation_id": r.generation_id,
                "protocol_type": r.protocol_type,
                "protocol_name": r.protocol_name if version >= 7 else (r.protocol_name or ""),
                "leader": r.leader, "skip_assignment": r.skip_assignment,
                "member_id": r.member_id,
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "metadata": m.metadata} for m in r.members]}
    if api == 14:
        return {"error_code": r.error_code, "assignment": r.assignment,
                "protocol_type": r.protocol_type, "protocol_name": r.protocol_name}
    if api == 12:
        return {"error_code": r.error_code}
    if api == 13:
        code = r.error_code
        if version < 3 and r.members:
            code = code or r.members[0].error_code
        return {"error_code": code, "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "error_code": m.error_code} for m in r.members]}
    if api == 8:
        return {"topics": _errors(r.topics)}
    if api == 9:
        g = r.groups[0]
        return {"error_code": g.error_code, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition, "committed_offset": p.committed_offset,
                 "committed_leader_epoch": p.committed_leader_epoch, "metadata": p.metadata,
                 "error_code": p.error_code} for p in t.partitions]} for t in g.topics]}
    if api == 47:
        return {"error_code": r.error_code, "topics": _errors(r.topics)}
    if api == 15:
        return {"groups": [{"error_code": g.error_code, "group_id": g.group_id,
                            "group_state": g.state, "protocol_type": g.protocol_type,
                            "protocol_data": g.protocol_data,
                            "members": [{"member_id": m.member_id,
                                         "group_instance_id": m.group_instance_id,
                                         "client_id": m.client_id,
                                         "client_host": m.client_host,
                                         "member_metadata": m.metadata,
                                         "member_assignment": m.assignment}
                                        for m in g.members]} for g in r.groups]}
    if api == 16:
        return {"error_code": r.error_code, "groups": [
            {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
             "group_type": g.group_type} for g in r.groups]}
    if api == 42:
        return {"results": [{"group_id": g.group_id, "error_code": g.error_code}
                            for g in r.groups]}
    raise AssertionError(api)
