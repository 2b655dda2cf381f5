"""Assignor scale benchmark: prints timings, peak memory and ratios.

    .venv/bin/python benchmarks/assignors.py [--quick]

Cases (each in a fresh forked process, so peak RSS is per case):

1. sticky / cooperative-sticky, 500 topics x 2000 partitions (1,000,000) over 2000 members with
   identical subscriptions: round 1 (nothing owned), round 2 (one member left, the others
   report what they own: sticky user data for ``sticky``, owned partitions + generation for
   ``cooperative-sticky``). Target: both rounds together <= 10 s.
2. the same, with one member subscribed to a single topic (Kafka's general path).
3. samsa ``sticky`` vs kafka-python's ``StickyPartitionAssignor``, 100 topics x 100 partitions
   (10,000) over 100 members, the same two rounds. Target: >= 10x faster.
4. ``optimal``, 1000 topics x 100 partitions (100,000) over 1000 members, each subscribed to a
   random 5-100 topics (seeded), two rounds. Target: <= 10 s per round.

5. KIP-848 server-side ``uniform`` and ``range`` (``samsa.assignors.server``), 500 topics x
   100 partitions (50,000) over 1000 members: identical subscriptions, different ones (four
   subscription shapes), and ``uniform`` with racks (three racks, each partition's replicas
   on two). A fresh target assignment, then an incremental one after one member left (the
   previous target as the current assignment). Kafka reports 15-20 ms; target <= 100 ms.
   Median of 5 runs.

Only ``assign()`` is timed (wall clock, and CPU time of the process, which is steadier on a
shared machine): building members' subscriptions is the members' work.

    .venv/bin/python benchmarks/assignors.py --server   # only the server-side rows
    .venv/bin/python benchmarks/assignors.py --sticky   # only the sticky rows (case 1, 2)
    .venv/bin/python benchmarks/assignors.py --server --baseline /tmp/before/src

``--baseline SRC`` runs every case a second time, in a fresh interpreter importing samsa from
``SRC`` (e.g. ``git worktree add /tmp/before main``), and prints both with the CPU ratio.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from samsa.assignors import (
    Assignment,
    ClusterView,
    CooperativeStickyAssignor,
    OptimalAssignor,
    StickyAssignor,
    Subscription,
)

QUICK = "--quick" in sys.argv
SCALE = 10 if QUICK else 1
BASELINE = sys.argv[sys.argv.index("--baseline") + 1] if "--baseline" in sys.argv else None


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summary(result: Mapping[str, Assignment], total: int) -> str:
    sizes = [len(a.partitions) for a in result.values()]
    assigned = sum(sizes)
    return f"assigned {assigned:,}/{total:,}, loads {min(sizes)}..{max(sizes)}"


def subscriptions(
    strategy: str,
    topics_of: Mapping[str, tuple[str, ...]],
    owned: Mapping[str, Assignment] | None,
    generation: int,
) -> dict[str, Subscription]:
    """What each member sends, built as the member would build it."""
    subs = {}
    for member, topics in topics_of.items():
        if owned is None:
            subs[member] = Subscription(topics)
        elif strategy == "sticky" or strategy == "optimal":
            assignor = StickyAssignor()
            assignor.on_assignment(owned[member], generation)
            subs[member] = assignor.metadata(topics)
        else:
            subs[member] = Subscription(
                topics, owned_partitions=owned[member].partitions, generation_id=generation
            )
    return subs


def two_rounds(
    strategy: str, counts: dict[str, int], topics_of: dict[str, tuple[str, ...]], leaver: str
) -> dict[str, Any]:
    assignor = {"sticky": StickyAssignor, "cooperative-sticky": CooperativeStickyAssignor,
                "optimal": OptimalAssignor}[strategy]()
    cluster = ClusterView(counts)
    total = sum(counts.values())
    subs = subscriptions(strategy, topics_of, None, -1)
    before = rss_mib()
    start, cpu = time.perf_counter(), time.process_time()
    first = assignor.assign(cluster, subs)
    t1, c1 = time.perf_counter() - start, time.process_time() - cpu
    remaining = {m: t for m, t in topics_of.items() if m != leaver}
    subs = subscriptions(strategy, remaining, first, 1)
    start, cpu = time.perf_counter(), time.process_time()
    second = assignor.assign(cluster, subs)
    t2, c2 = time.perf_counter() - start, time.process_time() - cpu
    kept = sum(len(set(first[m].partitions) & set(second[m].partitions)) for m in remaining)
    return {
        "round1": t1,
        "round2": t2,
        "cpu1": c1,
        "cpu2": c2,
        "check1": summary(first, total),
        "check2": summary(second, total),
        "kept": kept,
        "owned": sum(len(first[m].partitions) for m in remaining),
        "rss": rss_mib(),
        "rss_before": before,
    }


def uniform_case(strategy: str, single_topic_member: bool) -> dict[str, Any]:
    ntopics, nparts, nmembers = 500 // SCALE, 2000, 2000 // SCALE
    counts = {f"topic-{i:03d}": nparts for i in range(ntopics)}
    every = tuple(sorted(counts))
    topics_of = {f"consumer-{i:04d}": every for i in range(nmembers)}
    if single_topic_member:
        topics_of["consumer-0007"] = (every[0],)
    return two_rounds(strategy, counts, topics_of, leaver="consumer-0042")


def kafka_python_case() -> dict[str, Any]:
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    ntopics, nparts, nmembers = 100, 100, 100
    counts = {f"topic-{i:03d}": nparts for i in range(ntopics)}
    every = tuple(sorted(counts))
    topics_of = {f"consumer-{i:03d}": every for i in range(nmembers)}

    class Cluster:
        def topics(self) -> set[str]:
            return set(counts)

        def partitions_for_topic(self, topic: str) -> set[int] | None:
            return set(range(counts[topic])) if topic in counts else None

    class Member:
        def __init__(self, member_id: str, metadata: Any) -> None:
            self.member_id = member_id
            self.metadata = metadata
            self.group_instance_id = None

    def theirs(owned: Mapping[str, list[Any]] | None, members: Mapping[str, Any]) -> Any:
        out = []
        for m, topics in members.items():
            prev = None if owned is None else owned[m]
            meta = StickyPartitionAssignor._metadata(list(topics), prev, 1)
            out.append(Member(m, ConsumerProtocolSubscription.decode(meta.encode())))
        return out

    kp = StickyPartitionAssignor()
    cluster = Cluster()
    start = time.perf_counter()
    first = kp.assign(cluster, theirs(None, topics_of))
    k1 = time.perf_counter() - start
    remaining = {m: t for m, t in topics_of.items() if m != "consumer-042"}
    owned = {m: first[m].partitions() for m in remaining}
    members = theirs(owned, remaining)
    start = time.perf_counter()
    kp.assign(cluster, members)
    k2 = time.perf_counter() - start
    ours = two_rounds("sticky", counts, topics_of, leaver="consumer-042")
    return {"kafka_python": (k1, k2), "samsa": (ours["round1"], ours["round2"]),
            "rss": rss_mib()}


def optimal_case() -> dict[str, Any]:
    ntopics, nparts, nmembers = 1000 // SCALE, 100, 1000 // SCALE
    rng = random.Random(20261121)
    counts = {f"topic-{i:04d}": nparts for i in range(ntopics)}
    names = sorted(counts)
    topics_of = {
        f"consumer-{i:04d}": tuple(sorted(rng.sample(names, rng.randint(5, 100 // SCALE + 5))))
        for i in range(nmembers)
    }
    wanted = {t for ts in topics_of.values() for t in ts}
    result = two_rounds("optimal", {t: n for t, n in counts.items() if t in wanted}, topics_of,
                        leaver="consumer-0042")
    result["partitions"] = len(wanted) * nparts
    return result


def server_case(name: str, shape: str) -> dict[str, Any]:
    """A KIP-848 target assignment: fresh, then after one member left (median of 5)."""
    import statistics
    import uuid

    from samsa.assignors.server import GroupSpec, MemberSpec, TopicInfo, resolve_server_assignor

    racks = ("az1", "az2", "az3")
    ntopics, nparts, nmembers = 500 // SCALE, 100, 1000 // SCALE
    ids = [uuid.UUID(int=i + 1) for i in range(ntopics)]
    view = {
        t: TopicInfo(t, f"topic-{i:03d}", nparts,
                     {p: frozenset({racks[(i + p) % 3], racks[(i + p + 1) % 3]})
                      for p in range(nparts)} if shape == "racks" else {})
        for i, t in enumerate(ids)
    }
    rng = random.Random(848)
    shapes = [frozenset(ids), frozenset(ids[: ntopics // 2]), frozenset(ids[ntopics // 2:]),
              frozenset(rng.sample(ids, ntopics * 4 // 5))]
    members = {
        f"member-{i:04d}": MemberSpec(
            f"member-{i:04d}", shapes[i % 4] if shape == "different" else shapes[0],
            rack_id=racks[i % 3] if shape == "racks" else None)
        for i in range(nmembers)
    }
    assignor = resolve_server_assignor(name)
    leaver = "member-0042"
    remaining = {m: s for m, s in members.items() if m != leaver}
    runs: dict[str, list[tuple[float, float]]] = {"fresh": [], "incremental": []}
    for _ in range(5):
        start, cpu = time.perf_counter(), time.process_time()
        first = assignor.assign(GroupSpec(members), view)
        runs["fresh"].append((time.perf_counter() - start, time.process_time() - cpu))
        spec = GroupSpec(remaining, {m: first[m] for m in remaining})
        start, cpu = time.perf_counter(), time.process_time()
        second = assignor.assign(spec, view)
        runs["incremental"].append((time.perf_counter() - start, time.process_time() - cpu))
    moved = sum(len(ps - second[m].get(t, frozenset()))
                for m in remaining for t, ps in first[m].items())
    loads = [sum(map(len, a.values())) for a in second.values()]
    return {
        **{k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in runs.items()},
        "partitions": sum(len(ps) for a in second.values() for ps in a.values()),
        "moved": moved,
        "owned": sum(len(ps) for m in remaining for ps in first[m].values()),
        "loads": (min(loads), max(loads)),
    }


def server_rows() -> None:
    print("KIP-848 server-side assignors, 50,000 partitions (500 x 100) / 1000 members")
    for name in ("uniform", "range"):
        for shape in ("same", "different", "racks"):
            if shape == "racks" and name == "range":
                continue
            r, before = both(server_case, name, shape)
            label = {"same": "identical subscriptions", "different": "four subscription shapes",
                     "racks": "identical subscriptions, 3 racks"}[shape]
            print(f"{name:>18}, {label}")
            for k in ("fresh", "incremental"):
                wall, cpu = r[k]
                print(f"{'':>20}{k:<12}{wall * 1000:7.1f} ms (cpu {cpu * 1000:6.1f} ms)  "
                      f"target <= 100 ms: {'ok' if wall <= 0.1 else 'MISSED'}")
                if before is not None:
                    bwall, bcpu = before[k]
                    print(f"{'':>20}{'  before':<12}{bwall * 1000:7.1f} ms (cpu {bcpu * 1000:6.1f}"
                          f" ms)  cpu after/before {cpu / bcpu:.2f}")
            print(f"{'':>20}after the leave: assigned {r['partitions']:,}, loads "
                  f"{r['loads'][0]}..{r['loads'][1]}, moved {r['moved']:,} of "
                  f"{r['owned']:,} kept by the others")


def both(fn: Callable[..., dict[str, Any]], *args: Any
         ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The case with this checkout's samsa and, with ``--baseline``, with the baseline's."""
    return in_child(fn, *args), (in_child(fn, *args, src=BASELINE) if BASELINE else None)


