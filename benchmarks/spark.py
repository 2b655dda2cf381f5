"""Spark connector throughput: samsa topic -> Spark -> Parquet, and Spark -> samsa topic.

For each Spark master (``local[2]``, then a standalone cluster of 1-core workers started from
the pyspark package, see ``tests/spark/standalone.py``):

1. The writer: ``spark.range(N)`` as 100-byte values (explicit partitions) written to an
   8-partition topic with ``df.write.format("samsa")``.
2. The reader: that topic read with ``spark.read.format("samsa")`` and written to Parquet,
   once with Arrow batches (the default) and once with row tuples (``arrowBatches=false``).
3. The Python data-source ceiling: a Python data source (:class:`MemorySource`) that yields
   Arrow batches of the same rows, shape and sizes as the reader's from memory (built once
   per Python worker, no broker), written to Parquet: what Spark's Python data-source path
   can do at all on these cores.
4. The Spark ceiling: the same job reading Parquet files of the same data (the reader's
   output) instead of the topic, which is what Spark itself does on these cores.

Every row runs once per round, rounds interleaved (the machine's load drifts). Each row
prints its best records/s, the median over the rounds of its ratio to each ceiling of the
same round, and the median CPU seconds per million records of the broker, the JVMs
(driver and executors), the Python workers and the driver processes, sampled from
``/proc`` while it runs; then the CPU per record of the reader and the writer against their
Python ceilings. CPU per record drifts less with the load than records/s does.

``--before DIR`` also runs the writer and the reader of another checkout (``git worktree add
/tmp/spark-before main``) in the same run: a second driver process whose ``PYTHONPATH``
starts with ``DIR/src`` holds its own SparkSession (on the cluster: its own two workers), and
the two sides' rows are interleaved round by round against the same broker and topic.

Run (starts its own broker on 127.0.0.1, data in a temporary directory)::

    .venv/bin/python benchmarks/spark.py                    # 1,000,000 records
    .venv/bin/python benchmarks/spark.py --before /tmp/spark-before --repeat 3
    .venv/bin/python benchmarks/spark.py --records 200000 --no-cluster

Target: reader >= 0.8 of the Python data-source ceiling, >= 1,000,000 records/s on local[2].
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

TARGET = 1_000_000
SESSION_CONF = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g",
                "spark.ui.showConsoleProgress": "false"}
MARK = "@@bench "  # prefix of a runner's answers on its stdout


# ---- the Python data-source ceiling ---------------------------------------------------------

_DDL = ("key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int")
_batches: dict[tuple[Any, ...], list[Any]] = {}  # per Python worker: built once


def memory_batches(topic: str, partition: int, partitions: int, records: int,
                   batch_records: int) -> list[Any]:
    """The Arrow batches samsa's reader gives for one partition of the benchmark's topic:
    record ``k`` of partition ``p`` is ``spark.range`` id ``p + k * partitions`` as the
    writer wrote it (no key, the id left-padded with ``x`` to 100 bytes)."""
    import numpy as np
    import pyarrow as pa

    key = (topic, partition, partitions, records, batch_records)
    if key not in _batches:
        if not _batches:  # what samsa's reader does (samsa.spark.worker.freeze_imports)
            gc.collect()
            gc.freeze()
        ids = np.arange(partition, records, partitions)
        n = len(ids)
        fixed = np.char.rjust(ids.astype("S20"), 100, b"x")  # n x 100 bytes, one buffer
        values = pa.Array.from_buffers(pa.binary(), n, [
            None, pa.py_buffer(np.arange(0, 100 * n + 1, 100, dtype=np.int32)),
            pa.py_buffer(fixed.tobytes())])
        schema = pa.schema([("key", pa.binary()), ("value", pa.binary()),
                            ("topic", pa.string()), ("partition", pa.int32()),
                            ("offset", pa.int64()), ("timestamp", pa.timestamp("us", "UTC")),
                            ("timestampType", pa.int32())])
        ts = time.time_ns() // 1_000_000 * 1000
        out = []
        for lo in range(0, n, batch_records):
            m = min(batch_records, n - lo)
            out.append(pa.RecordBatch.from_arrays([
                pa.nulls(m, pa.binary()), values.slice(lo, m),
                pa.repeat(pa.scalar(topic, pa.string()), m),
                pa.repeat(pa.scalar(partition, pa.int32()), m),
                pa.array(np.arange(lo, lo + m, dtype=np.int64)),
                pa.array(np.full(m, ts, np.int64)).view(pa.timestamp("us", "UTC")),
                pa.array(np.zeros(m, np.int32))], schema=schema))
        _batches[key] = out
    return _batches[key]


class _Slice(InputPartition):
    def __init__(self, partition: int) -> None:
        super().__init__(partition)
        self.partition = partition


class _MemoryReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.topic = options["topic"]
        self.partitions_ = int(options["partitions"])
        self.records = int(options["records"])
        self.batch_records = int(options["batchrecords"])

    def partitions(self) -> list[InputPartition]:
        return [_Slice(p) for p in range(self.partitions_)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _Slice)
        yield from memory_batches(self.topic, partition.partition, self.partitions_,
                                  self.records, self.batch_records)


class _NullWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if not _batches:  # as samsa's sink (samsa.spark.worker.freeze_imports)
            _batches[()] = []
            gc.collect()
            gc.freeze()
        rows = sum(batch.num_rows for batch in iterator)
        return _Written(rows)


class _Written(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class MemorySource(DataSource):
    """``format("samsa_bench_memory")``: the reader's rows from memory (see module doc);
    as a sink it takes the writer's Arrow batches and drops them (the writer's ceiling)."""

    @classmethod
    def name(cls) -> str:
        return "samsa_bench_memory"

    def schema(self) -> str:
        return _DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return _MemoryReader(dict(self.options))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return _NullWriter()


# ---- CPU time per process group -------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[str, float]]:
    """Command line and CPU seconds (user + system) of this process and its descendants."""
    from tests.spark.standalone import descendants

    out = {}
    for pid in [os.getpid(), *descendants(os.getpid())]:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        out[pid] = (cmd, (int(stat[11]) + int(stat[12])) / _TICK)
    return out


class CpuMeter:
    """CPU seconds of the broker, the JVMs (driver, executors, cluster daemons), the Python
    workers and the benchmark's driver processes while it runs: every process below this
    one is sampled every 0.1 s, so processes that start and exit meanwhile count too (up
    to their last sample)."""

    def __init__(self, broker_pid: int | None) -> None:
        import threading

        self.broker_pid = broker_pid
        self.base = {pid: cpu for pid, (_, cpu) in _processes().items()}
        self.last: dict[int, tuple[str, float]] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            self.last.update(_processes())
            if self.done.wait(0.1):
                self.last.update(_processes())
                return

    def stop(self) -> dict[str, float]:
        self.done.set()
        self.thread.join()
        out = {"broker": 0.0, "jvm": 0.0, "python": 0.0, "driver": 0.0, "new python": 0.0}
        for pid, (cmd, cpu) in self.last.items():
            if pid == self.broker_pid:
                group = "broker"
            elif cmd.split(" ", 1)[0].endswith("java"):
                group = "jvm"
            elif "pyspark" in cmd:
                group = "python"
            else:
                group = "driver"
            out[group] += cpu - self.base.get(pid, 0.0)
            if group == "python" and pid not in self.base:
                out["new python"] += 1
        return out


# ---- one side: a SparkSession running the jobs ----------------------------------------------

def write(spark: Any, bootstrap: str | None, topic: str, n: int, partitions: int) -> float:
    """``spark.range(n)`` as 100-byte values into ``topic`` (no ``bootstrap``: into the
    benchmark's sink that drops them)."""
    df = spark.range(n).selectExpr(
        f"cast(id % {partitions} as int) as partition",
        "cast(lpad(cast(id as string), 100, 'x') as binary) as value")
    writer = df.write.format("samsa" if bootstrap else "samsa_bench_memory").mode("append")
    start = time.perf_counter()
    writer.option("bootstrap.servers", bootstrap or "").option("topic", topic).save()
    return n / (time.perf_counter() - start)


def to_parquet(spark: Any, df: Any, n: int, out: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    df.write.parquet(out)
    elapsed = time.perf_counter() - start
    count = spark.read.parquet(out).count()
    assert count == n, f"wrote {count} records, expected {n}"
    return n / elapsed


def source(spark: Any, bootstrap: str, topic: str, arrow: bool = True) -> Any:
    return (spark.read.format("samsa").option("bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("arrowBatches", str(arrow).lower()).load())


class Side:
    """One SparkSession and the jobs of the benchmark (``op`` names a method)."""

    def __init__(self, master: str, conf: dict[str, str], tmp: str) -> None:
        from samsa.spark import session

        self.spark = session("samsa-bench", master, **SESSION_CONF, **conf)
        self.spark.sparkContext.setLogLevel("ERROR")
        self.spark.dataSource.register(MemorySource)
        self.tmp = tempfile.mkdtemp(dir=tmp)
        self.out = os.path.join(self.tmp, "out")
        self.spark.range(10).collect()  # JVM warm-up

    def stop(self) -> None:
        self.spark.stop()

    def samsa_file(self) -> str:
        import samsa

        return str(samsa.__file__)

    def write(self, bootstrap: str, topic: str, n: int, partitions: int) -> float:
        return write(self.spark, bootstrap, topic, n, partitions)

    def sink(self, n: int, partitions: int) -> float:
        return write(self.spark, None, "", n, partitions)

    def read(self, bootstrap: str, topic: str, n: int, arrow: bool = True) -> float:
        return to_parquet(self.spark, source(self.spark, bootstrap, topic, arrow), n, self.out)

    def memory(self, topic: str, n: int, partitions: int, batch_records: int) -> float:
        df = (self.spark.read.format("samsa_bench_memory").option("topic", topic)
              .option("partitions", partitions).option("records", n)
              .option("batchRecords", batch_records).load())
        return to_parquet(self.spark, df, n, self.out)

    def parquet(self, src: str, n: int) -> float:
        return to_parquet(self.spark, self.spark.read.parquet(src), n, self.out)

    def copy_parquet(self, bootstrap: str, topic: str, n: int, dest: str) -> float:
        return to_parquet(self.spark, source(self.spark, bootstrap, topic), n, dest)


class Remote:
    """A :class:`Side` in a driver process of its own, with ``checkout``'s samsa first on
    ``PYTHONPATH`` (for the driver, its Python workers and executors)."""

    def __init__(self, checkout: str, master: str, conf: dict[str, str], tmp: str) -> None:
        path = os.pathsep.join([str(Path(checkout).resolve() / "src"), str(ROOT)])
        conf = {**conf, "spark.executorEnv.PYTHONPATH": path}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--runner", json.dumps([master, conf, tmp])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"})
        self.call("samsa_file")  # started

    def call(self, op: str, *args: Any, **kw: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([op, args, kw]) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(MARK):
                ok, value = json.loads(line[len(MARK):])
                if not ok:
                    raise RuntimeError(f"runner failed in {op}: {value}")
                return value
        raise RuntimeError(f"runner exited during {op}")

    def __getattr__(self, op: str) -> Any:
        return lambda *args, **kw: self.call(op, *args, **kw)

    def stop(self) -> None:
        try:
            self.call("stop")
        finally:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(60)


def runner(spec: str) -> None:
    """``--runner``: a :class:`Side` answering JSON calls on stdin (see :class:`Remote`)."""
    import traceback

    master, conf, tmp = json.loads(spec)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from benchmarks.spark import Side as SideByRef  # MemorySource pickled by reference

    side = SideByRef(master, conf, tmp)
    for line in sys.stdin:
        op, args, kw = json.loads(line)
        try:
            answer = [True, getattr(side, op)(*args, **kw)]
        except Exception:
            answer = [False, traceback.format_exc()]
        print(MARK + json.dumps(answer), flush=True)
        if op == "stop":
            return


# ---- the benchmark --------------------------------------------------------------------------

class Rows:
    """Records/s and CPU split of every run (one per round), per row."""

    def __init__(self, broker_pid: int | None, n: int) -> None:
        self.broker_pid, self.n = broker_pid, n
        self.best: dict[str, float] = {}
        self.rates: dict[str, list[float]] = {}
        self.cpu: dict[str, list[dict[str, float]]] = {}

    def run(self, row: str, fn: Any, *args: Any, **kw: Any) -> None:
        meter = CpuMeter(self.broker_pid)
        rate = fn(*args, **kw)
        used = meter.stop()
        self.best[row] = max(self.best.get(row, 0.0), rate)
        self.rates.setdefault(row, []).append(rate)
        self.cpu.setdefault(row, []).append(used)
        per = 1e6 / self.n
        print(f"    {row:<16}{rate:>12,.0f} records/s   CPU s per 1M: broker "
              f"{used['broker'] * per:.2f}, JVM {used['jvm'] * per:.2f}, Python "
              f"{used['python'] * per:.2f}, driver {used['driver'] * per:.2f}; "
              f"{used['new python']:.0f} new Python workers", flush=True)

    def median_cpu(self, row: str, group: str) -> float:
        """Median CPU seconds per 1M records of ``group`` over the row's runs (a run that
        had to start Python workers, whose imports cost ~0.5 s each, is an outlier)."""
        return _median([u[group] for u in self.cpu[row]]) * 1e6 / self.n

    def ratio(self, row: str, other: str) -> float:
        """Median over the rounds of ``row``'s records/s over ``other``'s in that round:
        runs of one round are minutes apart, while the machine's load drifts more."""
        return _median([a / b for a, b in zip(self.rates[row], self.rates[other],
                                               strict=True)])


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


ROWS = [("writer", "writer   (Spark -> samsa)"),
        ("writer main", "writer   (Spark -> samsa), main"),
        ("sink", "ceiling  (Spark -> Python sink)"),
        ("arrow", "reader   (samsa -> Parquet), Arrow"),
        ("arrow main", "reader   (samsa -> Parquet), Arrow, main"),
        ("tuples", "reader   (samsa -> Parquet), tuples"),
        ("memory", "ceiling  (Python source -> Parquet)"),
        ("parquet", "ceiling  (Parquet -> Parquet)")]


def report(title: str, rows: Rows) -> None:
    """Best records/s; the median per-round ratio to the Python data-source ceiling (the
    memory source for readers, the dropping sink for writers) and to Parquet -> Parquet;
    the median CPU split."""
    print(title)
    print(f"  {'':<42}{'records/s':>10} {'/Python':>7} {'/Parquet':>8}   median CPU s per 1M: "
          f"{'broker':>6} {'JVM':>5} {'Python':>6} {'driver':>6} {'total':>5}")
    for key, name in ROWS:
        if key not in rows.best:
            continue
        python = "sink" if key.startswith(("writer", "sink")) else "memory"
        split = [rows.median_cpu(key, k) for k in ("broker", "jvm", "python", "driver")]
        b, j, p, d = split
        print(f"  {name:<42}{rows.best[key]:>10,.0f} {rows.ratio(key, python):>7.2f} "
              f"{rows.ratio(key, 'parquet'):>8.2f}   {'':>21}{b:6.2f} {j:5.2f} {p:6.2f} "
              f"{d:6.2f} {sum(split):5.2f}")

    def total(key: str) -> float:
        return sum(rows.median_cpu(key, k) for k in ("broker", "jvm", "python", "driver"))

    print(f"  CPU per record: reader {total('arrow') / total('memory'):.2f}x the Python "
          f"source's, writer {total('writer') / total('sink'):.2f}x the Python sink's")
    if "arrow main" in rows.best:
        def vs(key: str) -> str:
            cpu = rows.median_cpu(key, "python") / rows.median_cpu(f"{key} main", "python")
            return (f"{rows.ratio(key, f'{key} main'):.2f}x records/s, {cpu:.2f}x Python "
                    f"CPU, {total(key) / total(f'{key} main'):.2f}x CPU")

        print(f"  after/before (main): reader {vs('arrow')}; writer {vs('writer')}")


def measure(sides: dict[str, Any], bootstrap: str, broker_pid: int | None, n: int,
            partitions: int, repeat: int, tmp: str, label: str) -> Rows:
    """Writers, readers and both ceilings, interleaved round by round; best of ``repeat``."""
    from samsa import Admin

    topic = f"spark-bench-{label}-{int(time.time())}"
    topics = [f"{topic}-w{i}-{s}" for i in range(repeat) for s in sides]
    with Admin(bootstrap) as admin:
        admin.create_topics({t: partitions for t in [topic, f"{topic}-warmup", *topics]})
    main = sides["after"]
    src = os.path.join(tmp, f"src-{label}")
    # Warm the write and read paths (Python workers, imports, JIT, the Parquet writer).
    for side in sides.values():
        side.write(bootstrap, f"{topic}-warmup", 20_000, partitions)
    main.write(bootstrap, topic, n, partitions)
    main.copy_parquet(bootstrap, topic, n, src)  # the Parquet ceiling's input
    batch_records = 16384  # the reader's Arrow batches (its option arrowBatchRecords)
    for side in sides.values():  # every side runs every job once: a warm JIT
        side.read(bootstrap, topic, n)
        side.memory(topic, n, partitions, batch_records)
        side.parquet(src, n)
        side.sink(n, partitions)
    rows = Rows(broker_pid, n)
    for i in range(repeat):  # interleaved: the machine's load drifts
        print(f"  round {i + 1}", flush=True)
        order = list(sides.items())
        for name, side in order[i % 2:] + order[: i % 2]:  # who goes first alternates
            suffix = "" if name == "after" else " main"
            rows.run("writer" + suffix, side.write, bootstrap, f"{topic}-w{i}-{name}", n,
                     partitions)
            rows.run("arrow" + suffix, side.read, bootstrap, topic, n)
        rows.run("sink", main.sink, n, partitions)
        rows.run("memory", main.memory, topic, n, partitions, batch_records)
        rows.run("parquet", main.parquet, src, n)
        rows.run("tuples", main.read, bootstrap, topic, n, False)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    ap.add_argument("--repeat", type=int, default=2, help="rounds (best counts)")
    ap.add_argument("--before", metavar="DIR",
                    help="also run this checkout's writer and reader (e.g. main's worktree)")
    ap.add_argument("--no-cluster", dest="cluster", action="store_false",
                    help="skip the standalone-cluster rows")
    ap.add_argument("--runner", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.runner:
        runner(args.runner)
        return

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind Spark to loopback only
    tmp = tempfile.mkdtemp(prefix="samsa-spark-bench-")
    proc = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        proc, bootstrap = start_broker(os.path.join(tmp, "data"))
    broker_pid = proc.pid if proc is not None else None
    n = args.records
    load = os.getloadavg()
    print(f"{n:,} records of 100 B, {args.partitions} partitions, best of {args.repeat}; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)

    def sides(master: str, conf: dict[str, str]) -> dict[str, Any]:
        # Each side is a driver process of its own (the same setup for both).
        out: dict[str, Any] = {"after": Remote(str(ROOT), master, conf, tmp)}
        if args.before:
            out["before"] = Remote(args.before, master, conf, tmp)
            print(f"  main's samsa: {out['before'].samsa_file()}", flush=True)
        return out

    try:
        print(args.master, flush=True)
        local = sides(args.master, {})
        try:
            rows = measure(local, bootstrap, broker_pid, n, args.partitions, args.repeat, tmp,
                           "local")
        finally:
            for side in local.values():
                side.stop()
        report(args.master, rows)
        results = [rows]
        if args.cluster:
            from tests.spark.standalone import StandaloneCluster

            workers = 4 if args.before else 2  # each application takes two 1-core workers
            with StandaloneCluster(Path(tmp) / "cluster", workers=workers) as cluster:
                print("standalone cluster", flush=True)
                conf = {**cluster.app_conf(), "spark.cores.max": "2"}
                remote = sides(cluster.master_url, conf)
                try:
                    rows = measure(remote, bootstrap, broker_pid, n, args.partitions,
                                   args.repeat, tmp, "cluster")
                finally:
                    for side in remote.values():
                        side.stop()
            report("standalone cluster, 2 workers x 1 core (per application)", rows)
            results.append(rows)
        arrow = results[0].best["arrow"]
        print(f"target {TARGET:,} records/s read into Parquet on {args.master}: "
              f"{'met' if arrow >= TARGET else 'NOT met'} ({arrow:,.0f}); "
              f"reader / Python-source ceiling {results[0].ratio('arrow', 'memory'):.2f} "
              f"(target 0.8); load average now {os.getloadavg()[0]:.1f}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def start_broker(data_dir: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli.main", "serve", "--listen", "127.0.0.1:0",
         "--data-dir", data_dir], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"samsa listening on ([\d.]+):(\d+)", line)
        if m:
            return proc, f"{m.group(1)}:{m.group(2)}"
    raise RuntimeError("broker did not start")


if __name__ == "__main__":
    main()
