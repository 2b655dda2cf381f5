"""``share.auto.offset.reset``: where a share partition starts the first time its group
reads it (KIP-932; ``by_duration`` from KIP-1106)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")


@dataclass(frozen=True)
class OffsetReset:
    """``latest`` (Kafka's default), ``earliest``, or ``by_duration`` (``duration_ms``)."""

    strategy: str = "latest"
    duration_ms: int = 0

    @classmethod
    def parse(cls, value: str) -> OffsetReset:
        """``latest``, ``earliest`` or ``by_duration:<ISO-8601 duration>`` (ValueError
        otherwise)."""
        text = value.strip().lower()
        if text in ("latest", "earliest"):
            return cls(text)
        if text.startswith("by_duration:"):
            match = _DURATION.match(value.strip()[len("by_duration:"):].upper())
            if match is None or match.group(0) in ("P", "PT"):
                raise ValueError(f"invalid duration in share.auto.offset.reset: {value!r}")
            d, h, m = (int(match.group(k) or 0) for k in "dhm")
            s = float(match.group("s") or 0)
            return cls("by_duration", ((d * 24 + h) * 60 + m) * 60_000 + int(s * 1000))
        raise ValueError(f"invalid share.auto.offset.reset: {value!r}")

    def start_offset(self, log_start: int, log_end: int, now_ms: int,
                     offset_for_time: Callable[[int], int | None]) -> int:
        """The first offset to share: ``offset_for_time(ts)`` answers the first offset with
        a timestamp at or after ``ts`` (None past the end)."""
        if self.strategy == "earliest":
            return log_start
        if self.strategy == "by_duration":
            found = offset_for_time(now_ms - self.duration_ms)
            return log_end if found is None else max(found, log_start)
        return log_end
