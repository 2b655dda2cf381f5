"""The append preamble every engine runs before it writes: size checks, LogAppendTime,
offsets and the idempotent-producer check (Kafka's ``LogValidator`` and
``ProducerStateManager`` steps of ``UnifiedLog.append``).

:func:`prepare` returns either an :class:`AppendInfo` for a retried idempotent batch (the
original's offsets: nothing is written) or a :class:`Prepared` append: the bytes to write,
the headers with their offsets, and the producer state to commit once written. The engine
writes, then calls :meth:`Prepared.done`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from samsa.protocol.batch import (
    BatchHeader,
    parse_header,
    patch_log_append_time,
    split_batches,
)
from samsa.protocol.records import control_type

from .config import LogConfig
from .errors import MessageTooLarge, RecordBatchTooLarge
from .producer_state import BatchMetadata, ProducerEntry, ProducerStateManager

__all__ = ["AppendInfo", "Prepared", "prepare"]


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Result of an append; for a duplicate, the offsets of the original batch."""

    base_offset: int
    last_offset: int
    log_append_time: int
    """The broker's timestamp for LogAppendTime topics, -1 for CreateTime."""
    log_start_offset: int
    duplicate: bool = False


@dataclass(slots=True)
class Prepared:
    """An append that passed every check: what to write, and what it will answer."""

    buf: bytes | bytearray
    """The batches; for LogAppendTime a patched copy (the base offsets are not patched:
    they are written from :attr:`headers`)."""
    headers: list[BatchHeader]
    """Each batch's header, its base offset assigned; ``position`` is in :attr:`buf`."""
    next_offset: int
    log_append_time: int
    staged: dict[int, ProducerEntry]

    def done(self, producers: ProducerStateManager, log_start_offset: int) -> AppendInfo:
        """Commit the producer state once the batches are written; the append's answer."""
        producers.commit(self.staged)
        for h in self.headers:
            if h.is_transactional:
                producers.track(h, control_type(self.buf, h))
        return AppendInfo(self.headers[0].base_offset, self.headers[-1].last_offset,
                          self.log_append_time, log_start_offset)


def prepare(records: bytes, headers: list[BatchHeader] | None, config: LogConfig,
            producers: ProducerStateManager, log_end_offset: int, log_start_offset: int,
            now_ms: int, *, segment_bytes: int | None = None) -> Prepared | AppendInfo:
    """Check whole v2 batches and assign their offsets from ``log_end_offset``.

    ``headers`` may be passed if the broker already ran :func:`split_batches`. Raises
    InvalidRecords, MessageTooLarge, RecordBatchTooLarge (a batch over ``segment_bytes``,
    for engines with segments), OutOfOrderSequence or InvalidProducerEpoch (each with
    ``error_code``); nothing changes until :meth:`Prepared.done`.
    """
    if headers is None:
        headers = split_batches(records)
    for h in headers:
        if h.size > config.max_message_bytes:
            raise MessageTooLarge(
                f"batch of {h.size} bytes exceeds max.message.bytes {config.max_message_bytes}")
        if segment_bytes is not None and h.size > segment_bytes:
            raise RecordBatchTooLarge(
                f"batch of {h.size} bytes exceeds segment.bytes {segment_bytes}")
    offset = log_end_offset
    assigned: list[BatchHeader] = []
    buf: bytes | bytearray
    if config.log_append_time:  # rewrites the header under the CRC: work on a copy
        buf = bytearray(records)
        for h in headers:
            patch_log_append_time(buf, h.position, now_ms)
            assigned.append(replace(parse_header(buf, h.position), base_offset=offset))
            offset += h.last_offset_delta + 1
    else:  # only baseOffset changes; it is written from the header, not the buffer
        buf = records
        for h in headers:
            assigned.append(replace(h, base_offset=offset))
            offset += h.last_offset_delta + 1
    log_append_time = now_ms if config.log_append_time else -1
    duplicate, staged = producers.check(assigned)
    if duplicate is not None:
        return duplicate_info(duplicate, config, log_start_offset)
    return Prepared(buf, assigned, offset, log_append_time, staged)


def duplicate_info(meta: BatchMetadata, config: LogConfig, log_start_offset: int) -> AppendInfo:
    """The answer to a retried batch: the original's offsets."""
    ts = meta.timestamp if config.log_append_time else -1
    return AppendInfo(meta.base_offset, meta.last_offset, ts, log_start_offset, duplicate=True)
