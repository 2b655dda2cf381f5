"""ConsumerGroupHeartbeat latency in a large KIP-848 group while target assignments are
computed: the load generator of ``benchmarks/rebalance.py`` section (e).

``members`` protocol-level members (spread over ``connections`` TCP connections, raw
ConsumerGroupHeartbeat v1, client-generated member ids) join one group subscribed to every
benchmark topic. Each heartbeats every ``group.consumer.heartbeat.interval.ms`` and, like
a real client, at once after adopting a new assignment (reporting what it owns). A churn
task makes one member leave and a fresh one join every ``churn_ms``, so the group epoch
keeps moving and the coordinator keeps computing target assignments. Measured during
``seconds``: the latency of every steady heartbeat sent in the window (not the joins and
leaves themselves), and of an ApiVersions probe sent every 10 ms on its own connection (how
long the broker's event loop stalls); also the generator's own loop lag and the CPU of both
processes. The group is described (its epochs) just before and after the window, never
inside it: answering that describe stalls the broker for a few hundred ms.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import random
import struct
import time
import uuid
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from samsa.protocol.codec import decode_response, encode_request

HEARTBEAT, DESCRIBE, API_VERSIONS = 68, 69, 18
LEAVE_EPOCH = -1
FENCED, UNKNOWN_MEMBER = 110, 25
PROBE_EVERY_S = 0.01


class Conn:
    """A pipelined connection: requests are answered in order, each future by its id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self.correlation = 0
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    def send(self, api_key: int, version: int, body: Any) -> asyncio.Future[Any]:
        self.correlation += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.correlation] = (fut, api_key, version)
        self.writer.write(encode_request(api_key, version, self.correlation, "cg-bench", body))
        return fut

    async def _read(self) -> None:
        while True:
            head = await self.reader.readexactly(4)
            frame = await self.reader.readexactly(struct.unpack(">i", head)[0])
            (cid,) = struct.unpack_from(">i", frame, 0)
            fut, key, version = self.pending.pop(cid)
            if not fut.done():
                fut.set_result(decode_response(bytes(frame), key, version)[1])

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def _owned(assignment: Any) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(topic_id=t.topic_id, partitions=tuple(t.partitions))
                 for t in assignment.topic_partitions)


class Member:
    """One consumer-protocol member driven by hand."""

    def __init__(self, conn: Conn, group: str, topics: tuple[str, ...], stats: Stats) -> None:
        self.conn, self.group, self.topics, self.stats = conn, group, topics, stats
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: tuple[TopicPartitions, ...] = ()
        self.report_owned = True
        self.leaving = False

    def request(self, epoch: int) -> ConsumerGroupHeartbeatRequest:
        full = epoch == 0
        return ConsumerGroupHeartbeatRequest(
            group_id=GroupId(self.group), member_id=self.member_id, member_epoch=i32(epoch),
            instance_id=None, rack_id=None,
            rebalance_timeout=_ms(60000 if full else -1),
            subscribed_topic_names=tuple(TopicName(t) for t in self.topics) if full else None,
            subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=self.owned if full or self.report_owned else None)

    async def beat(self, epoch: int | None = None, steady: bool = True) -> Any:
        epoch = self.epoch if epoch is None else epoch
        req = self.request(epoch)
        acks = self.report_owned and epoch > 0
        self.report_owned = False
        counted = self.stats.measuring  # a heartbeat counts if sent inside the window
        start = time.perf_counter()
        resp = await self.conn.send(HEARTBEAT, 1, req)
        took = time.perf_counter() - start
        # A heartbeat that changes the member's assignment (an acknowledgement, or one
        # answered with a new assignment) writes a record: its answer waits for the fsync.
        writes = acks or resp.assignment is not None
        code = int(resp.error_code)
        # A heartbeat answered with a new member epoch also writes the member's record.
        bumped = not writes and not code and int(resp.member_epoch) != epoch
        if counted:
            self.stats.note(took, "other" if not steady else "ack" if writes else
                            "bump" if bumped else "steady")
        if code in (FENCED, UNKNOWN_MEMBER):  # fenced: rejoin with nothing owned
            self.epoch, self.owned, self.report_owned = 0, (), True
            return resp
        if code:
            self.stats.errors[code] = self.stats.errors.get(code, 0) + 1
            owned = "null" if req.topic_partitions is None else sum(
                len(t.partitions) for t in req.topic_partitions)
            self.stats.error_details.append(
                f"{code} {resp.error_message!r}: sent member_epoch={epoch} owning {owned} "
                f"partitions (member at epoch {self.epoch}, leaving: {self.leaving})")
            return resp
        self.epoch = int(resp.member_epoch)
        if counted:
            self.stats.epochs.add(self.epoch)
        if resp.assignment is not None:
            owned = _owned(resp.assignment)
            if owned != self.owned:
                self.owned, self.report_owned = owned, True
        return resp

    async def run(self, interval_s: float, stop_at: float) -> None:
        if self.epoch == 0:  # not joined yet (a member joined already must not rejoin
            await self.beat(0, steady=False)  # with epoch 0: it owns partitions by now)
        while not self.leaving and time.perf_counter() < stop_at:
            if not self.report_owned:  # a new assignment is acknowledged at once
                await asyncio.sleep(interval_s * random.uniform(0.9, 1.0))
            if self.leaving:
                return
            await self.beat(steady=self.epoch != 0)

    async def leave(self) -> None:
        self.leaving = True
        await self.beat(LEAVE_EPOCH, steady=False)


