"""A tiny Kafka broker, just enough for a real client to join a group and rejoin once.

It answers ApiVersions, Metadata, FindCoordinator, JoinGroup (the one member becomes leader),
SyncGroup (echoes the leader's assignment), OffsetFetch (offset 0), Heartbeat (asks for a
rebalance until the client rejoins, so that a cooperative client rejoins with its owned
partitions), LeaveGroup, and parks everything else (Fetch, ListOffsets, OffsetCommit). It
records every JoinGroup's protocols and every SyncGroup's assignments: the bytes a real
librdkafka client sends.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64

API_VERSIONS, METADATA, FIND_COORDINATOR, JOIN_GROUP = 18, 3, 10, 11
SYNC_GROUP, HEARTBEAT, OFFSET_FETCH, LEAVE_GROUP = 14, 12, 9, 13
# Advertised ranges: kept to non-flexible versions except ApiVersions itself.
SUPPORTED = {
    API_VERSIONS: (0, 3),
    METADATA: (0, 4),
    FIND_COORDINATOR: (0, 2),
    JOIN_GROUP: (0, 5),
    SYNC_GROUP: (0, 3),
    HEARTBEAT: (0, 3),
    OFFSET_FETCH: (0, 5),
    LEAVE_GROUP: (0, 2),
    8: (0, 7),  # OffsetCommit (parked)
    2: (0, 5),  # ListOffsets (parked)
    1: (0, 11),  # Fetch (parked)
}
RESPONDED = {API_VERSIONS, METADATA, FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
             OFFSET_FETCH, LEAVE_GROUP}
ZERO = datetime.timedelta(0)


@dataclass
class Capture:
    topics: dict[str, int]
    broker_rack: str = "rack-a"
    joins: list[dict[str, bytes]] = field(default_factory=list)
    syncs: list[dict[str, bytes]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    joins_wanted: int = 1


class FakeBroker:
    """Run with ``with FakeBroker(capture) as port:`` — serves on 127.0.0.1 in a thread."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._generation = 0
        self._member = "rdkafka-member-1"
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> int:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake broker did not start")
        return self.port

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._writers.add(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                reply = self._handle(frame)
                if reply is not None:
                    writer.write(struct.pack(">i", len(reply)) + reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _handle(self, frame: bytes) -> bytes | None:
        api_key, version = struct.unpack_from(">hh", frame)
        correlation = struct.unpack_from(">i", frame, 4)[0]
        if api_key == API_VERSIONS and version > SUPPORTED[API_VERSIONS][1]:
            # Unknown version: answer v0 with UNSUPPORTED_VERSION, as Kafka does.
            return self._encode(API_VERSIONS, 0, correlation, self._api_versions(0, 35))
        if api_key not in RESPONDED:
            return None  # parked (and possibly a version kio does not know)
        schema = load_request_schema(api_key, version)
        header, offset = entity_reader(schema.__header_schema__)(frame, 0)
        request, _ = entity_reader(schema)(frame, offset)
        body = self._respond(api_key, version, request)
        if body is None:
            return None
        return self._encode(api_key, version, header.correlation_id, body)

    @staticmethod
    def _encode(api_key: int, version: int, correlation: int, body: Any) -> bytes:
        schema = load_response_schema(api_key, version)
        buf = io.BytesIO()
        header_schema: Any = schema.__header_schema__
        entity_writer(header_schema)(buf, header_schema(correlation_id=i32(correlation)))
        entity_writer(schema)(buf, body)
        return buf.getvalue()

    def _api_versions(self, version: int, error: int = 0) -> Any:
        schema: Any = load_response_schema(API_VERSIONS, version)
        item_cls = sys.modules[schema.__module__].ApiVersion
        keys = tuple(
            item_cls(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
            for k, (lo, hi) in sorted(SUPPORTED.items())
        )
        fields: dict[str, Any] = {"error_code": ErrorCode(error), "api_keys": keys}
        if version >= 1:
            fields["throttle_time"] = ZERO
        return schema(**fields)

    def _respond(self, api_key: int, version: int, request: Any) -> Any:
        if api_key == API_VERSIONS:
            return self._api_versions(version)
        mod: Any = sys.modules[load_response_schema(api_key, version).__module__]
        if api_key == METADATA:
            return self._metadata(version, mod)
        if api_key == FIND_COORDINATOR:
            fields: dict[str, Any] = {
                "error_code": ErrorCode.none,
                "node_id": i32(0),
                "host": "127.0.0.1",
                "port": i32(self.port),
            }
            if version >= 1:
                fields.update(throttle_time=ZERO, error_message=None)
            return mod.FindCoordinatorResponse(**fields)
        if api_key == JOIN_GROUP:
            return self._join(version, request, mod)
        if api_key == SYNC_GROUP:
            assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
            self.capture.syncs.append(assignments)
            fields = {"error_code": ErrorCode.none,
                      "assignment": assignments.get(request.member_id, b"")}
            if version >= 1:
                fields["throttle_time"] = ZERO
            return mod.SyncGroupResponse(**fields)
        if api_key == HEARTBEAT:
            # Ask for a rebalance until the client has rejoined: asked only once, the request
            # was sometimes dropped by the client (timing) and the test waited in vain.
            error = ErrorCode.none
            if len(self.capture.joins) < self.capture.joins_wanted:
                error = ErrorCode.rebalance_in_progress
            fields = {"error_code": error}
            if version >= 1:
                fields["throttle_time"] = ZERO
            return mod.HeartbeatResponse(**fields)
        if api_key == LEAVE_GROUP:
            fields = {"error_code": ErrorCode.none}
            if version >= 1:
                fields["throttle_time"] = ZERO
            return mod.LeaveGroupResponse(**fields)
        if api_key == OFFSET_FETCH:
            return self._offset_fetch(version, request, mod)
        return None  # parked: Fetch, ListOffsets, OffsetCommit, LeaveGroup

    def _metadata(self, version: int, mod: Any) -> Any:
        broker_fields: dict[str, Any] = {"node_id": i32(0), "host": "127.0.0.1",
                                         "port": i32(self.port)}
        if version >= 1:
            broker_fields["rack"] = self.capture.broker_rack
        topics = tuple(
            mod.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=name,
                partitions=tuple(
                    mod.MetadataResponsePartition(
                        error_code=ErrorCode.none, partition_index=i32(p), leader_id=i32(0),
                        replica_nodes=(i32(0),), isr_nodes=(i32(0),),
                    )
                    for p in range(n)
                ),
            )
            for name, n in sorted(self.capture.topics.items())
        )
        fields: dict[str, Any] = {
            "brokers": (mod.MetadataResponseBroker(**broker_fields),),
            "topics": topics,
        }
        if version >= 1:
            fields["controller_id"] = i32(0)
        if version >= 2:
            fields["cluster_id"] = "fake"
        if version >= 3:
            fields["throttle_time"] = ZERO
        return mod.MetadataResponse(**fields)

    def _join(self, version: int, request: Any, mod: Any) -> Any:
        protocols = {p.name: bytes(p.metadata) for p in request.protocols}
        self.capture.joins.append(protocols)
        if len(self.capture.joins) >= self.capture.joins_wanted:
            self.capture.done.set()
        self._generation += 1
        chosen = request.protocols[0]
        member_fields: dict[str, Any] = {"member_id": self._member,
                                         "metadata": bytes(chosen.metadata)}
        if version >= 5:
            member_fields["group_instance_id"] = None
        fields: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "generation_id": i32(self._generation),
            "protocol_name": chosen.name,
            "leader": self._member,
            "member_id": self._member,
            "members": (mod.JoinGroupResponseMember(**member_fields),),
        }
        if version >= 2:
            fields["throttle_time"] = ZERO
        return mod.JoinGroupResponse(**fields)

    def _offset_fetch(self, version: int, request: Any, mod: Any) -> Any:
        topics = tuple(
            mod.OffsetFetchResponseTopic(
                name=t.name,
                partitions=tuple(
                    mod.OffsetFetchResponsePartition(
                        **{
                            "partition_index": p,
                            "committed_offset": i64(0),
                            "metadata": "",
                            "error_code": ErrorCode.none,
                            **({"committed_leader_epoch": i32(-1)} if version >= 5 else {}),
                        }
                    )
                    for p in t.partition_indexes
                ),
            )
            for t in request.topics or ()
        )
        fields: dict[str, Any] = {"topics": topics}
        if version >= 2:
            fields["error_code"] = ErrorCode.none
        if version >= 3:
            fields["throttle_time"] = ZERO
        return mod.OffsetFetchResponse(**fields)
