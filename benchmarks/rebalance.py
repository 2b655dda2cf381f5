"""Group coordinator benchmark: rebalance latency with real clients, coordinator capacity
with a protocol-level load generator.

(a) N confluent-kafka consumers (N = 10, 50, 100, one Python process) start at once on a
    200-partition topic: time until every partition is assigned, with the broker's default
    settings (group.initial.rebalance.delay.ms=3000) and with the delay at 0.
(b) A group of 10 consumers: time until it is Stable again (describe: Stable, 9 members,
    the survivors' assignments cover every partition) after one member leaves gracefully,
    and after one (a subprocess) is SIGKILLed; the latter is bounded below by its session
    timeout, which is printed.
(d) KIP-848: the same two measurements with group.protocol=consumer beside classic, on one
    broker (initial delay 0): time until N = 10, 50 and 100 consumers are fully assigned, and a
    group of 10's time to Stable again after a member leaves and after one is SIGKILLed
    (Stable: every member at the target assignment, described by ConsumerGroupDescribe).
(e) KIP-848 heartbeat latency while target assignments are computed (KIP-1263: at most one
    per group per group.consumer.assignment.interval.ms, in a worker process; --e-config
    group.consumer.assignor.offload.enable=false computes them on the event loop): 1,000
    protocol-level members (one connection each) of one consumer group subscribed to
    1,000-partition topics (50 of them, or as many as this process's open-file limit
    allows: each partition holds a file open; --e-topics 17 gives 17,000 partitions), one
    member leaving and a new one joining every 500 ms; p50/p99/max
    latency of the members' plain heartbeats, of those answered with a new member epoch and of
    those that change a member's assignment (both write a record and wait for its fsync), and
    of an ApiVersions probe every 10 ms
    (the event loop's stalls). Full garbage collections were the loop's long stalls (about
    250 ms each with 18,000 partitions); samsa.broker.gc_policy freezes what survives them.
(c) Coordinator capacity: heartbeats per second one broker process answers and its CPU per
    heartbeat, from a load-generator process (asyncio, several connections, pipelined
    requests) driving many members of several groups, classic (Heartbeat) and KIP-848
    (steady ConsumerGroupHeartbeat of Stable groups); with ``--baseline SRC`` the same
    against a broker running another checkout's samsa, side by side. Then a single classic
    group of 5,000 protocol-level members: time until Stable, and time to describe it.

    .venv/bin/python benchmarks/rebalance.py [--sizes 10,50,100] [--skip-a] [--skip-b] ...
    .venv/bin/python benchmarks/rebalance.py --skip-a --skip-b --skip-d --skip-e \
        --baseline /tmp/before/src          # (c) only, before and after

Targets: (a) delay 0, N=100 fully assigned within 2 s; (c) <= 10 us of broker CPU per
heartbeat (100,000/s on a core); 5,000 members Stable within 10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import multiprocessing
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, ConsumerGroupState  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest  # noqa: E402
from kio.schema.heartbeat.v3.request import HeartbeatRequest  # noqa: E402
from kio.schema.join_group.v9.request import (  # noqa: E402
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from kio.schema.sync_group.v5.request import (  # noqa: E402
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from kio.schema.types import GroupId  # noqa: E402
from kio.static.primitive import i32  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402

from samsa.protocol.codec import decode_response, encode_request  # noqa: E402

PARTITIONS = 200
TOPIC = "rebalance"
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x09rebalance\x00\x00\x00\x00"


def _start(tmp: Path, name: str, config: dict[str, str],
           env: dict[str, str] | None = None) -> BrokerProcess:
    broker = BrokerProcess(tmp / name, config, env=env).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS)])[TOPIC].result(30)
    return broker


def _wait(pred: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
    return False


def _covered(consumers: list[Consumer]) -> bool:
    """Every consumer holds partitions and together they hold each partition once."""
    owned: list[int] = []
    everyone = True
    for c in consumers:
        c.poll(0)  # serves rebalance events (assign/revoke) of this consumer
        mine = c.assignment()
        everyone = everyone and bool(mine)
        owned.extend(tp.partition for tp in mine)
    return everyone and len(owned) == PARTITIONS and len(set(owned)) == PARTITIONS


def _close_all(consumers: list[Consumer]) -> None:
    import threading

    threads = [threading.Thread(target=c.close) for c in consumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


# -- (a) ------------------------------------------------------------------------------------

def startup(broker: BrokerProcess, n: int, group: str, **extra: Any) -> float | None:
    """Seconds from creating ``n`` consumers to every partition being assigned."""
    start = time.perf_counter()
    consumers = []
    for i in range(n):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "client.id": f"c{i}", "enable.auto.commit": False, **extra})
        c.subscribe([TOPIC])
        consumers.append(c)
    done = _wait(lambda: _covered(consumers), 60)
    elapsed = time.perf_counter() - start
    _close_all(consumers)
    return elapsed if done else None


# -- (b) ------------------------------------------------------------------------------------

def _stable_with(admin: AdminClient, group: str, members: int,
                 consumers: list[Consumer]) -> bool:
    """Described Stable with ``members`` members whose assignments split the topic, and the
    in-process consumers hold exactly what the coordinator says they were given."""
    for c in consumers:
        c.poll(0)
    d = admin.describe_consumer_groups([group])[group].result(10)
    if d.state != ConsumerGroupState.STABLE or len(d.members) != members:
        return False
    given = {m.member_id: {tp.partition for tp in m.assignment.topic_partitions}
             for m in d.members}
    owned = [p for ps in given.values() for p in ps]
    if len(owned) != PARTITIONS or len(set(owned)) != PARTITIONS:
        return False
    return all(given.get(c.memberid()) == {tp.partition for tp in c.assignment()}
               for c in consumers)


def recovery(broker: BrokerProcess, n: int, group: str, session_ms: int,
             heartbeat_ms: int = 3000) -> tuple[float, float]:
    """(seconds to Stable after a graceful leave, seconds after a SIGKILL)."""
    conf = {"session.timeout.ms": session_ms, "heartbeat.interval.ms": heartbeat_ms}
    member = ["tests.conformance.group_member", broker.bootstrap, group, TOPIC, str(session_ms)]
    return _recover(broker, n, group, conf, member)


def _recover(broker: BrokerProcess, n: int, group: str, extra: dict[str, Any],
             member: list[str]) -> tuple[float, float]:
    """:func:`recovery` for consumers configured with ``extra`` and a doomed member run as
    ``python -m member...``."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "enable.auto.commit": False, **extra}
    consumers = []
    for i in range(n - 1):
        c = Consumer({**conf, "client.id": f"c{i}"})
        c.subscribe([TOPIC])
        consumers.append(c)
    doomed = subprocess.Popen([sys.executable, "-m", *member], cwd=ROOT,
                              stdout=subprocess.DEVNULL)
    try:
        if not _wait(lambda: _stable_with(admin, group, n, consumers), 60):
            raise RuntimeError("group of n members never became stable")
        leaving = consumers.pop()
        start = time.perf_counter()
        leaving.close()
        if not _wait(lambda: _stable_with(admin, group, n - 1, consumers), 60):
            raise RuntimeError("no recovery after a graceful leave")
        graceful = time.perf_counter() - start

        start = time.perf_counter()
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        if not _wait(lambda: _stable_with(admin, group, n - 2, consumers), 120):
            raise RuntimeError("no recovery after a kill")
        killed = time.perf_counter() - start
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(10)
        _close_all(consumers)
    return graceful, killed


