"""The console end to end in a real browser (Playwright driving Debian's chromium), against
real brokers and librdkafka groups (classic, consumer-protocol and share groups); the page
updates itself (server-sent events), nothing is reloaded. Each scenario saves screenshots
(see ``screenshots`` in conftest.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from samsa import TopicPartition
from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.cluster.nodes import ClusterNodeProcess, all_owned, wait_until
from tests.cluster.test_pg_event_loop import find_txn_coordinator
from tests.conformance.consumer_protocol_kit import BROKER_CONFIG, CpMember
from tests.conformance.groupkit import create_topic, produce
from tests.conformance.sharekit import SHARE_BROKER_CONFIG, hold_records, set_group_configs

from .conftest import (
    CONSOLE,
    api,
    console_broker,
    group_row,
    http_url,
    remote_console,
    wait_for,
)

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def member_process(bootstrap: str, group: str, topic: str, session_ms: int
                   ) -> subprocess.Popen[str]:
    """A librdkafka classic member in a process of its own (tests/conformance)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.conformance.group_member", bootstrap, group, topic,
         str(session_ms)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextmanager
def processes(procs: list[subprocess.Popen[str]]) -> Iterator[list[subprocess.Popen[str]]]:
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)


@contextmanager
def polled(member: Any) -> Iterator[Any]:
    """Poll a librdkafka member on a thread of its own (its rebalances run in poll)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            member.poll(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield member
    finally:
        stop.set()
        thread.join(10)
        member.close()


def off_loop(fn: Any, *args: Any) -> Any:
    """Call ``fn`` on another thread: Playwright's sync API keeps an event loop running on
    this one, and the cluster helpers run one of their own (``asyncio.run``)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def members_of(base: str, gid: str) -> list[str]:
    status, body = api(base, f"/groups/{gid}")
    return [] if status != 200 else [m["member_id"] for m in body["group"]["members"]]


def group_state(base: str, gid: str) -> str | None:
    status, body = api(base, f"/groups/{gid}")
    return None if status != 200 else str(body["group"]["state"])


def test_a_killed_member_shows_its_session_expiry_and_the_time_to_stable(
        console: tuple[BrokerProcess, str], page: Any, screenshots: Path) -> None:
    proc, base = console
    create_topic(proc.bootstrap, "orders", 3)
    produce(proc.bootstrap, "orders", 3, 20)
    with processes([member_process(proc.bootstrap, "billing", "orders", 2000)
                    for _ in range(3)]) as procs:
        wait_for(lambda: group_state(base, "billing") == "Stable"
                 and len(members_of(base, "billing")) == 3, 40, "three Stable members")
        with Admin(proc.bootstrap) as admin:  # two groups behind, for the list
            for gid, offset in (("reports", 12), ("archive", 3)):
                admin.alter_consumer_group_offsets(
                    gid, {TopicPartition("orders", p): offset for p in range(3)})
        page.goto(f"{base}/console/#/groups")
        page.wait_for_selector("tr[data-group=billing] .badge.Stable")
        page.wait_for_selector("tr[data-group=archive] .badge.OK")
        page.set_viewport_size({"width": 1400, "height": 330})
        page.screenshot(path=str(screenshots / "groups.png"))
        page.set_viewport_size({"width": 1400, "height": 1100})
        page.goto(f"{base}/console/#/group/billing")
        page.wait_for_selector("[data-testid=event][data-cause=member-joined]")
        before = set(members_of(base, "billing"))
        procs[0].send_signal(signal.SIGKILL)
        page.wait_for_selector(
            "[data-testid=event][data-cause=session-expired] [data-testid=time-to-stable]",
            timeout=30_000)
        after = set(members_of(base, "billing"))
        [gone] = before - after
        # (the page re-renders on each update: query the element again, keep no handle)
        text = page.locator("[data-testid=event][data-cause=session-expired]").first.inner_text()
        assert gone in text and "Session expired" in text and "stable after" in text
        assert page.locator("#g-members tr").count() == 2
        page.screenshot(path=str(screenshots / "classic-session-expired.png"), full_page=True)


