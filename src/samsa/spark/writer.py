"""Writers (``df.write`` / ``df.writeStream`` ``.format("samsa")``): rows become records.

Columns as Spark's Kafka sink: ``value`` (required, binary or string), ``key``, ``topic``
(or the ``topic`` option, which wins), ``partition`` (int; otherwise the key's hash, or
sticky when there is no key) and ``headers`` (``array<struct<key string, value binary>>``).
Other columns are ignored. Each task has its own idempotent producer (acks=all, see
:mod:`samsa.spark.produce`) and fails if any record is not acknowledged; Spark retries failed
tasks, so delivery is at-least-once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from samsa.spark.options import OptionError, SinkOptions, client_settings
from samsa.spark.produce import BulkProducer
from samsa.spark.worker import freeze_imports

__all__ = ["SamsaBatchWriter", "SamsaStreamWriter", "WriteResult", "validate_sink_schema"]

log = logging.getLogger(__name__)


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote."""

    records: int


def _is(dt: DataType, *types: type) -> bool:
    return isinstance(dt, types)


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Fail early, on the driver, with a clear message about a bad input schema."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError(f"the samsa sink needs a 'value' column; columns: {list(fields)}")
    for name in ("key", "value"):
        if name in fields and not _is(fields[name], BinaryType, StringType):
            raise OptionError(f"column {name!r} must be binary or string, not "
                              f"{fields[name].simpleString()}")
    if opts.topic is None:
        if "topic" not in fields:
            raise OptionError("no topic: give the 'topic' option or a 'topic' column")
        if not _is(fields["topic"], StringType):
            raise OptionError("column 'topic' must be a string")
    if "partition" in fields and not _is(fields["partition"], IntegerType):
        raise OptionError("column 'partition' must be an int, not "
                          f"{fields['partition'].simpleString()}")
    if "headers" in fields:
        dt = fields["headers"]
        ok = isinstance(dt, ArrayType) and isinstance(dt.elementType, StructType) and [
            (f.name, type(f.dataType)) for f in dt.elementType.fields] in (
                [("key", StringType), ("value", BinaryType)],
                [("key", StringType), ("value", StringType)])
        if not ok:
            raise OptionError("column 'headers' must be array<struct<key: string, value: "
                              f"binary>>, not {dt.simpleString()}")


def write_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """Send every row with one idempotent producer; raise unless all were acknowledged."""
    freeze_imports()
    with BulkProducer(opts.bootstrap, batch_size=opts.batch_size,
                      compression=opts.compression,
                      security=client_settings(opts.security)) as producer:
        for batch in batches:
            if opts.topic:
                _send(producer, opts.topic, batch)
                continue
            topics = batch.column("topic")
            if topics.null_count:
                raise ValueError("samsa sink: a row has a null topic and no topic option")
            for topic in pc.unique(topics).to_pylist():
                _send(producer, topic, batch.filter(pc.equal(topics, topic)))
        producer.flush()
        return WriteResult(producer.records_sent)


def _send(producer: BulkProducer, topic: str, batch: pa.RecordBatch) -> None:
    def column(name: str) -> pa.Array | None:
        i = batch.schema.get_field_index(name)
        return None if i < 0 else batch.column(i)

    values = column("value")
    assert values is not None
    producer.send_columns(topic, column("key"), values, column("partition"), column("headers"))


class SamsaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("samsa")``."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("samsa sink: wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.warning("samsa sink: job aborted; %d records were already written "
                    "(at-least-once)", total)


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("samsa")``: at-least-once per micro-batch."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("samsa sink: micro-batch %d wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.warning("samsa sink: micro-batch %d aborted; %d records were already written "
                    "and will be written again when it is retried (at-least-once)",
                    batchId, total)