# -- (d) KIP-848 -----------------------------------------------------------------------------

CONSUMER_PROTOCOL = {"group.protocol": "consumer"}


def consumer_brokers(tmp: Path, session_ms: int) -> tuple[BrokerProcess, BrokerProcess]:
    """Two brokers for (d): Kafka's consumer heartbeat interval (5000 ms) and 300 ms."""
    common = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
              "group.consumer.session.timeout.ms": str(session_ms),
              "group.consumer.min.session.timeout.ms": "1000",
              "group.consumer.min.heartbeat.interval.ms": "100"}
    return (_start(tmp, "d-default", common),
            _start(tmp, "d-fast", {**common, "group.consumer.heartbeat.interval.ms": "300"}))


def consumer_recovery(broker: BrokerProcess, n: int, group: str) -> tuple[float, float]:
    """:func:`recovery` for a consumer-protocol group (its session is the broker's)."""
    member = ["tests.conformance.consumer_protocol_kit", broker.bootstrap, group, TOPIC]
    return _recover(broker, n, group, CONSUMER_PROTOCOL, member)


def section_d(tmp: Path, sizes: list[int], trials: int, session_ms: int) -> None:
    print("(d) KIP-848 group.protocol=consumer beside classic (initial delay 0): N consumers "
          "started at once -> all assigned")
    print(f"    median (min-max) of {trials} runs; hb: the classic consumers' "
          "heartbeat.interval.ms, or the broker's group.consumer.heartbeat.interval.ms")
    print(f"    {'N':>5} {'classic, hb 3000':>22} {'consumer, hb 5000':>22} "
          f"{'classic, hb 300':>22} {'consumer, hb 300':>22}")
    slow, fast = consumer_brokers(tmp, session_ms)
    try:
        for n in sizes:
            rows = [
                [startup(slow, n, f"d-{n}-c-{t}") for t in range(trials)],
                [startup(slow, n, f"d-{n}-k-{t}", **CONSUMER_PROTOCOL) for t in range(trials)],
                [startup(fast, n, f"d-{n}-c300-{t}", **{"heartbeat.interval.ms": 300})
                 for t in range(trials)],
                [startup(fast, n, f"d-{n}-k300-{t}", **CONSUMER_PROTOCOL) for t in range(trials)],
            ]
            print(f"    {n:>5} " + " ".join(f"{_spread(r):>22}" for r in rows))
        print(f"    group of 10, time to Stable again; session timeout {session_ms} ms "
              "(the killed member's bound)")
        print(f"    {'':>22} {'graceful leave':>15} {'SIGKILL':>9}")
        graceful, killed = recovery(fast, 10, "d-rc", session_ms, 300)
        print(f"    {'classic, hb 300':>22} {graceful:>13.2f} s {killed:>7.2f} s")
        graceful, killed = consumer_recovery(fast, 10, "d-rk")
        print(f"    {'consumer, hb 300':>22} {graceful:>13.2f} s {killed:>7.2f} s")
    finally:
        slow.stop()
        fast.stop()
    print()


