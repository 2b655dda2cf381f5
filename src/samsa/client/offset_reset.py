"""Planning an offset reset of a group (``samsa groups reset-offsets`` and the console).

A :class:`ResetSpec` names where each partition goes; :func:`plan_reset` asks the cluster
(list offsets) and returns the new offset of each partition, clamped to the log's
[earliest, latest]. :func:`refusal` says why a group may not be reset now: a group with
members would overwrite the reset with its own commits, so Kafka's tool refuses, and so
does samsa.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa import TopicPartition

#: where the reset goes: the log start or end, the committed offset, an offset, the
#: committed offset shifted by ``value``, or the first offset at or after a time (ms)
MODES = ("earliest", "latest", "current", "offset", "shift", "timestamp")


class ResetError(ValueError):
    """The reset cannot be planned (a message for people)."""


@dataclass(frozen=True)
class ResetSpec:
    mode: str
    value: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ResetError(f"unknown reset mode {self.mode!r} (one of {', '.join(MODES)})")
        if self.mode in ("offset", "shift", "timestamp") and self.value is None:
            raise ResetError(f"reset mode {self.mode} needs a value")


def refusal(group_id: str, state: str, members: int) -> str | None:
    """Why ``group_id`` cannot be reset now (None: it can)."""
    if members or state not in ("Empty", "Dead"):
        return (f"cannot reset offsets of group {group_id}: it has {members} active "
                f"member(s) (state {state}); stop its consumers first")
    return None


def plan_reset(admin: Any, spec: ResetSpec, tps: Iterable[TopicPartition],
               committed: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The offset each partition is reset to (clamped to the log's range)."""
    tps = list(tps)
    if not tps:
        return {}
    earliest = {tp: o for tp, (o, _) in admin.list_offsets(dict.fromkeys(tps, "earliest")).items()}
    latest = {tp: o for tp, (o, _) in admin.list_offsets(dict.fromkeys(tps, "latest")).items()}

    def clamp(tp: TopicPartition, offset: int) -> int:
        return int(max(earliest[tp], min(latest[tp], offset)))

    if spec.mode == "earliest":
        return dict(earliest)
    if spec.mode == "latest":
        return dict(latest)
    if spec.mode == "current":
        return {tp: committed.get(tp, latest[tp]) for tp in tps}
    assert spec.value is not None
    if spec.mode == "offset":
        return {tp: clamp(tp, spec.value) for tp in tps}
    if spec.mode == "shift":
        missing = [tp for tp in tps if tp not in committed]
        if missing:
            tp = missing[0]
            raise ResetError(f"cannot shift {tp.topic}:{tp.partition}: "
                             "the group has no committed offset there")
        return {tp: clamp(tp, committed[tp] + spec.value) for tp in tps}
    found = admin.list_offsets(dict.fromkeys(tps, spec.value))
    return {tp: (found[tp][0] if found[tp][0] >= 0 else latest[tp]) for tp in tps}