def test_a_consumer_protocol_member_joins_reconciling_then_stable(
        tmp_path: Path, page: Any, screenshots: Path) -> None:
    config = {**BROKER_CONFIG, **CONSOLE, "group.consumer.heartbeat.interval.ms": "1500",
              "group.consumer.session.timeout.ms": "6000"}
    proc = BrokerProcess(tmp_path / "data", config, extra_args=["--metrics-port", "0"]).start()
    try:
        base = http_url(proc)
        create_topic(proc.bootstrap, "clicks", 4)
        produce(proc.bootstrap, "clicks", 4, 10)
        first = CpMember(proc.bootstrap, "analytics", "first").subscribe(["clicks"])
        with polled(first):
            wait_for(lambda: group_state(base, "analytics") == "Stable", 30, "a Stable group")
            page.goto(f"{base}/console/#/group/analytics")
            page.wait_for_selector("#g-state .badge.Stable")
            second = CpMember(proc.bootstrap, "analytics", "second").subscribe(["clicks"])
            with polled(second):
                page.wait_for_selector("#g-state .badge.Reconciling", timeout=20_000)
                # the target beside the current assignment: what moves is marked
                page.wait_for_selector("td[data-testid=assignment] .tp.revoke, "
                                       "td[data-testid=assignment] .tp.add", timeout=10_000)
                page.screenshot(path=str(screenshots / "consumer-reconciling.png"),
                                full_page=True)
                page.wait_for_selector("#g-state .badge.Stable", timeout=30_000)
                joined = page.locator("[data-testid=event][data-cause=member-joined]")
                assert joined.count() == 2
                newest = joined.first.inner_text()
                assert "Assigning" in newest and "TargetComputed" in newest
                assert "Reconciled" in newest and "stable after" in newest
                rows = page.locator("#g-members tr")
                assert rows.count() == 2
                assert page.locator("td[data-testid=assignment] .tp").count() == 4
                page.screenshot(path=str(screenshots / "consumer-stable.png"), full_page=True)
    finally:
        assert proc.stop() == 0


def test_an_offset_reset_is_previewed_refused_while_members_exist_then_executed(
        console: tuple[BrokerProcess, str], page: Any, screenshots: Path) -> None:
    from confluent_kafka import Consumer

    proc, base = console
    create_topic(proc.bootstrap, "payments", 2)
    produce(proc.bootstrap, "payments", 2, 15)
    c = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "ledger",
                  "session.timeout.ms": 6000, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["payments"])
    got = 0
    while got < 30:
        got += len([m for m in c.consume(30, timeout=0.5) if m.error() is None])
    c.commit(asynchronous=False)
    page.goto(f"{base}/console/#/group/ledger")
    page.wait_for_selector("#g-state .badge.Stable")
    page.select_option("[data-testid=reset-mode]", "earliest")
    page.click("[data-testid=reset-preview]")
    page.wait_for_selector("[data-testid=reset-refused]")
    assert page.is_disabled("[data-testid=reset-execute]")
    page.screenshot(path=str(screenshots / "reset-refused.png"), full_page=True)
    c.close()
    page.wait_for_selector("#g-state .badge.Empty", timeout=20_000)
    page.select_option("[data-testid=reset-mode]", "shift")
    page.fill("[data-testid=reset-value]", "-10")
    page.click("[data-testid=reset-preview]")
    page.wait_for_selector("[data-testid=reset-result] td.num")
    assert page.locator("[data-testid=reset-refused]").count() == 0
    cells = page.locator("[data-testid=reset-result] tbody tr").all_inner_texts()
    assert sorted(cells) == ["payments-0\t15\t5", "payments-1\t15\t5"]
    page.wait_for_function(
        "!document.querySelector('[data-testid=reset-execute]').disabled")
    page.click("[data-testid=reset-execute]")
    page.wait_for_selector("[data-testid=reset-done]")
    page.wait_for_selector("[data-testid=audit] .badge.executed")
    page.wait_for_selector("[data-testid=event][data-cause=offsets-reset]", timeout=10_000)
    page.screenshot(path=str(screenshots / "reset-executed.png"), full_page=True)
    with Admin(proc.bootstrap) as admin:
        assert admin.list_consumer_group_offsets("ledger") == {
            TopicPartition("payments", 0): 5, TopicPartition("payments", 1): 5}