class Stats:
    def __init__(self) -> None:
        self.measuring = False
        #: heartbeats with nothing new; heartbeats answered with a new member epoch only,
        #: and those that change the member's assignment (both write a record, so their
        #: answer waits for the fsync); joins and leaves. Counted if sent in the window.
        self.steady: list[float] = []
        self.bump: list[float] = []
        self.ack: list[float] = []
        self.other: list[float] = []
        self.errors: dict[int, int] = {}
        self.error_details: list[str] = []
        #: member epochs answered while measuring: the target assignments reached
        self.epochs: set[int] = set()

    def note(self, seconds: float, kind: str) -> None:
        {"steady": self.steady, "bump": self.bump, "ack": self.ack,
         "other": self.other}[kind].append(seconds)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _probe(conn: Conn, stats: list[float], stop_at: float, measuring: Stats) -> None:
    req = ApiVersionsRequest(client_software_name="cg-bench", client_software_version="0")
    while time.perf_counter() < stop_at:
        start = time.perf_counter()
        await conn.send(API_VERSIONS, 3, req)
        if measuring.measuring:
            stats.append(time.perf_counter() - start)
        await asyncio.sleep(PROBE_EVERY_S)


async def _lag(stats: list[float], stop_at: float) -> None:
    """The generator's own event-loop lag: how late a 10 ms sleep wakes up."""
    while time.perf_counter() < stop_at:
        start = time.perf_counter()
        await asyncio.sleep(PROBE_EVERY_S)
        stats.append(time.perf_counter() - start - PROBE_EVERY_S)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (Linux ``/proc``), 0 when unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def group_epochs(conn: Any, group: str) -> tuple[int, int]:
    """(group epoch, assignment epoch) of a consumer group, described over ``conn``."""
    resp = await conn.send(DESCRIBE, 0, ConsumerGroupDescribeRequest(
        group_ids=(GroupId(group),), include_authorized_operations=False))
    g = resp.groups[0]
    return int(g.group_epoch), int(g.assignment_epoch)


