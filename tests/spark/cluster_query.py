"""Driver of the standalone-cluster test, run as its own process (a process has one Spark
context, and the test suite's is local[2]).

A streaming query from a samsa topic to Parquet with ``Trigger.AvailableNow``. A pandas UDF
passes ``value`` through; with ``--sleep`` it waits that long per Arrow batch, so a test can
act in the middle of a micro-batch, and it leaves a marker file
``<stage>-<partition>-<attempt>`` per call in ``--markers`` (an attempt > 0 is a retry).
With ``--restart-file``, the query is stopped as soon as that file appears (in the middle of
a micro-batch) and started again from its checkpoint, without the sleep.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pandas as pd

STREAM_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false",
               "spark.task.maxFailures": "4"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--markers", required=True)
    ap.add_argument("--group")
    ap.add_argument("--max-per-trigger", type=int)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--restart-file", type=Path)
    ap.add_argument("--conf", action="append", default=[], help="a Spark setting, key=value")
    a = ap.parse_args()

    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from samsa.spark import session

    conf = dict(item.split("=", 1) for item in a.conf)
    spark = session("samsa-cluster-test", a.master, **{**STREAM_CONF, **conf})
    spark.sparkContext.setLogLevel("WARN")
    markers = a.markers

    def start(delay: float) -> Any:
        @F.pandas_udf("binary")  # type: ignore[call-overload]
        def passthrough(values: pd.Series) -> pd.Series:
            ctx = TaskContext.get()
            assert ctx is not None
            Path(markers, f"{ctx.stageId()}-{ctx.partitionId()}-{ctx.attemptNumber()}").touch()
            time.sleep(delay)
            return values

        reader = (spark.readStream.format("samsa").option("bootstrap.servers", a.bootstrap)
                  .option("subscribe", a.topic).option("startingOffsets", "earliest"))
        if a.group:
            reader = reader.option("groupId", a.group)
        if a.max_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(a.max_per_trigger))
        return (reader.load()
                .select("key", passthrough("value").alias("value"), "partition", "offset")
                .writeStream.format("parquet").option("path", a.out)
                .option("checkpointLocation", a.checkpoint).trigger(availableNow=True).start())

    q = start(a.sleep)
    if a.restart_file:
        while q.isActive and not a.restart_file.exists():
            time.sleep(0.05)
        if not q.isActive:
            raise SystemExit(f"the query ended before the restart: {q.exception()}")
        q.stop()
        print("restarting the query from its checkpoint", flush=True)
        q = start(0.0)
    q.awaitTermination()
    if q.exception() is not None:
        raise SystemExit(f"query failed: {q.exception()}")
    spark.stop()


if __name__ == "__main__":
    main()
