"""The Spark Structured Streaming job: per-minute click counts per page.

Reads the click topic with the ``samsa`` source, parses the JSON events, and counts clicks
per page in one-minute event-time windows with a 2-minute watermark. A window's count is
final once the watermark passes its end; it is then written (append mode) to

* Parquet under ``out`` (Spark's file sink: exactly-once through its checkpoint), and
* the results topic as JSON keyed by ``page|minute`` (at-least-once; the key makes a
  replayed result recognizable).

Each sink is a streaming query with its own checkpoint under ``checkpoints``; a restarted
job continues from the checkpoints. The Parquet query's source commits its progress under
the consumer group ``clickstream``, so ``samsa groups describe clickstream`` shows the
pipeline's lag.

    python -m examples.clickstream.pipeline --bootstrap 127.0.0.1:9092 --out ./clicks-out
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

WATERMARK = "2 minutes"
GROUP = "clickstream"


def counts(spark: Any, bootstrap: str, topic: str, group: str | None = None,
           max_per_trigger: int | None = None) -> Any:
    """The windowed per-page counts (a streaming DataFrame); ``group`` commits progress."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("samsa").option("bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if group:
        reader = reader.option("groupId", group)
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    events = (reader.load()
              .select(F.from_json(F.col("value").cast("string"),
                                  "user string, page string, ts timestamp").alias("e"))
              .select("e.*"))
    return (events.withWatermark("ts", WATERMARK)
            .groupBy(F.window("ts", "1 minute"), "page").count()
            .select(F.col("window.start").alias("minute"), "page", "count"))


def start(spark: Any, bootstrap: str, topic: str, results_topic: str, out: Path,
          checkpoints: Path, trigger: str = "2 seconds") -> list[Any]:
    """Start both sinks' queries; returns them."""
    from pyspark.sql import functions as F

    df = counts(spark, bootstrap, topic, GROUP)
    to_parquet = (df.writeStream.format("parquet").outputMode("append")
                  .option("path", str(out))
                  .option("checkpointLocation", str(checkpoints / "parquet"))
                  .trigger(processingTime=trigger).queryName("clicks_to_parquet").start())
    results = counts(spark, bootstrap, topic).select(
        F.concat_ws("|", "page", F.date_format("minute", "yyyy-MM-dd'T'HH:mm")).alias("key"),
        F.to_json(F.struct("minute", "page", "count")).alias("value"))
    to_topic = (results.writeStream.format("samsa").outputMode("append")
                .option("bootstrap.servers", bootstrap).option("topic", results_topic)
                .option("checkpointLocation", str(checkpoints / "topic"))
                .trigger(processingTime=trigger).queryName("clicks_to_topic").start())
    return [to_parquet, to_topic]


def stop_gracefully(queries: list[Any], timeout: float = 60) -> None:
    """Let running micro-batches finish (no half-written batch to replay), then stop."""
    deadline = time.monotonic() + timeout
    for q in queries:
        while q.isActive and q.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.1)
        q.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="per-minute page counts from click events")
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="clicks")
    ap.add_argument("--results-topic", default="page-counts")
    ap.add_argument("--out", type=Path, default=Path("clickstream-out/parquet"))
    ap.add_argument("--checkpoints", type=Path, default=Path("clickstream-out/checkpoints"))
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()

    from samsa.spark import session

    spark = session("clickstream", a.master, **{"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("WARN")
    queries = start(spark, a.bootstrap, a.topic, a.results_topic, a.out, a.checkpoints)
    print("running; Ctrl-C stops after the current micro-batch")
    try:
        while all(q.isActive for q in queries):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    stop_gracefully(queries)
    spark.stop()