# -- (e) KIP-848 heartbeat latency ----------------------------------------------------------

E_PARTITIONS = 1000


def section_e(tmp: Path, members: int, topics: int, churn_ms: int, seconds: float,
              extra: dict[str, str] | None = None) -> None:
    from benchmarks.cg_heartbeat_latency import run as heartbeat_latency

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    fit = max(1, (soft - members - 1500) // E_PARTITIONS)  # connections, logs, sockets
    if fit < topics:
        print(f"(e) open-file limit {soft}: {fit} topics instead of {topics}")
        topics = fit
    names = tuple(f"e-{i}" for i in range(topics))
    config = {"group.consumer.heartbeat.interval.ms": "5000", **(extra or {})}
    print(f"(e) KIP-848 heartbeat latency: {members} members, {topics} x {E_PARTITIONS} "
          f"partitions, one leave + one join every {churn_ms} ms, broker config {config}")
    broker = BrokerProcess(tmp / "e", config).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        created = admin.create_topics(
            [NewTopic(n, num_partitions=E_PARTITIONS) for n in names], request_timeout=600)
        for f in created.values():
            f.result(600)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            r = pool.apply(heartbeat_latency, (("127.0.0.1", broker.port, "e", names, members,
                                                members, 5000, churn_ms, 10.0, seconds,
                                                broker.proc.pid if broker.proc else 0),))
    finally:
        broker.stop()
    print(f"    joining one by one took {r['join_s']:.1f} s; measured {r['seconds']:.0f} s: "
          f"{r['churned']} leaves + joins, {r['group_epochs']} group epochs, "
          f"{r['targets_reached']} target assignments reached; errors: {r['errors'] or 'none'}")
    for detail in r["error_details"]:
        print(f"    error {detail}")
    print(f"    CPU: broker {r['broker_cpu']:.0%} of a core, load generator "
          f"{r['generator_cpu']:.0%}; the generator's own loop lag p99 "
          f"{r['lag_p99_ms']:.1f} ms, max {r['lag_max_ms']:.1f} ms; describing the group "
          f"(before the window) took {r['describe_ms']:.0f} ms")
    print(f"    {'':>34} {'count':>7} {'p50':>9} {'p99':>9} {'max':>9}")
    rows = (("plain heartbeats", r["heartbeats"], r["p50_ms"], r["p99_ms"], r["max_ms"]),
            ("heartbeats bumping the epoch", r["bumps"], r["bump_p50_ms"], r["bump_p99_ms"],
             r["bump_max_ms"]),
            ("heartbeats changing an assignment", r["acks"], r["ack_p50_ms"], r["ack_p99_ms"],
             float("nan")),
            ("ApiVersions probe (loop stalls)", r["probes"], float("nan"), r["probe_p99_ms"],
             r["probe_max_ms"]))
    for name, n, p50, p99, top in rows:
        print(f"    {name:>34} {n:>7} " + " ".join(
            f"{'-' if v != v else f'{v:.1f} ms':>9}" for v in (p50, p99, top)))
    print()


# -- (c) protocol-level load ----------------------------------------------------------------

class Conn:
    """A pipelined Kafka connection: send many requests, futures resolve in order."""

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
        self.writer.write(encode_request(api_key, version, self.correlation, "bench", body))
        return fut

    def send_raw(self, frame_without_cid: bytes, raw: bool = True) -> asyncio.Future[Any]:
        """A pre-encoded frame whose correlation id (bytes 8..12) is patched in."""
        self.correlation += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.correlation] = (fut, -1, -1)
        frame = bytearray(frame_without_cid)
        struct.pack_into(">i", frame, 8, self.correlation)
        self.writer.write(frame)
        return fut

    async def _read(self) -> None:
        while True:
            head = await self.reader.readexactly(4)
            frame = await self.reader.readexactly(struct.unpack(">i", head)[0])
            (cid,) = struct.unpack_from(">i", frame, 0)
            fut, key, version = self.pending.pop(cid)
            if key < 0:
                fut.set_result(frame)  # raw: the caller reads what it needs
            else:
                fut.set_result(decode_response(bytes(frame), key, version)[1])

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


