"""``samsa serve --metrics-port``: the endpoint scraped and parsed during a rebalance."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa import TopicPartition
from samsa.client import Admin, Consumer
from tests.brokerproc import end_process
from tests.cli.conftest import CLI, produce, unique
from tests.conftest import FAST_GROUPS

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class MetricsBroker:
    """``samsa serve --metrics-port 0`` as a subprocess; learns both ports from its log."""

    def __init__(self, data_dir: Path) -> None:
        args = [sys.executable, "-m", "samsa.cli.main", "serve", "--listen", "127.0.0.1:0",
                "--data-dir", str(data_dir), "--metrics-port", "0",
                "--config", "offsets.topic.num.partitions=5"]
        for k, v in FAST_GROUPS.items():
            args += ["--config", f"{k}={v}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        assert self.proc.stdout is not None
        self.lines: list[str] = []
        ports: dict[str, int] = {}
        try:  # a broker that fails to start is not left running
            deadline = time.monotonic() + 30
            while len(ports) < 2 and time.monotonic() < deadline:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError("broker exited:\n" + "".join(self.lines))
                self.lines.append(line)
                for key, pattern in (("broker", r"listening on [\d.]+:(\d+)"),
                                     ("metrics", r"metrics on http://[\d.]+:(\d+)/metrics")):
                    m = re.search(pattern, line)
                    if m:
                        ports[key] = int(m.group(1))
            assert len(ports) == 2, "".join(self.lines)
        except BaseException:
            with contextlib.suppress(AssertionError):
                end_process(self.proc)
            raise
        self.bootstrap = f"127.0.0.1:{ports['broker']}"
        self.metrics_url = f"http://127.0.0.1:{ports['metrics']}/metrics"
        stdout = self.proc.stdout
        self._drain = threading.Thread(target=lambda: self.lines.extend(stdout), daemon=True)
        self._drain.start()

    def scrape(self) -> Samples:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            text = resp.read().decode()
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def stop(self) -> int:
        return end_process(self.proc, drain=self._drain)


@pytest.fixture
def metrics_broker(tmp_path: Path) -> Iterator[MetricsBroker]:
    broker = MetricsBroker(tmp_path / "data")
    try:
        yield broker
    finally:
        assert broker.stop() == 0, "".join(broker.lines)


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def wait_for(broker: MetricsBroker, check: Callable[[Samples], bool],
             timeout: float = 20.0) -> Samples:
    deadline = time.monotonic() + timeout
    while True:
        samples = broker.scrape()
        if check(samples):
            return samples
        assert time.monotonic() < deadline, "metrics never reached the expected state"
        time.sleep(0.05)


def test_metrics_during_a_rebalance(metrics_broker: MetricsBroker, cli: CLI) -> None:
    from confluent_kafka import Consumer as KafkaConsumer

    b = metrics_broker
    topic, group = unique("t"), unique("g")
    with Admin(b.bootstrap) as admin:
        admin.create_topics({topic: 2})
    produce(b.bootstrap, topic, {0: 5, 1: 3})

    first = Consumer(topic, bootstrap_servers=b.bootstrap, group_id=group,
                     auto_offset_reset="earliest", enable_auto_commit=False,
                     session_timeout_ms=10000, heartbeat_interval_ms=300,
                     max_poll_interval_ms=60000)
    second = None
    try:
        deadline = time.monotonic() + 20
        fetched = 0  # records received: a Fetch was answered (and counted) by then
        while len(first.assignment()) < 2 or not fetched:
            assert time.monotonic() < deadline
            fetched += len(first.poll(100))
        first.commit({TopicPartition(topic, 0): 2, TopicPartition(topic, 1): 1})
        s = wait_for(b, lambda s: value(s, "samsa_group_info", group=group, state="Stable",
                                        protocol_type="consumer", protocol="range",
                                        leader=first.member_id) == 1)
        assert value(s, "samsa_group_members", group=group) == 1
        assert value(s, "samsa_group_rebalances_total", group=group) == 1
        assert value(s, "samsa_log_end_offset", topic=topic, partition="0") == 5
        assert value(s, "samsa_log_end_offset", topic=topic, partition="1") == 3
        for p, (committed, lag) in {"0": (2, 3), "1": (1, 2)}.items():
            assert value(s, "samsa_group_committed_offset", group=group, topic=topic,
                         partition=p) == committed
            assert value(s, "samsa_group_lag", group=group, topic=topic, partition=p) == lag
        joins = value(s, "samsa_requests_total", api="JoinGroup")
        assert joins is not None and joins >= 1
        assert value(s, "samsa_request_latency_seconds_count", api="JoinGroup") == joins
        assert value(s, "samsa_request_latency_seconds_bucket", api="JoinGroup",
                     le="+Inf") == joins
        assert (value(s, "samsa_request_bytes_total", api="Produce") or 0) > 0
        assert (value(s, "samsa_response_bytes_total", api="Fetch") or 0) > 0
        loads = [k for k in s if k[0] == "samsa_coordinator_shard_load_seconds"]
        assert len(loads) == 5
        durations = value(s, "samsa_group_rebalance_duration_seconds_count")
        assert durations is not None and durations >= 1
        generation = value(s, "samsa_group_generation", group=group)

        # A second member joins; the first does not poll, so the group waits for it.
        started = time.monotonic()
        second = KafkaConsumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                                "session.timeout.ms": 10000, "enable.auto.commit": False})
        second.subscribe([topic])
        second.poll(0.1)
        s = wait_for(b, lambda s: value(s, "samsa_groups", state="PreparingRebalance") == 1)
        assert value(s, "samsa_group_rebalances_total", group=group) == 2
        assert value(s, "samsa_group_members", group=group) == 2
        assert value(s, "samsa_group_info", group=group, state="PreparingRebalance",
                     protocol_type="consumer", protocol="range", leader=first.member_id) == 1
        assert value(s, "samsa_group_rebalance_duration_seconds_count") == durations
        state = cli("groups", "describe", group, "--state", "--metrics-url", b.metrics_url,
                    "-o", "json", bootstrap=b.bootstrap)
        assert state.rc == 0, state.err
        assert state.json()["state"] == "PreparingRebalance"
        assert state.json()["generation"] == generation
        assert state.json()["leader"] == first.member_id
        time.sleep(0.3)

        def settled() -> bool:  # the first member rejoins: the rebalance completes
            first.poll(100)
            second.poll(0.05)
            s = b.scrape()
            return value(s, "samsa_group_info", group=group, state="Stable",
                         protocol_type="consumer", protocol="range",
                         leader=first.member_id) == 1 \
                and value(s, "samsa_group_members", group=group) == 2

        while not settled():
            assert time.monotonic() - started < 45, (first.member_state, first.assignment(),
                                                     b.scrape())
        s = b.scrape()
        elapsed = time.monotonic() - started
        while len(first.assignment()) != 1:
            assert time.monotonic() - started < 45, first.assignment()
            first.poll(100)
        assert (value(s, "samsa_group_rebalance_duration_seconds_count") or 0) >= durations + 1
        assert (value(s, "samsa_group_generation", group=group) or 0) >= (generation or 0) + 1
        took = (value(s, "samsa_group_rebalance_duration_seconds_sum") or 0)
        assert 0.3 < took < elapsed + 1
    finally:
        first.close()
        if second is not None:
            second.close()
    s = wait_for(b, lambda s: value(s, "samsa_groups", state="Empty") == 1)
    assert value(s, "samsa_group_members", group=group) == 0
    assert value(s, "samsa_group_lag", group=group, topic=topic, partition="0") == 3


def test_metrics_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "samsa.cli.main", "serve", "--listen",
                            "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                            "--metrics-port", str(port)],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.startswith("samsa serve:") and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "samsa.cli.main", "serve", "--metrics-port",
                        "70000"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "out of range" in r.stderr


class _Coordinator:
    """Just enough of :class:`samsa.coordinator.Coordinator` for ``observe_group``."""

    def __init__(self) -> None:
        from samsa.coordinator.group import Group

        self.groups: dict[str, Group] = {}

    def group_state(self, group_id: str) -> object:
        g = self.groups.get(group_id)
        return None if g is None else (g.state, g.generation)


def test_rebalance_counting_without_a_broker() -> None:
    from samsa.broker.metrics import BrokerMetrics
    from samsa.coordinator import GroupState
    from samsa.coordinator.group import Group

    clock = [100.0]
    m, coord = BrokerMetrics(clock=lambda: clock[0]), _Coordinator()
    group = Group("g")
    coord.groups["g"] = group

    def step(state: GroupState, generation: int, seconds: float = 0.0) -> None:
        clock[0] += seconds
        group.state, group.generation = state, generation
        m.observe_group(coord, "g")  # type: ignore[arg-type]

    step(GroupState.PREPARING_REBALANCE, 0)  # a new group's first join
    step(GroupState.COMPLETING_REBALANCE, 1, 0.5)
    step(GroupState.STABLE, 1, 0.25)
    assert m.rebalances == {"g": 1}
    assert (m.rebalance_seconds.count, m.rebalance_seconds.total) == (1, 0.75)
    step(GroupState.STABLE, 1, 9)  # heartbeats: nothing changes
    step(GroupState.COMPLETING_REBALANCE, 2, 1)  # a sole member rejoined in one call
    step(GroupState.STABLE, 2, 2)
    assert m.rebalances == {"g": 2} and m.rebalance_seconds.total == 2.75
    step(GroupState.EMPTY, 3, 1)  # the last member left: a whole rebalance in one call
    assert m.rebalances == {"g": 3} and m.rebalance_seconds.count == 3
    assert m.rebalance_seconds.total == 2.75
    buckets = dict(m.rebalance_seconds.buckets())
    assert (buckets["0.01"], buckets["1.0"], buckets["2.5"], buckets["+Inf"]) == (1, 2, 3, 3)
    del coord.groups["g"]  # deleted: forgotten, counters kept
    m.observe_group(coord, "g")  # type: ignore[arg-type]
    assert m.observed("g") is None and m.rebalances == {"g": 3}
    m.observe_group(coord, None)  # type: ignore[arg-type]


def test_request_histogram() -> None:
    from samsa.broker.metrics import LATENCY_BUCKETS, BrokerMetrics

    m = BrokerMetrics()
    for seconds in (0.0001, 0.0005, 0.002, 100.0):
        m.observe_request(0, seconds, 10, 20)
    hist = m.latency[0]
    cumulative = dict(hist.buckets())
    assert cumulative[str(LATENCY_BUCKETS[0])] == 2  # le is inclusive
    assert cumulative["0.0025"] == 3 and cumulative["30.0"] == 3 and cumulative["+Inf"] == 4
    assert (m.bytes_in[0], m.bytes_out[0]) == (40, 80)
    names = {f.name for f in m.collect()}
    assert {"samsa_requests", "samsa_request_latency_seconds", "samsa_group_rebalances",
            "samsa_coordinator_shard_load_seconds"} <= names


def test_transaction_metrics(metrics_broker: MetricsBroker) -> None:
    """Transactional ids by state, and the records past a partition's last stable offset
    while a librdkafka transaction is open."""
    from confluent_kafka import Producer as RdProducer

    from tests.conformance.test_transactions import make_topic

    topic = make_topic(metrics_broker.bootstrap, 1)
    p = RdProducer({"bootstrap.servers": metrics_broker.bootstrap,
                    "transactional.id": unique("tx")})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"%d" % i, partition=0)
    p.flush(15)
    s = wait_for(metrics_broker, lambda s: value(s, "samsa_transactions", state="Ongoing") == 1)
    assert value(s, "samsa_log_unstable_records", topic=topic, partition="0") == 3
    p.commit_transaction(15)
    s = wait_for(metrics_broker,
                 lambda s: value(s, "samsa_transactions", state="CompleteCommit") == 1)
    assert value(s, "samsa_transactions", state="Ongoing") == 0
    assert value(s, "samsa_log_unstable_records", topic=topic, partition="0") is None
