"""The ``samsa`` PySpark data source: readers and writers for Kafka-protocol topics."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from samsa.spark.arrow import spark_schema_ddl
from samsa.spark.options import SinkOptions, SourceOptions

__all__ = ["SamsaDataSource"]


class SamsaDataSource(DataSource):
    """``format("samsa")``: see ``docs/spark.md`` for the options."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> str:
        headers = str(self.options.get("includeheaders", "false")).strip().lower() == "true"
        return spark_schema_ddl(headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        from samsa.spark.batch import SamsaBatchReader

        return SamsaBatchReader(SourceOptions.parse(self.options, batch=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from samsa.spark.stream import SamsaStreamReader

        return SamsaStreamReader(SourceOptions.parse(self.options, batch=False))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from samsa.spark.writer import SamsaBatchWriter

        return SamsaBatchWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from samsa.spark.writer import SamsaStreamWriter

        return SamsaStreamWriter(SinkOptions.parse(self.options), schema)
