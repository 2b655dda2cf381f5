"""The query of ``test_node_kill.py``, and its driver when it runs on the standalone cluster
(a process has one Spark context, and the test suite's is local[2]).

``start_query`` reads the topic with ``availableNow`` into Parquet under ``<work>/out``
through a pandas UDF that leaves a marker ``<partition>-<attempt>`` in ``<work>/markers``
and waits while ``<work>/hold`` exists. As a script it runs that query, then, once
``<work>/again`` appears, a second run from the same checkpoint; it exits non-zero when a
query fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

TOPIC = "clicks"
MAX_RECORDS_PER_BATCH = "100"  # the UDF sees rows 100 at a time: it holds a task early


def start_query(spark: Any, bootstrap: str, work: Path) -> Any:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    markers, hold = str(work / "markers"), str(work / "hold")

    @F.pandas_udf("binary")  # type: ignore[call-overload]
    def gate(values: pd.Series, partitions: pd.Series) -> pd.Series:
        """Leave ``<partition>-<attempt>``; wait while the hold file exists."""
        ctx = TaskContext.get()
        assert ctx is not None
        Path(markers, f"{int(partitions.iloc[0])}-{ctx.attemptNumber()}").touch()
        deadline = time.monotonic() + 120
        while os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
        return values

    df = (spark.readStream.format("samsa").option("bootstrap.servers", bootstrap)
          .option("subscribe", TOPIC).option("startingOffsets", "earliest")
          .option("fetch.max.bytes", "16384").load())
    return (df.select("topic", "partition", "offset", gate("value", "partition").alias("value"))
            .writeStream.format("parquet").option("path", str(work / "out"))
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True).start())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--conf", action="append", default=[], help="a Spark setting, key=value")
    a = ap.parse_args()

    from samsa.spark import session

    conf = dict(item.split("=", 1) for item in a.conf)
    spark = session("samsa-node-kill", a.master, **{
        "spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": MAX_RECORDS_PER_BATCH, **conf})
    spark.sparkContext.setLogLevel("WARN")
    for run in (1, 2):
        if run == 2:
            deadline = time.monotonic() + 180
            while not (a.work / "again").exists():
                if time.monotonic() > deadline:
                    sys.exit("no 'again' file")
                time.sleep(0.1)
        q = start_query(spark, a.bootstrap, a.work)
        q.awaitTermination()
        if q.exception() is not None:
            sys.exit(f"run {run} failed: {q.exception()}")
        print(f"run {run} done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
