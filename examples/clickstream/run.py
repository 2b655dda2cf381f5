"""One-command demo: broker, generator, the Spark job stopped and restarted, then checks.

1. starts a samsa broker on 127.0.0.1 (or uses ``--bootstrap``) and creates the topics;
2. writes the first half of the click events and runs the job until it caught up;
3. stops the job, writes the second half, restarts the job from its checkpoints;
4. checks that every window the watermark closed has exactly the expected count, once, in
   Parquet and in the results topic.

    .venv/bin/python -m examples.clickstream [--events 6000] [--keep ./clickstream-out]
    .venv/bin/python -m examples.clickstream --master spark://127.0.0.1:7077   # a cluster

On a cluster, executors write the Parquet output and checkpoints, so the work directory
must be a path every node sees (one machine, or a shared file system).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from examples.clickstream import generator, pipeline

Window = tuple[datetime, str]


def expected_counts(events: list[generator.Click]) -> dict[Window, int]:
    """Counts of the windows the watermark has closed after ``events``."""
    last = max(e.ts_ms for e in events)
    closed_before = last - 2 * 60_000  # the 2-minute watermark
    out: dict[Window, int] = collections.Counter()
    for e in events:
        minute = e.ts_ms - e.ts_ms % 60_000
        if minute + 60_000 <= closed_before:
            out[(datetime.fromtimestamp(minute / 1000, UTC), e.page)] += 1
    return dict(out)


def run_until_caught_up(spark: Any, bootstrap: str, topic: str, results: str,
                        work: Path) -> None:
    """Start the job, wait until it processed everything, stop it between batches."""
    queries = pipeline.start(spark, bootstrap, topic, results, work / "parquet",
                             work / "checkpoints", trigger="1 second")
    try:
        for q in queries:
            q.processAllAvailable()
            # Windows close in the no-data batch that follows the last data batch (it runs
            # with the advanced watermark); wait for it so this run emits all it can.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not (
                    q.lastProgress and q.lastProgress["numInputRows"] == 0
                    and not q.status["isTriggerActive"]):
                time.sleep(0.2)
    finally:
        pipeline.stop_gracefully(queries)


def parquet_counts(spark: Any, path: Path) -> list[tuple[Window, int]]:
    rows = spark.read.parquet(str(path)).collect()
    return [((r.minute.replace(tzinfo=UTC) if r.minute.tzinfo is None else r.minute, r.page),
             r["count"]) for r in rows]


def topic_counts(spark: Any, bootstrap: str, topic: str) -> list[tuple[Window, int]]:
    rows = (spark.read.format("samsa").option("bootstrap.servers", bootstrap)
            .option("subscribe", topic).load().collect())
    out = []
    for r in rows:
        d = json.loads(r.value)
        minute = datetime.fromisoformat(d["minute"].replace("Z", "+00:00"))
        if minute.tzinfo is None:
            minute = minute.replace(tzinfo=UTC)
        out.append(((minute.astimezone(UTC), d["page"]), d["count"]))
    return out


def check(name: str, got: list[tuple[Window, int]], expected: dict[Window, int]) -> None:
    windows = [w for w, _ in got]
    dupes = [w for w, n in collections.Counter(windows).items() if n > 1]
    assert not dupes, f"{name}: windows written twice: {dupes[:5]}"
    assert dict(got) == expected, f"{name}: counts differ from the generated events"
    print(f"{name}: {len(got)} windows, {sum(expected.values())} clicks, "
          "nothing lost or duplicated")


def demo(spark: Any, bootstrap: str, work: Path, events: int, topic: str = "clicks",
         results: str = "page-counts") -> None:
    """The whole scenario against a running broker and Spark session."""
    from samsa import Admin

    with Admin(bootstrap) as admin:
        admin.create_topics({topic: 3, results: 1}, exist_ok=True)
    start = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    clicks = generator.clicks(events, start, step_ms=100, seed=7)
    half = len(clicks) // 2

    generator.send(bootstrap, topic, clicks[:half])
    print(f"run 1: {half} events")
    run_until_caught_up(spark, bootstrap, topic, results, work)
    first = parquet_counts(spark, work / "parquet")
    print(f"run 1 stopped with {len(first)} closed windows; writing {len(clicks) - half} more")

    generator.send(bootstrap, topic, clicks[half:])
    print("run 2: restarted from the checkpoints")
    run_until_caught_up(spark, bootstrap, topic, results, work)

    expected = expected_counts(clicks)
    check("parquet", parquet_counts(spark, work / "parquet"), expected)
    check(f"topic {results}", topic_counts(spark, bootstrap, results), expected)


def _start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli.main", "serve", "--listen", "127.0.0.1:0",
         "--data-dir", str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"samsa listening on ([\d.]+):(\d+)", line)
        if m:
            return proc, f"{m.group(1)}:{m.group(2)}"
    raise RuntimeError("broker did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=6000, help="clicks (100 ms apart)")
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    ap.add_argument("--keep", type=Path, help="keep Parquet and checkpoints in this directory")
    ap.add_argument("--master", default="local[2]",
                    help="Spark master, e.g. spark://127.0.0.1:7077 (default local[2])")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="clickstream-"))
    if a.keep:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    proc, bootstrap = (None, a.bootstrap) if a.bootstrap else _start_broker(work / "data")
    from samsa.spark import session

    spark = session("clickstream", a.master, **{"spark.sql.shuffle.partitions": "2",
                                                "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    started = time.monotonic()
    try:
        demo(spark, bootstrap, work, a.events)
        print(f"done in {timedelta(seconds=round(time.monotonic() - started))}; "
              f"output in {work}" if a.keep else "")
    finally:
        spark.stop()
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
