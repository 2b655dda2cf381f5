"""Driver of the standalone-cluster isolation test, run as its own process (a process has
one Spark context, and the test suite's is local[2]): batch reads of ``--topic`` with
read_committed and with the default (read_uncommitted), printed as one JSON line of sorted
values."""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--conf", action="append", default=[], help="a Spark setting, key=value")
    a = ap.parse_args()

    from samsa.spark import session

    conf = dict(item.split("=", 1) for item in a.conf)
    spark = session("samsa-txn-test", a.master, **conf)
    spark.sparkContext.setLogLevel("WARN")
    out = {}
    for level in ("read_committed", "read_uncommitted"):
        reader = (spark.read.format("samsa").option("bootstrap.servers", a.bootstrap)
                  .option("subscribe", a.topic))
        if level == "read_committed":
            reader = reader.option("kafka.isolation.level", level)
        out[level] = sorted(r.value.decode() for r in reader.load().collect())
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
