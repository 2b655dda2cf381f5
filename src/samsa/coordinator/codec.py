"""The one binary writer and reader of ``__consumer_offsets`` records, for every record
family (classic and offsets :mod:`.records`, consumer :mod:`.consumer.records`, share
:mod:`.share.records`, history :mod:`.history.codec`) and for the share-partition state of
``__share_group_state`` (:mod:`samsa.share.records`): Kafka's message encodings, big-endian.

Non-flexible (record keys, classic values before v4): strings int16-length-prefixed (-1 =
null), bytes and arrays int32-length-prefixed. Flexible (consumer values, classic v4):
compact strings, bytes and arrays (unsigned varint length + 1, 0 = null) and tagged fields.
The reader's ``flexible`` picks the encoding of strings, bytes and arrays; it raises the
``error`` class it is given (each family names its own) on anything malformed.
"""

from __future__ import annotations

import struct
import uuid

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Writer:
    def __init__(self, flexible: bool = False) -> None:
        self.parts: list[bytes] = []
        self.flexible = flexible

    def int8(self, v: int) -> Writer:
        self.parts.append(_INT8.pack(v))
        return self

    def int16(self, v: int) -> Writer:
        self.parts.append(_INT16.pack(v))
        return self

    def int32(self, v: int) -> Writer:
        self.parts.append(_INT32.pack(v))
        return self

    def int64(self, v: int) -> Writer:
        self.parts.append(_INT64.pack(v))
        return self

    def uvarint(self, v: int) -> Writer:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))
        return self

    def raw(self, data: bytes) -> Writer:
        self.parts.append(bytes(data))
        return self

    def uuid(self, v: uuid.UUID) -> Writer:
        self.parts.append(v.bytes)
        return self

    def _length(self, n: int | None) -> Writer:
        """A length prefix (``None``: null)."""
        if self.flexible:
            return self.uvarint(0 if n is None else n + 1)
        return self.int32(-1 if n is None else n)

    def string(self, v: str | None) -> Writer:
        if v is None:
            return self.uvarint(0) if self.flexible else self.int16(-1)
        raw = v.encode("utf-8")
        if self.flexible:
            self.uvarint(len(raw) + 1)
        elif len(raw) > 0x7FFF:
            raise ValueError("string too long for an int16 length")
        else:
            self.int16(len(raw))
        self.parts.append(raw)
        return self

    def bytes_(self, v: bytes) -> Writer:
        self._length(len(v))
        self.parts.append(bytes(v))
        return self

    def array_len(self, n: int | None) -> Writer:
        return self._length(n)

    def strings(self, items: tuple[str, ...]) -> Writer:
        self.array_len(len(items))
        for s in items:
            self.string(s)
        return self

    def int32s(self, items: tuple[int, ...]) -> Writer:
        self.array_len(len(items))
        for v in items:
            self.int32(v)
        return self

    def tags(self, tagged: dict[int, bytes] | None = None) -> Writer:
        """Tagged fields (flexible only), ascending by tag."""
        tagged = tagged or {}
        self.uvarint(len(tagged))
        for tag in sorted(tagged):
            self.uvarint(tag).uvarint(len(tagged[tag]))
            self.parts.append(tagged[tag])
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    def __init__(self, data: bytes, error: type[ValueError] = ValueError,
                 flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.error = error
        self.flexible = flexible

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.error("truncated record")
        chunk = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return chunk

    def _fixed(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise self.error("truncated record")
        (v,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(v)

    def int8(self) -> int:
        return self._fixed(_INT8)

    def int16(self) -> int:
        return self._fixed(_INT16)

    def int32(self) -> int:
        return self._fixed(_INT32)

    def int64(self) -> int:
        return self._fixed(_INT64)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise self.error("varint too long")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def _length(self) -> int:
        """A length prefix; -1 for null."""
        return self.uvarint() - 1 if self.flexible else self.int32()

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error("invalid utf-8 string") from exc

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise self.error("null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self._length()
        if n < 0:
            raise self.error("null in non-nullable bytes")
        return self.take(n)

    def array_len(self) -> int:
        n = self._length()
        if n < 0 or n > len(self.data) - self.pos:
            raise self.error(f"bad array length {n}")
        return n

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.array_len()))

    def int32s(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(self.array_len()))

    def nullable_int32s(self) -> tuple[int, ...] | None:
        n = self._length()
        return None if n < 0 else tuple(self.int32() for _ in range(n))

    def tags(self) -> dict[int, bytes]:
        """Tagged fields (flexible only): tag -> its raw bytes."""
        tagged = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            tagged[tag] = self.take(self.uvarint())
        return tagged

    def tagged_fields(self) -> None:
        """Skip the tagged fields of a flexible struct (nothing when not flexible)."""
        if self.flexible:
            self.tags()

    def done(self) -> bool:
        return self.pos == len(self.data)