def in_child(fn: Callable[..., dict[str, Any]], *args: Any, src: str | None = None
             ) -> dict[str, Any]:
    """Run ``fn`` in a forked child, or with ``src`` in a fresh interpreter importing samsa
    from there (``PYTHONPATH`` precedes the editable install's path)."""
    if src is None:
        with multiprocessing.get_context("fork").Pool(1) as pool:
            return pool.apply(fn, args)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", fn.__name__, json.dumps(args)]
    if QUICK:
        cmd.append("--quick")
    out = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": src}, check=True,
                         capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def child() -> None:
    """``--child NAME ARGS``: run one case here and print its result as JSON."""
    import samsa

    src = os.environ.get("PYTHONPATH", "")
    if not os.path.abspath(samsa.__file__).startswith(os.path.abspath(src)):
        raise RuntimeError(f"baseline child imported samsa from {samsa.__file__}")
    i = sys.argv.index("--child")
    name, args = sys.argv[i + 1], json.loads(sys.argv[i + 2])
    print(json.dumps(globals()[name](*args)))


def sticky_rows() -> None:
    for single in (False, True):
        label = "one member on a single topic" if single else "identical subscriptions"
        for strategy in ("sticky", "cooperative-sticky"):
            r, before = both(uniform_case, strategy, single)
            total = r["round1"] + r["round2"]
            print(f"{strategy:>18}, 1M partitions / 2000 members, {label}")
            print(f"{'':>20}round 1 {r['round1']:6.2f} s (cpu {r['cpu1']:5.2f} s)  "
                  f"({r['check1']})")
            print(f"{'':>20}round 2 {r['round2']:6.2f} s (cpu {r['cpu2']:5.2f} s)  "
                  f"({r['check2']}; kept {r['kept']:,}/{r['owned']:,} owned)")
            print(f"{'':>20}both    {total:6.2f} s  target <= 10 s: "
                  f"{'ok' if total <= 10 else 'MISSED'}; peak RSS {r['rss']:.0f} MiB "
                  f"(before round 1: {r['rss_before']:.0f} MiB)")
            if before is not None:
                cpu, bcpu = r["cpu1"] + r["cpu2"], before["cpu1"] + before["cpu2"]
                print(f"{'':>20}before  {before['round1'] + before['round2']:6.2f} s (cpu "
                      f"{before['cpu1']:5.2f} s + {before['cpu2']:5.2f} s)  cpu after/before "
                      f"{cpu / bcpu:.2f}; peak RSS {before['rss']:.0f} MiB")


