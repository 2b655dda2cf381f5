"""Binary form of history records in ``__consumer_offsets``, Kafka's way.

The key is non-flexible like every ``__consumer_offsets`` key: int16 version
:data:`HISTORY_KEY_VERSION` (the record type), the group (int16-length string), the slot
(int32). Kafka's coordinator loader logs and skips a record type it does not know, and its
console formatters skip it, so these records do not disturb Kafka tools; samsa's loader
reads them. The type is far from Kafka's own (0 to 24 in Kafka 4.x).

The value: int16 version 0, then seq int64, group type, cause (its name), at int64, member
id (nullable), reason (nullable), members [string], epoch before and after int32, phases
[{name, at int64, held by [string], note}], outcome, member count int32, detail
[{key, value}]. Strings are int16-length-prefixed UTF-8 (-1 = null), arrays int32-counted,
big-endian. A reader ignores bytes after the fields it knows (later versions append).
"""

from __future__ import annotations

import struct
import sys

from samsa.coordinator.history.model import Cause, HistoryEvent, HistoryKey, Outcome, Phase

HISTORY_KEY_VERSION = 0x7A5A
HISTORY_VALUE_VERSION = 0

#: longest reason or note kept (client reasons are free text)
MAX_TEXT = 1000


class HistoryDecodeError(ValueError):
    """The bytes are not a history record."""


class _W:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def int64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        raw = v[:MAX_TEXT].encode()
        self.int16(len(raw))
        self.parts.append(raw)

    def strings(self, vs: tuple[str, ...]) -> None:
        self.int32(len(vs))
        for v in vs:
            self.string(v)


class _R:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise HistoryDecodeError("truncated history record")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(v)

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def int64(self) -> int:
        return self._take(">q")

    def nullable(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise HistoryDecodeError("truncated history record")
        raw = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise HistoryDecodeError("invalid utf-8 in a history record") from exc

    def string(self) -> str:
        return self.nullable() or ""

    def count(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.data):
            raise HistoryDecodeError(f"bad array length {n}")
        return n

    def strings(self) -> tuple[str, ...]:
        """Member ids: interned, as the same ids recur in every event of a group."""
        return tuple(sys.intern(self.string()) for _ in range(self.count()))


def encode_key(key: HistoryKey) -> bytes:
    w = _W()
    w.int16(HISTORY_KEY_VERSION)
    w.string(key.group)
    w.int32(key.slot)
    return b"".join(w.parts)


def decode_key(data: bytes) -> HistoryKey | None:
    """The key, or None when ``data`` is another record type."""
    r = _R(data)
    if r.int16() != HISTORY_KEY_VERSION:
        return None
    return HistoryKey(r.string(), r.int32())


def encode_value(e: HistoryEvent) -> bytes:
    w = _W()
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
    return b"".join(w.parts)


def decode_value(data: bytes) -> HistoryEvent:
    r = _R(data)
    version = r.int16()
    if version < 0:
        raise HistoryDecodeError(f"bad history value version {version}")
    seq, group_type, cause, at_ms = r.int64(), r.string(), Cause.of(r.string()), r.int64()
    member_id, reason, members = r.nullable(), r.nullable(), r.strings()
    member_id = None if member_id is None else sys.intern(member_id)
    before, after = r.int32(), r.int32()
    phases = tuple(Phase(sys.intern(r.string()), r.int64(), r.strings(), r.string())
                   for _ in range(r.count()))
    outcome, count = Outcome.of(r.string()), r.int32()
    detail = tuple((sys.intern(r.string()), r.string()) for _ in range(r.count()))
    return HistoryEvent(seq, sys.intern(group_type), cause, at_ms, member_id, reason, members,
                        before, after, phases, outcome, count, detail)