def test_the_history_continues_on_the_new_coordinator_after_a_failover(
        tmp_path: Path, pg_dsn: str, page: Any, screenshots: Path) -> None:
    config = {"console.lag.sample.interval.ms": "300"}
    nodes: dict[int, ClusterNodeProcess] = {}
    try:
        for i in (1, 2, 3):
            node = ClusterNodeProcess(tmp_path, i, pg_dsn, config)
            node.extra_args += ["--metrics-port", "0"]
            nodes[i] = node.start()
        bootstrap = ",".join(n.bootstrap for n in nodes.values())
        create_topic(bootstrap, "events", 2)
        wait_until(lambda: off_loop(all_owned, pg_dsn, set(nodes)), 30, "every lease held")
        produce(bootstrap, "events", 2, 10)
        urls = {i: http_url(n) for i, n in nodes.items()}

        def coordinator() -> int | None:
            try:
                with Admin(bootstrap, request_timeout_ms=3000) as admin:
                    return admin.find_coordinator("audit")[0]
            except Exception:
                return None

        with processes([member_process(bootstrap, "audit", "events", 8000) for _ in range(2)]):
            first = wait_for(coordinator, 30, "a coordinator")
            wait_for(lambda: group_state(urls[first], "audit") == "Stable"
                     and len(members_of(urls[first], "audit")) == 2, 40, "a Stable group")
            nodes[first].kill()
            live = {i: n for i, n in nodes.items() if i != first}
            bootstrap = ",".join(n.bootstrap for n in live.values())
            second = wait_for(lambda: (c := coordinator()) in live and c, 30,
                              "another node to coordinate the group")
            page.goto(f"{urls[second]}/console/#/group/audit")
            page.wait_for_selector("[data-testid=event][data-cause=coordinator-loaded]",
                                   timeout=30_000)
            loaded = page.locator("[data-testid=event][data-cause=coordinator-loaded]").first
            assert f"taken over from node {first}" in loaded.inner_text()
            assert page.locator("[data-testid=event][data-cause=member-joined]").count() >= 1
            page.wait_for_selector("#g-members tr[data-member]", timeout=30_000)
            page.screenshot(path=str(screenshots / "cluster-failover.png"), full_page=True)
            find_txn_coordinator(nodes[second].bootstrap)  # __transaction_state: leased too
            wait_for(lambda: len(api(urls[second], "/health")[1]["cluster"][
                "coordinator_leases"]) == 6 + 50, 30, "the transaction shards' leases")
            page.goto(f"{urls[second]}/console/#/health")
            page.wait_for_selector("[data-testid=since-failover] .clock")
            rows = page.locator("[data-testid=coordinator-leases] tbody tr").all_inner_texts()
            assert [r.split("\t")[:2] for r in (rows[0], rows[6], rows[-1])] == [
                ["group", "__consumer_offsets-0"], ["transaction", "__transaction_state-0"],
                ["transaction", "__transaction_state-49"]]
            page.screenshot(path=str(screenshots / "health.png"), full_page=True)
            _, health = api(urls[second], "/health")
            assert health["cluster"]["takeovers"] >= 1 and first not in \
                health["cluster"]["live_nodes"]
    finally:
        for node in nodes.values():
            node.kill()


def test_a_share_group_shows_its_members_and_share_partitions(
        tmp_path: Path, page: Any, screenshots: Path) -> None:
    """A confluent-kafka ShareConsumer holds records of a share group: the share panel
    lists the group; its page shows the member's assignment and the share partition's start
    offset, lag and in-flight records by state (the API answers the same), and no offset
    reset or consumer lag (a share group commits no offsets). ``samsa console`` against the
    broker as a cluster shows the group, its member, start offset and lag."""
    proc = console_broker(tmp_path / "data", **SHARE_BROKER_CONFIG)
    try:
        base = http_url(proc)
        create_topic(proc.bootstrap, "jobs", 1)
        set_group_configs(proc.bootstrap, "workers", {
            "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "60000"})
        produce(proc.bootstrap, "jobs", 1, 10)
        a, _ = hold_records(proc.bootstrap, "workers", "jobs")
        try:
            status, body = api(base, "/groups/workers/share-partitions")
            assert status == 200, body
            assert body["partitions"] == [{
                "topic": "jobs", "partition": 0, "start_offset": 4, "end_offset": 10,
                "lag": 4, "in_flight": 6, "available": 2, "acquired": 2, "acknowledged": 0,
                "archived": 2}]
            assert api(base, "/groups/no-such-group/share-partitions")[0] == 404
            page.goto(f"{base}/console/#/share")
            page.click("[data-testid=share-groups] a >> text=workers")
            page.wait_for_selector("[data-testid=share-partitions] tr[data-partition]")
            assert page.locator("[data-testid=share-partitions] tbody tr").all_inner_texts() == [
                "jobs-0\t4\t10\t4\t6\t2\t2\t0\t2"]
            assert "jobs-0" in page.inner_text("[data-testid=members]")
            assert not page.is_visible("#reset-card") and not page.is_visible("#lag-card")
            page.screenshot(path=str(screenshots / "share-group.png"), full_page=True)
            with remote_console(proc.bootstrap, tmp_path / "audit.log") as remote:
                # a cluster's console: members, start offset and lag, no record counts
                row = wait_for(lambda: (r := group_row(remote, "workers")) and r,
                               what="the share group listed")
                assert (row["group_type"], row["state"], row["members"]) == (
                    "share", "Stable", 1)
                status, body = api(remote, "/groups/workers")
                assert status == 200, body
                assert body["group"]["members"][0]["assigned"] == [["jobs", 0]]
                status, body = api(remote, "/groups/workers/share-partitions")
                assert status == 200, body
                assert [(p["start_offset"], p["lag"], p["acquired"])
                        for p in body["partitions"]] == [(4, 4, None)]
        finally:
            a.close()
    finally:
        assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"