async def join_group(conns: list[Conn], group: str, members: int,
                     session_ms: int = 30000, known: list[str] | None = None
                     ) -> tuple[list[tuple[str, int]], float]:
    """Join ``members`` protocol-level members (two-step JoinGroup v9, SyncGroup v5), or
    rejoin the ``known`` member ids of a Stable group (one JoinGroup each: a rebalance).

    Returns [(member id, generation)] and the seconds until every SyncGroup was answered.
    """
    start = time.perf_counter()

    def join(conn: Conn, member_id: str) -> asyncio.Future[Any]:
        return conn.send(11, 9, JoinGroupRequest(
            group_id=GroupId(group), session_timeout=_ms(session_ms),
            rebalance_timeout=_ms(60000), member_id=member_id, group_instance_id=None,
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION),),
            reason=None))

    owner = [conns[i % len(conns)] for i in range(members)]
    if known is None:
        firsts = await asyncio.gather(*(join(owner[i], "") for i in range(members)))
        ids = [f.member_id for f in firsts]
    else:
        ids = known
    joined = await asyncio.gather(*(join(owner[i], ids[i]) for i in range(members)))
    bad = {j.error_code for j in joined if j.error_code}
    if bad:
        raise RuntimeError(f"join errors {bad}")
    generation = joined[0].generation_id
    leader = joined[0].leader
    plan = {m.member_id: b"" for j in joined if j.members for m in j.members}
    syncs = []
    for i in range(members):
        assignments = tuple(SyncGroupRequestAssignment(member_id=m, assignment=a)
                            for m, a in plan.items()) if ids[i] == leader else ()
        syncs.append(owner[i].send(14, 5, SyncGroupRequest(
            group_id=GroupId(group), generation_id=i32(generation), member_id=ids[i],
            group_instance_id=None, protocol_type="consumer", protocol_name="range",
            assignments=assignments)))
    synced = await asyncio.gather(*syncs)
    bad = {s.error_code for s in synced if s.error_code}
    if bad:
        raise RuntimeError(f"sync errors {bad}")
    return [(m, generation) for m in ids], time.perf_counter() - start


async def classic_members(conns: list[Conn], groups: int, per_group: int) -> list[bytes]:
    """Join ``groups`` classic groups of ``per_group`` members; their Heartbeat v3 frames."""
    members: list[tuple[str, str, int]] = []
    for g in range(groups):
        ids, _ = await join_group(conns, f"hb-{g}", per_group)
        members.extend((f"hb-{g}", m, gen) for m, gen in ids)
    return [encode_request(12, 3, 0, "bench", HeartbeatRequest(
        group_id=GroupId(g), generation_id=i32(gen), member_id=m, group_instance_id=None))
        for g, m, gen in members]