def main() -> None:
    if "--child" in sys.argv:
        child()
        return
    print(f"samsa assignor benchmark{' (quick: 1/10 scale)' if QUICK else ''}")
    print("-" * 78)
    if "--server" in sys.argv:
        server_rows()
        return
    sticky_rows()
    if "--sticky" in sys.argv:
        return
    r = in_child(kafka_python_case)
    k, s = sum(r["kafka_python"]), sum(r["samsa"])
    print("sticky vs kafka-python StickyPartitionAssignor, 10k partitions / 100 members")
    print(f"{'':>20}kafka-python {r['kafka_python'][0]:7.3f} s + {r['kafka_python'][1]:7.3f} s")
    print(f"{'':>20}samsa        {r['samsa'][0]:7.3f} s + {r['samsa'][1]:7.3f} s")
    print(f"{'':>20}speed-up {k / s:6.1f}x  target >= 10x: {'ok' if k / s >= 10 else 'MISSED'}")
    r = in_child(optimal_case)
    print(f"optimal, {r['partitions']:,} partitions / 1000 members, random subscriptions")
    print(f"{'':>20}round 1 {r['round1']:6.2f} s  ({r['check1']})")
    print(f"{'':>20}round 2 {r['round2']:6.2f} s  ({r['check2']}; kept "
          f"{r['kept']:,}/{r['owned']:,} owned)")
    worst = max(r["round1"], r["round2"])
    print(f"{'':>20}target <= 10 s per round: {'ok' if worst <= 10 else 'MISSED'}; "
          f"peak RSS {r['rss']:.0f} MiB")
    server_rows()


if __name__ == "__main__":
    main()
