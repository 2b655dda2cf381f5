"""Spark connector throughput: samsa topic -> Spark -> Parquet, and Spark -> samsa topic.

1. The writer: ``spark.range(N)`` as 100-byte values (explicit partitions) written to an
   8-partition topic with ``df.write.format("samsa")``; prints records/s.
2. The reader: that topic read with ``spark.read.format("samsa")`` and written to Parquet,
   once with Arrow batches (the default) and once with row tuples (``arrowBatches=false``),
   in the same run; prints records/s and the ratio.

Run (starts its own broker on 127.0.0.1, data in a temporary directory)::

    .venv/bin/python benchmarks/spark.py                    # 1,000,000 records, local[2]
    .venv/bin/python benchmarks/spark.py --records 200000 --master 'local[4]'

Target: >= 300,000 records/s read into Parquet on local[2].
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

TARGET = 300_000


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


def write(spark: Any, bootstrap: str, topic: str, n: int, partitions: int) -> float:
    df = spark.range(n).selectExpr(
        f"cast(id % {partitions} as int) as partition",
        "cast(lpad(cast(id as string), 100, 'x') as binary) as value")
    start = time.perf_counter()
    (df.write.format("samsa").mode("append").option("bootstrap.servers", bootstrap)
     .option("topic", topic).save())
    return n / (time.perf_counter() - start)


def read_to_parquet(spark: Any, bootstrap: str, topic: str, n: int, out: str,
                    arrow: bool) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    (spark.read.format("samsa").option("bootstrap.servers", bootstrap)
     .option("subscribe", topic).option("arrowBatches", str(arrow).lower()).load()
     .write.parquet(out))
    elapsed = time.perf_counter() - start
    count = spark.read.parquet(out).count()
    assert count == n, f"read {count} records, expected {n}"
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    ap.add_argument("--repeat", type=int, default=2, help="runs per read mode (best counts)")
    args = ap.parse_args()

    from samsa import Admin
    from samsa.spark import session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind Spark to loopback only

    tmp = tempfile.mkdtemp(prefix="samsa-spark-bench-")
    proc = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        proc, bootstrap = start_broker(os.path.join(tmp, "data"))
    try:
        topic = f"spark-bench-{int(time.time())}"
        with Admin(bootstrap) as admin:
            admin.create_topics({topic: args.partitions})
        spark = session("samsa-bench", args.master, **{
            "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g",
            "spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        spark.range(10).collect()  # JVM warm-up

        # Warm the write path (Python workers, imports, JIT) on a scratch topic.
        with Admin(bootstrap) as admin:
            admin.create_topics({f"{topic}-warmup": args.partitions})
        write(spark, bootstrap, f"{topic}-warmup", 20_000, args.partitions)
        n = args.records
        print(f"{n:,} records of 100 B, {args.partitions} partitions, {args.master}, "
              f"reads best of {args.repeat}")
        w = write(spark, bootstrap, topic, n, args.partitions)
        print(f"writer  (Spark -> samsa)            {w:>12,.0f} records/s")
        out = os.path.join(tmp, "parquet")
        # Warm the read path (Python workers, imports, the JVM's Parquet writer).
        (spark.read.format("samsa").option("bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("endingOffsets", json.dumps(
             {topic: {str(p): 1000 for p in range(args.partitions)}})).load()
         .write.mode("overwrite").parquet(out))
        arrow = rows = 0.0
        for _ in range(args.repeat):  # best of N, modes interleaved (shared machines)
            arrow = max(arrow, read_to_parquet(spark, bootstrap, topic, n, out, arrow=True))
            rows = max(rows, read_to_parquet(spark, bootstrap, topic, n, out, arrow=False))
        print(f"reader  (samsa -> Parquet), Arrow   {arrow:>12,.0f} records/s")
        print(f"reader  (samsa -> Parquet), tuples  {rows:>12,.0f} records/s")
        print(f"Arrow / tuples                      {arrow / rows:>12.2f}x")
        print(f"target {TARGET:,} records/s read into Parquet: "
              f"{'met' if arrow >= TARGET else 'NOT met'}")
        spark.stop()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
