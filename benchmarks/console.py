"""The group console's costs: the rebalance history's memory, the broker's heartbeat
throughput and rebalance time with the history on vs off, and the console page of a
5,000-member group.

(a) History memory: a coordinator on the fake clock (tests/coordinator) records 1,000
    rebalances of a 3-member group (each event: cause, three phases, who held each up);
    the events replayed into a fresh shard state, measured with tracemalloc; and the bytes
    of their records in ``__consumer_offsets``.
(b) Heartbeats per second one broker answers (benchmarks/rebalance.py's load generator, case
    (c)), with group.history.max.events=100 (the default) and 0 (off), on two brokers run
    one after the other, alternately, ``--rounds`` times: each round's ratio on/off, and
    their median. A heartbeat of a Stable group writes nothing, so history costs it only
    the recorder's per-call hooks. The same brokers then time a 5,000-member group's join
    and a full rebalance of it (every member rejoins), on and off, alternately.
(c) The console page of a group of 5,000 protocol-level members (kept alive by a load
    process): the JSON API's answer time for the group, and the time until the page,
    in Debian's chromium driven by Playwright, shows all 5,000 member rows.

The machine may be shared: compare the ratios within one run, not across runs.

    .venv/bin/python benchmarks/console.py [--rounds 5] [--members 5000] [--skip-c]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import rebalance  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402

from samsa.coordinator import CoordinatorConfig  # noqa: E402
from samsa.coordinator.history import GroupHistories, HistoryKey  # noqa: E402
from samsa.coordinator.records import deserialize, serialize  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


# -- (a) ------------------------------------------------------------------------------------

def history_memory(events: int = 1000) -> dict[str, float]:
    from tests.coordinator.harness import Ctx

    config = CoordinatorConfig(offsets_topic_num_partitions=1, history_max_events=events,
                               initial_rebalance_delay_ms=0)
    ctx = Ctx(config=config)
    ids, gen = ctx.stable_group(3)
    leader = ctx.describe().summary.leader
    while len(ctx.coord.history("g")) < events:
        tokens = [ctx.join(m) for m in ids]
        gen = ctx.join_reply(tokens[0]).generation_id
        for m in ids:
            ctx.sync(m, gen, tuple((x, b"") for x in ids) if m == leader else ())
    raw = [serialize(r.key, r.value) for r in ctx.records if isinstance(r.key, HistoryKey)]
    on_disk = sum(len(k) + len(v or b"") for k, v in dict(raw).items())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    histories = GroupHistories()  # as a shard load builds it: decoded from the log's bytes
    for key, value in raw:
        decoded = deserialize(key, value)
        assert decoded is not None
        histories.replay(*decoded)  # type: ignore[arg-type]
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    kept = len(histories.events("g"))
    return {"events": kept, "bytes": used, "per_1000": used / kept * 1000,
            "disk_per_1000": on_disk / kept * 1000, "records_per_event": len(raw) / kept}


# -- (b) ------------------------------------------------------------------------------------

def heartbeat_rates(tmp: Path, rounds: int, args: argparse.Namespace) -> None:
    brokers = {
        "on": rebalance._start(tmp, "hist-on", {"group.initial.rebalance.delay.ms": "1000",
                                                "group.history.max.events": "100"}),
        "off": rebalance._start(tmp, "hist-off", {"group.initial.rebalance.delay.ms": "1000",
                                                  "group.history.max.events": "0"}),
    }
    try:
        rates: dict[str, list[float]] = {"on": [], "off": []}
        ratios = []
        for r in range(rounds):
            order = ("on", "off") if r % 2 == 0 else ("off", "on")
            got = {}
            for name in order:
                b = brokers[name]
                assert b.proc is not None
                hb = rebalance._in_process(rebalance.heartbeat_load, "127.0.0.1", b.port,
                                           args.hb_groups, args.hb_members, args.hb_connections,
                                           args.hb_seconds, args.hb_window, b.proc.pid)
                got[name] = hb["rate"]
                rates[name].append(hb["rate"])
            ratios.append(got["on"] / got["off"])
            print(f"    round {r + 1}: on {got['on']:,.0f}/s, off {got['off']:,.0f}/s, "
                  f"on/off {ratios[-1]:.3f}")
        print(f"    median: on {statistics.median(rates['on']):,.0f}/s, off "
              f"{statistics.median(rates['off']):,.0f}/s; median ratio on/off "
              f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
        joins: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        for r in range(args.big_rounds):
            for name in (("on", "off") if r % 2 == 0 else ("off", "on")):
                b = brokers[name]
                big = rebalance._in_process(rebalance.big_group, "127.0.0.1", b.port,
                                            args.members, args.hb_connections)
                joins[name].append((big["stable_s"], big["rejoin_s"]))
        for what, i in (("join (incl. 1 s initial delay)", 0), ("full rebalance", 1)):
            on = statistics.median(x[i] for x in joins["on"])
            off = statistics.median(x[i] for x in joins["off"])
            print(f"    {args.members} members, {what}: on {on:.2f} s, off {off:.2f} s, "
                  f"on/off {on / off:.3f} (median of {args.big_rounds})")
    finally:
        for b in brokers.values():
            b.stop()


# -- (c) ------------------------------------------------------------------------------------

def _hold_group(port: int, members: int, seconds: float, ready: Any) -> None:
    async def run() -> None:
        conns = await rebalance.open_many("127.0.0.1", port, members)
        await rebalance.join_group(conns, "big", members, session_ms=120_000)
        ready.set()
        await asyncio.sleep(seconds)
        for c in conns:
            await c.close()

    asyncio.run(run())


def console_page(tmp: Path, members: int) -> None:
    from playwright.sync_api import sync_playwright

    b = BrokerProcess(tmp / "page", {"group.initial.rebalance.delay.ms": "1000",
                                     "group.max.session.timeout.ms": "300000",
                                     "console.lag.sample.interval.ms": "2000"},
                      extra_args=["--metrics-port", "0"]).start()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_group, args=(b.port, members, 120.0, ready))
    holder.start()
    try:
        port = None
        while port is None:
            found = re.findall(r"console on http://[\d.]+:(\d+)/", b.log_path.read_text())
            port = int(found[-1]) if found else None
            time.sleep(0.1)
        base = f"http://127.0.0.1:{port}"
        assert ready.wait(120), "the group never formed"
        api = []
        for _ in range(5):
            start = time.perf_counter()
            with urllib.request.urlopen(f"{base}/api/v1/groups/big", timeout=60) as resp:
                body = json.loads(resp.read())
            api.append(time.perf_counter() - start)
        assert len(body["group"]["members"]) == members
        print(f"    GET /api/v1/groups/big ({members} members): median "
              f"{statistics.median(api) * 1000:.0f} ms of 5")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            loads = []
            for _ in range(3):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                start = time.perf_counter()
                page.goto(f"{base}/console/#/group/big")
                page.wait_for_function(
                    f"document.querySelectorAll('#g-members tr[data-member]').length == {members}",
                    timeout=120_000)
                loads.append(time.perf_counter() - start)
                page.close()
            browser.close()
        print(f"    the group's page showing all {members} members: median "
              f"{statistics.median(loads):.2f} s of 3 (min {min(loads):.2f}, max "
              f"{max(loads):.2f})")
    finally:
        holder.terminate()
        holder.join(30)
        b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--big-rounds", type=int, default=3)
    ap.add_argument("--members", type=int, default=5000)
    ap.add_argument("--hb-groups", type=int, default=10)
    ap.add_argument("--hb-members", type=int, default=100)
    ap.add_argument("--hb-connections", type=int, default=8)
    ap.add_argument("--hb-window", type=int, default=64)
    ap.add_argument("--hb-seconds", type=float, default=5.0)
    ap.add_argument("--skip-b", action="store_true")
    ap.add_argument("--skip-c", action="store_true")
    args = ap.parse_args()
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print("(a) rebalance history memory")
    mem = history_memory()
    print(f"    {mem['events']} events kept: {mem['per_1000'] / 1024:.0f} KiB per 1,000 events "
          f"in memory, {mem['disk_per_1000'] / 1024:.0f} KiB per 1,000 in their records "
          f"(last version of each); {mem['records_per_event']:.1f} records written per "
          "event (one per phase)")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_b:
            print("(b) heartbeats/s with the history on (100 per group) vs off, alternating")
            heartbeat_rates(Path(tmp), args.rounds, args)
        if not args.skip_c:
            print(f"(c) console page of a {args.members}-member group")
            console_page(Path(tmp), args.members)


if __name__ == "__main__":
    main()



