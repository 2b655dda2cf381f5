"""Consumer lag over time and its verdicts (pure: samples in, series and verdicts out).

Each sample of a group's partition gives the committed offset (and when it was committed,
where the source knows it), the log's start and end offsets, the lag in seconds (the age of
the first record not yet consumed) and the phantom records in the lag (offsets the log no
longer has: removed by retention before the group read them, or by compaction).

Verdicts follow Burrow's evaluation rules over a window of the last commits of each
partition (a commit is a new commit timestamp, or a new offset where commit times are
unknown):

* lag 0 now, or at any commit of the window: OK;
* STOP: the time since the last commit exceeds the window's span (and a minimum), with lag;
* REWIND: the committed offset went back within the window;
* STALL: the committed offset did not move over a full window while there is lag;
* WARN: the offset moves but the lag never decreased over a full window;
* else OK. A group's verdict is its worst partition's.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from itertools import pairwise


class Verdict(enum.Enum):
    OK = "OK"
    WARN = "WARN"
    REWIND = "REWIND"
    STALL = "STALL"
    STOP = "STOP"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Verdict.OK: 0, Verdict.WARN: 1, Verdict.REWIND: 2, Verdict.STALL: 3, Verdict.STOP: 4}


@dataclass(frozen=True)
class Commit:
    at_ms: int
    offset: int
    lag: int


@dataclass(frozen=True)
class Point:
    at_ms: int
    lag_records: int
    lag_seconds: float | None


@dataclass
class PartitionTrack:
    """What is kept of one group's partition: the commit window and the lag series."""

    window: deque[Commit]
    series: deque[Point]
    last: LagSample | None = None


@dataclass(frozen=True)
class LagSample:
    topic: str
    partition: int
    committed: int | None
    log_start: int
    log_end: int
    #: age of the first unconsumed record (None: unknown)
    lag_seconds: float | None = None
    #: records in the offset lag that the log no longer has, and why
    phantom_records: int = 0
    phantom_cause: str | None = None
    commit_ms: int | None = None

    @property
    def lag_records(self) -> int:
        """Kafka's lag: log end offset minus committed offset (whole log without one)."""
        start = self.log_start if self.committed is None else self.committed
        return max(self.log_end - start, 0)


def evaluate(window: list[Commit], lag_now: int, now_ms: int, window_size: int,
             min_stop_ms: int) -> Verdict:
    """Burrow's rules (see the module docstring)."""
    if lag_now == 0 or not window:
        return Verdict.OK
    first, last = window[0], window[-1]
    if now_ms - last.at_ms > max(last.at_ms - first.at_ms, min_stop_ms):
        return Verdict.STOP
    if any(c.lag == 0 for c in window):
        return Verdict.OK
    if any(b.offset < a.offset for a, b in pairwise(window)):
        return Verdict.REWIND
    if len(window) < window_size:
        return Verdict.OK
    if first.offset == last.offset:
        return Verdict.STALL
    if all(b.lag >= a.lag for a, b in pairwise(window)):
        return Verdict.WARN
    return Verdict.OK


def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=lambda v: v.rank, default=Verdict.OK)


@dataclass
class LagTracker:
    """Lag series and commit windows of every group's partitions."""

    window_size: int = 10
    points: int = 720
    min_stop_ms: int = 60_000
    tracks: dict[str, dict[tuple[str, int], PartitionTrack]] = field(default_factory=dict)

    def observe(self, group_id: str, sample: LagSample, now_ms: int) -> None:
        parts = self.tracks.setdefault(group_id, {})
        key = (sample.topic, sample.partition)
        track = parts.get(key)
        if track is None:
            track = parts[key] = PartitionTrack(deque(maxlen=self.window_size),
                                                deque(maxlen=self.points))
        track.series.append(Point(now_ms, sample.lag_records, sample.lag_seconds))
        if sample.committed is not None:
            prev = track.last
            new_commit = prev is None or prev.committed is None or (
                sample.commit_ms != prev.commit_ms if sample.commit_ms is not None
                else sample.committed != prev.committed)
            if new_commit:
                at = sample.commit_ms if sample.commit_ms is not None else now_ms
                track.window.append(Commit(at, sample.committed, sample.lag_records))
        track.last = sample

    def retain(self, group_id: str, partitions: set[tuple[str, int]]) -> None:
        """Forget partitions the group no longer has offsets or owners for."""
        parts = self.tracks.get(group_id)
        if parts is not None:
            for key in [k for k in parts if k not in partitions]:
                del parts[key]

    def forget_others(self, group_ids: set[str]) -> None:
        for gid in [g for g in self.tracks if g not in group_ids]:
            del self.tracks[gid]

    def verdict(self, group_id: str, key: tuple[str, int], now_ms: int) -> Verdict:
        track = self.tracks.get(group_id, {}).get(key)
        if track is None or track.last is None:
            return Verdict.OK
        return evaluate(list(track.window), track.last.lag_records, now_ms, self.window_size,
                        self.min_stop_ms)

    def group_verdict(self, group_id: str, now_ms: int) -> Verdict:
        return worst([self.verdict(group_id, k, now_ms) for k in self.tracks.get(group_id, {})])

    def latest(self, group_id: str) -> list[LagSample]:
        return [t.last for _, t in sorted(self.tracks.get(group_id, {}).items())
                if t.last is not None]

    def series(self, group_id: str, key: tuple[str, int]) -> list[Point]:
        track = self.tracks.get(group_id, {}).get(key)
        return [] if track is None else list(track.series)