async def consumer_members(conns: list[Conn], groups: int, per_group: int) -> list[bytes]:
    """Join ``groups`` KIP-848 groups of ``per_group`` members subscribed to the benchmark
    topic and heartbeat until every group is Stable (each member at the group's epoch,
    owning its target); their steady ConsumerGroupHeartbeat v1 frames (every optional field
    null, as the Java client sends once nothing changed)."""
    from benchmarks.cg_heartbeat_latency import HEARTBEAT, Member, Stats, group_epochs

    stats = Stats()
    members: list[Member] = []
    for g in range(groups):
        mine = [Member(conns[i % len(conns)], f"chb-{g}", (TOPIC,), stats)
                for i in range(per_group)]
        await asyncio.gather(*(m.beat(0, steady=False) for m in mine))
        members += mine
    deadline = time.perf_counter() + 120
    while True:
        before = [(m.epoch, m.owned) for m in members]
        await asyncio.gather(*(m.beat(steady=False) for m in members))
        if stats.errors:
            raise RuntimeError(f"consumer heartbeat errors {stats.errors}")
        quiet = before == [(m.epoch, m.owned) for m in members] and not any(
            m.report_owned for m in members)
        if quiet:
            epochs = [await group_epochs(conns[0], f"chb-{g}") for g in range(groups)]
            if all(ge == ae for ge, ae in epochs) and all(
                    m.epoch == epochs[int(m.group[4:])][0] for m in members):
                break
        if time.perf_counter() > deadline:
            raise RuntimeError("consumer groups did not become Stable within 120 s")
        await asyncio.sleep(0.2)
    return [encode_request(HEARTBEAT, 1, 0, "bench", m.request(m.epoch)) for m in members]


#: Where a heartbeat response's error code sits in its frame (after the correlation id;
#: ConsumerGroupHeartbeat's header v1 has a tag buffer, then both have throttle_time_ms).
_ERROR_AT = {"classic": 8, "consumer": 9}


async def heartbeat_load(host: str, port: int, protocol: str, groups: int, per_group: int,
                         connections: int, seconds: float, window: int,
                         broker_pid: int) -> dict[str, Any]:
    """Steady heartbeats of ``groups`` x ``per_group`` members (``protocol`` classic:
    Heartbeat v3; consumer: ConsumerGroupHeartbeat v1) pipelined ``window`` deep on each
    connection for ``seconds``; the broker's CPU per answered heartbeat."""
    conns = [await Conn.open(host, port) for _ in range(connections)]
    join_start = time.perf_counter()
    join = classic_members if protocol == "classic" else consumer_members
    frames = await join(conns, groups, per_group)
    join_s = time.perf_counter() - join_start
    error_at = _ERROR_AT[protocol]
    ok = 0
    errors: dict[int, int] = {}
    stop_at = time.perf_counter() + seconds
    cpu0 = time.process_time()

    async def pump(ci: int) -> None:
        nonlocal ok
        conn = conns[ci]
        mine = frames[ci::connections]
        inflight: list[asyncio.Future[Any]] = []
        i = 0
        while time.perf_counter() < stop_at:
            while len(inflight) < window:
                inflight.append(conn.send_raw(mine[i % len(mine)]))
                i += 1
            frame = await inflight.pop(0)
            code = struct.unpack_from(">h", frame, error_at)[0]
            if code == 0:
                ok += 1
            else:
                errors[code] = errors.get(code, 0) + 1
        for f in inflight:
            await f

    start = time.perf_counter()
    broker0 = cpu_seconds(broker_pid)
    await asyncio.gather(*(pump(i) for i in range(connections)))
    elapsed = time.perf_counter() - start
    broker_cpu_s = cpu_seconds(broker_pid) - broker0
    gen_cpu = time.process_time() - cpu0
    for c in conns:
        await c.close()
    return {"members": len(frames), "ok": ok, "errors": errors, "seconds": elapsed,
            "join_s": join_s, "broker_cpu_us": broker_cpu_s / max(ok, 1) * 1e6,
            "broker_cpu": broker_cpu_s / elapsed,
            "rate": ok / elapsed, "generator_cpu": gen_cpu / elapsed}


async def open_many(host: str, port: int, n: int, batch: int = 250) -> list[Conn]:
    conns: list[Conn] = []
    while len(conns) < n:
        k = min(batch, n - len(conns))
        conns += await asyncio.gather(*(Conn.open(host, port) for _ in range(k)))
    return conns


