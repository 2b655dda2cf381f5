"""Binary form of history records in ``__consumer_offsets``, Kafka's way.

The key is non-flexible like every ``__consumer_offsets`` key: int16 version
:data:`HISTORY_KEY_VERSION` (the record type), the group (int16-length string), the slot
(int32). Kafka's coordinator loader logs and skips a record type it does not know, and its
console formatters skip it, so these records do not disturb Kafka tools; samsa's loader
reads them. The type is far from Kafka's own (0 to 24 in Kafka 4.x).

The value: int16 version 0, then seq int64, group type, cause (its name), at int64, member
id (nullable), reason (nullable), members [string], epoch before and after int32, phases
[{name, at int64, held by [string], note}], outcome, member count int32, detail
[{key, value}], in the non-flexible encoding of :mod:`samsa.coordinator.codec`. A reader
ignores bytes after the fields it knows (later versions append).
"""

from __future__ import annotations

import sys

from samsa.coordinator.codec import Reader, Writer
from samsa.coordinator.history.model import Cause, HistoryEvent, HistoryKey, Outcome, Phase

HISTORY_KEY_VERSION = 0x7A5A
HISTORY_VALUE_VERSION = 0

#: longest reason or note kept (client reasons are free text)
MAX_TEXT = 1000


class HistoryDecodeError(ValueError):
    """The bytes are not a history record."""


class _Writer(Writer):
    """Texts are cut to :data:`MAX_TEXT` characters."""

    def string(self, v: str | None) -> Writer:
        return super().string(None if v is None else v[:MAX_TEXT])


def _reader(data: bytes) -> Reader:
    return Reader(data, HistoryDecodeError)


def _text(r: Reader) -> str:
    """A string; null reads as ""."""
    return r.nullable_string() or ""


def _names(r: Reader) -> tuple[str, ...]:
    """Member ids: interned, as the same ids recur in every event of a group."""
    return tuple(sys.intern(_text(r)) for _ in range(r.array_len()))


def encode_key(key: HistoryKey) -> bytes:
    w = _Writer()
    w.int16(HISTORY_KEY_VERSION)
    w.string(key.group)
    w.int32(key.slot)
    return w.done()


def decode_key(data: bytes) -> HistoryKey | None:
    """The key, or None when ``data`` is another record type."""
    r = _reader(data)
    if r.int16() != HISTORY_KEY_VERSION:
        return None
    return HistoryKey(_text(r), r.int32())


def encode_value(e: HistoryEvent) -> bytes:
    w = _Writer()
    w.int16(HISTORY_VALUE_VERSION)
    w.int64(e.seq)
    w.string(e.group_type)
    w.string(e.cause.value)
    w.int64(e.at_ms)
    w.string(e.member_id)
    w.string(e.reason)
    w.strings(e.members)
    w.int32(e.epoch_before)
    w.int32(e.epoch_after)
    w.int32(len(e.phases))
    for p in e.phases:
        w.string(p.name)
        w.int64(p.at_ms)
        w.strings(p.held_by)
        w.string(p.note)
    w.string(e.outcome.value)
    w.int32(e.member_count)
    w.int32(len(e.detail))
    for k, v in e.detail:
        w.string(k)
        w.string(v)
    return w.done()


def decode_value(data: bytes) -> HistoryEvent:
    r = _reader(data)
    version = r.int16()
    if version < 0:
        raise HistoryDecodeError(f"bad history value version {version}")
    seq, group_type, cause, at_ms = r.int64(), _text(r), Cause.of(_text(r)), r.int64()
    member_id, reason, members = r.nullable_string(), r.nullable_string(), _names(r)
    member_id = None if member_id is None else sys.intern(member_id)
    before, after = r.int32(), r.int32()
    phases = tuple(Phase(sys.intern(_text(r)), r.int64(), _names(r), _text(r))
                   for _ in range(r.array_len()))
    outcome, count = Outcome.of(_text(r)), r.int32()
    detail = tuple((sys.intern(_text(r)), _text(r)) for _ in range(r.array_len()))
    return HistoryEvent(seq, sys.intern(group_type), cause, at_ms, member_id, reason, members,
                        before, after, phases, outcome, count, detail)
