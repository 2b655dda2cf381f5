"""Batch reader (``spark.read.format("samsa")``): ``[startingOffsets, endingOffsets)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from samsa.spark.cluster import Cluster
from samsa.spark.fetch import data_loss
from samsa.spark.options import SourceOptions
from samsa.spark.planning import OffsetRange, plan_ranges
from samsa.spark.stream import read_range

__all__ = ["SamsaBatchReader"]


class SamsaBatchReader(DataSourceReader):
    """Resolves both ends once when Spark plans the query, then reads the ranges."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        cluster = Cluster(self.opts)
        try:
            tps = cluster.partitions()
            start = cluster.resolve(self.opts.starting, tps, "startingOffsets")
            end = cluster.resolve(self.opts.ending, tps, "endingOffsets")
        finally:
            cluster.close()
        for tp in sorted(tps):
            if end[tp] < start[tp]:
                data_loss(f"{tp.topic}-{tp.partition}: ending offset {end[tp]} is before the "
                          f"starting offset {start[tp]}", self.opts.fail_on_data_loss)
        ranges: list[InputPartition] = list(plan_ranges(start, end, self.opts.min_partitions))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.opts, partition)