async def big_group(host: str, port: int, members: int, connections: int) -> dict[str, Any]:
    # One connection per member, as real clients have: like Kafka, the broker answers a
    # connection's requests in order, so a parked JoinGroup holds back the ones behind it
    # (samsa reads at most 128 ahead), and members sharing a connection would miss the join.
    conns = await open_many(host, port, members)
    joined, stable_s = await join_group(conns, "big", members)
    # Everyone rejoins the Stable group (as after a subscription change): one rebalance.
    _, rejoin_s = await join_group(conns, "big", members, known=[m for m, _ in joined])
    start = time.perf_counter()
    described = await conns[0].send(15, 5, DescribeGroupsRequest(
        groups=(GroupId("big"),), include_authorized_operations=False))
    describe_s = time.perf_counter() - start
    g = described.groups[0]
    for c in conns:
        await c.close()
    return {"stable_s": stable_s, "rejoin_s": rejoin_s, "describe_s": describe_s,
            "state": g.group_state, "members": len(g.members)}


def _in_process(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a load coroutine in its own process (its own core, not the broker's)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_run_coro, (fn.__name__, args))


def _run_coro(name: str, args: tuple[Any, ...]) -> Any:
    return asyncio.run(asyncio.wait_for(globals()[name](*args), 300))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- main -----------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10,50,100")
    ap.add_argument("--skip-a", action="store_true")
    ap.add_argument("--skip-b", action="store_true")
    ap.add_argument("--skip-c", action="store_true")
    ap.add_argument("--skip-d", action="store_true")
    ap.add_argument("--consumer-sizes", default="10,50,100", help="N for (d)")
    ap.add_argument("--hb-groups", type=int, default=10)
    ap.add_argument("--hb-members", type=int, default=100)
    ap.add_argument("--hb-connections", type=int, default=8)
    ap.add_argument("--hb-window", type=int, default=64)
    ap.add_argument("--hb-seconds", type=float, default=5.0)
    ap.add_argument("--big", type=int, default=5000)
    ap.add_argument("--skip-big", action="store_true", help="(c) without the big group")
    ap.add_argument("--baseline", metavar="SRC",
                    help="(c) also against a broker running samsa from another checkout's "
                         "src (git worktree add /tmp/before main), side by side")
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--skip-e", action="store_true")
    ap.add_argument("--e-members", type=int, default=1000)
    ap.add_argument("--e-topics", type=int, default=50, help="1000-partition topics for (e)")
    ap.add_argument("--e-churn-ms", type=int, default=500)
    ap.add_argument("--e-seconds", type=float, default=30.0)
    ap.add_argument("--e-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for (e), e.g. "
                         "group.consumer.assignor.offload.enable=false")
    args = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 100 consumers' sockets
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"samsa group coordinator benchmark; {os.cpu_count()} cores; "
          f"{PARTITIONS}-partition topic\n")

    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        if not args.skip_a:
            print("(a) N confluent-kafka consumers started at once -> every consumer assigned "
                  "and all partitions covered")
            print(f"    delay 0: median (min-max) of {args.trials} runs; 'hb 300' also sets "
                  "heartbeat.interval.ms=300 on the consumers (default 3000)")
            print(f"    {'N':>5} {'default (delay 3000)':>21} {'delay 0':>22} "
                  f"{'delay 0, hb 300':>22}")
            default = _start(tmpdir, "a-default", {})
            fast = _start(tmpdir, "a-fast", {"group.initial.rebalance.delay.ms": "0"})
            top: list[float | None] = []
            for n in sizes:
                d = startup(default, n, f"a-{n}")
                f = [startup(fast, n, f"a-{n}-{t}") for t in range(args.trials)]
                h = [startup(fast, n, f"a-{n}-hb-{t}", **{"heartbeat.interval.ms": 300})
                     for t in range(args.trials)]
                if n == 100:
                    top = f
                print(f"    {n:>5} {_s(d):>21} {_spread(f):>22} {_spread(h):>22}")
            default.stop()
            fast.stop()
            if top:
                met = all(v is not None and v <= 2.0 for v in top)
                if met:
                    print("    target: delay 0, N=100 within 2 s: MET in every run")
                else:
                    print("    target: delay 0, N=100 within 2 s: MISSED in some runs: members "
                          "assigned in the first generation learn of the next one from a "
                          "heartbeat (every 3 s by default), as with Kafka")
            print()

        if not args.skip_b:
            print("(b) group of 10: time to Stable again (describe Stable, partitions covered)")
            b = _start(tmpdir, "b", {"group.initial.rebalance.delay.ms": "0",
                                     "group.min.session.timeout.ms": "1000"})
            print(f"    session.timeout.ms = {args.session_ms} (the killed member's bound)")
            print(f"    {'heartbeat.interval.ms':>22} {'graceful leave':>15} {'SIGKILL':>9}")
            for hb_ms in (3000, 300):  # librdkafka's default, and short
                graceful, killed = recovery(b, 10, f"b-{hb_ms}", args.session_ms, hb_ms)
                print(f"    {hb_ms:>22} {graceful:>13.2f} s {killed:>7.2f} s")
            b.stop()
            print("    (survivors learn of a rebalance from their next heartbeat, as in Kafka)\n")

        if not args.skip_d:
            section_d(tmpdir, [int(s) for s in args.consumer_sizes.split(",")], args.trials,
                      args.session_ms)

        if not args.skip_e:
            section_e(tmpdir, args.e_members, args.e_topics, args.e_churn_ms, args.e_seconds,
                      dict(kv.split("=", 1) for kv in args.e_config))

        if not args.skip_c:
            section_c(tmpdir, args)


def section_c(tmp: Path, args: argparse.Namespace) -> None:
    print("(c) coordinator capacity (load generator in its own process)")
    config = {"group.initial.rebalance.delay.ms": "1000"}
    brokers = [("this", _start(tmp, "c", config))]
    if args.baseline:
        brokers.append(("before", _start(tmp, "c-before", config,
                                         env={"PYTHONPATH": args.baseline})))
    print(f"    heartbeats: {args.hb_groups} groups x {args.hb_members} members, "
          f"{args.hb_connections} connections, window {args.hb_window}, "
          f"{args.hb_seconds:.0f} s each; consumer groups subscribe to the "
          f"{PARTITIONS}-partition topic and are Stable before the window")
    print(f"    {'protocol':>9} {'broker':>7} {'heartbeats/s':>13} {'broker CPU':>11} "
          f"{'us CPU/hb':>10} {'=> /s a core':>13} {'generator':>10} {'join s':>7}  errors")
    best: dict[str, float] = {}
    try:
        for protocol in ("classic", "consumer"):
            for name, broker in brokers:
                assert broker.proc is not None
                hb = _in_process(heartbeat_load, "127.0.0.1", broker.port, protocol,
                                 args.hb_groups, args.hb_members, args.hb_connections,
                                 args.hb_seconds, args.hb_window, broker.proc.pid)
                if name == "this":
                    best[protocol] = hb["broker_cpu_us"]
                print(f"    {protocol:>9} {name:>7} {hb['rate']:>13,.0f} "
                      f"{hb['broker_cpu']:>10.0%} {hb['broker_cpu_us']:>10.1f} "
                      f"{1e6 / hb['broker_cpu_us']:>13,.0f} {hb['generator_cpu']:>9.0%} "
                      f"{hb['join_s']:>7.1f}  {hb['errors'] or 'none'}")
        for protocol, us in best.items():
            print(f"    target <= 10 us of broker CPU per {protocol} heartbeat: "
                  f"{'MET' if us <= 10 else 'MISSED'} ({us:.1f} us)")
        if args.skip_big:
            return
        this = brokers[0][1]
        big = _in_process(big_group, "127.0.0.1", this.port, args.big, args.hb_connections)
        print(f"    one group of {args.big} members: Stable after {big['stable_s']:.2f} s "
              f"(includes group.initial.rebalance.delay.ms=1000), described in "
              f"{big['describe_s'] * 1000:.0f} ms: state {big['state']}, "
              f"{big['members']} members")
        print(f"    the same group rebalanced (every member rejoins, then syncs): "
              f"Stable again after {big['rejoin_s']:.2f} s")
        print(f"    target Stable within 10 s: "
              f"{'MET' if big['stable_s'] <= 10 and big['state'] == 'Stable' else 'MISSED'}")
    finally:
        for _, broker in brokers:
            broker.stop()


def _s(v: float | None) -> str:
    return "timeout" if v is None else f"{v:.2f} s"


def _spread(values: list[float | None]) -> str:
    done = sorted(v for v in values if v is not None)
    if len(done) < len(values):
        return f"{len(values) - len(done)} timeouts"
    return f"{done[len(done) // 2]:.2f} ({done[0]:.2f}-{done[-1]:.2f}) s"


if __name__ == "__main__":
    main()