async def heartbeat_latency(host: str, port: int, group: str, topics: tuple[str, ...],
                            members: int, connections: int, interval_ms: int, churn_ms: int,
                            warmup_s: float, seconds: float,
                            broker_pid: int = 0) -> dict[str, Any]:
    """Join ``members``, let them settle for ``warmup_s``, then measure for ``seconds``."""
    stats = Stats()
    interval_s = interval_ms / 1000
    join_start = time.perf_counter()
    conns = []
    for _ in range(connections):  # one by one: the accept backlog is finite
        conns.append(await Conn.open(host, port))
    admin = await Conn.open(host, port)
    probe_conn = await Conn.open(host, port)
    stop_at = time.perf_counter() + 1e9
    live: list[Member] = []
    tasks: list[asyncio.Task[None]] = []
    for i in range(members):
        m = Member(conns[i % connections], group, topics, stats)
        live.append(m)
        await m.beat(0, steady=False)  # one at a time: every join asks for a target
    join_s = time.perf_counter() - join_start
    tasks = [asyncio.create_task(m.run(interval_s, stop_at)) for m in live]
    await asyncio.sleep(warmup_s)

    probe: list[float] = []
    # Described before the window: answering a describe of the whole group stalls the
    # broker (its answer lists every member's assignment).
    described = time.perf_counter()
    epochs0 = await group_epochs(admin, group)
    describe_s = time.perf_counter() - described
    stats.measuring = True
    start = time.perf_counter()
    cpu0, broker0 = time.process_time(), _cpu_seconds(broker_pid)
    measure_stop = start + seconds
    probe_task = asyncio.create_task(_probe(probe_conn, probe, measure_stop, stats))
    lag: list[float] = []
    lag_task = asyncio.create_task(_lag(lag, measure_stop))
    rng = random.Random(848)
    churned = 0
    while time.perf_counter() < measure_stop:
        await asyncio.sleep(churn_ms / 1000)
        idx = rng.randrange(len(live))
        old = live[idx]
        await old.leave()
        fresh = Member(old.conn, group, topics, stats)  # the leaver's connection, reused
        live[idx] = fresh
        tasks.append(asyncio.create_task(fresh.run(interval_s, measure_stop)))
        churned += 1
    stats.measuring = False
    elapsed = time.perf_counter() - start
    gen_cpu, broker_cpu = time.process_time() - cpu0, _cpu_seconds(broker_pid) - broker0
    epochs1 = await group_epochs(admin, group)
    await probe_task
    await lag_task
    for m in live:
        m.leaving = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in (*conns, admin, probe_conn):
        await c.close()
    steady = stats.steady
    return {
        "members": members, "join_s": join_s, "seconds": elapsed, "churned": churned,
        "heartbeats": len(steady), "rate": len(steady) / elapsed,
        "p50_ms": percentile(steady, 0.5) * 1000, "p99_ms": percentile(steady, 0.99) * 1000,
        "max_ms": max(steady, default=float("nan")) * 1000,
        "bumps": len(stats.bump), "bump_p50_ms": percentile(stats.bump, 0.5) * 1000,
        "bump_p99_ms": percentile(stats.bump, 0.99) * 1000,
        "bump_max_ms": max(stats.bump, default=float("nan")) * 1000,
        "acks": len(stats.ack), "ack_p50_ms": percentile(stats.ack, 0.5) * 1000,
        "ack_p99_ms": percentile(stats.ack, 0.99) * 1000,
        "join_leave_p50_ms": percentile(stats.other, 0.5) * 1000,
        "join_leave_max_ms": max(stats.other, default=float("nan")) * 1000,
        "probes": len(probe), "probe_p99_ms": percentile(probe, 0.99) * 1000,
        "probe_max_ms": max(probe, default=float("nan")) * 1000,
        "group_epochs": epochs1[0] - epochs0[0],
        "assignment_epochs": epochs1[1] - epochs0[1],
        "targets_reached": len(stats.epochs),
        "errors": stats.errors, "error_details": stats.error_details[:5],
        "describe_ms": describe_s * 1000,
        "generator_cpu": gen_cpu / elapsed, "broker_cpu": broker_cpu / elapsed,
        "lag_p99_ms": percentile(lag, 0.99) * 1000,
        "lag_max_ms": max(lag, default=float("nan")) * 1000,
    }


def run(args: tuple[Any, ...]) -> dict[str, Any]:
    """Entry point of the generator process (bounded: ``wait_for``)."""
    return asyncio.run(asyncio.wait_for(heartbeat_latency(*args), 1800))
