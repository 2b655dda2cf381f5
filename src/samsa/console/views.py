"""The JSON shapes of API v1 (docs/console.md documents them): plain dicts built from the
coordinator's read-only values and the lag tracker's samples."""

from __future__ import annotations

from typing import Any

from samsa.console.lag import LagSample, LagTracker
from samsa.coordinator.detail import GroupDetail, MemberDetail
from samsa.coordinator.history import HistoryEvent
from samsa.share.stats import SharePartitionStats

API_VERSION = 1


def event_json(e: HistoryEvent) -> dict[str, Any]:
    """One history event; each phase carries its duration from the previous one."""
    phases = []
    previous = e.at_ms
    for p in e.phases:
        phases.append({"name": p.name, "at_ms": p.at_ms, "duration_ms": max(p.at_ms - previous, 0),
                       "held_by": list(p.held_by), "note": p.note})
        previous = p.at_ms
    ended = e.ended_ms
    return {
        "seq": e.seq, "group_type": e.group_type, "cause": e.cause.value, "at_ms": e.at_ms,
        "member_id": e.member_id, "reason": e.reason, "members": list(e.members),
        "epoch_before": e.epoch_before, "epoch_after": e.epoch_after, "bump": e.bumps,
        "outcome": e.outcome.value, "member_count": e.member_count, "phases": phases,
        "ended_ms": ended, "duration_ms": None if ended is None else ended - e.at_ms,
        "detail": dict(e.detail),
    }


def _tps(pairs: tuple[tuple[str, int], ...] | None) -> list[list[Any]] | None:
    return None if pairs is None else [[t, p] for t, p in pairs]


def member_json(m: MemberDetail) -> dict[str, Any]:
    live = m.liveness
    return {
        "member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
        "client_host": m.client_host, "rack_id": m.rack_id, "protocol": m.protocol,
        "protocols": list(m.protocols), "subscribed_topics": list(m.subscribed_topics),
        "subscribed_regex": m.subscribed_regex, "member_epoch": m.member_epoch,
        "state": m.state, "is_leader": m.is_leader, "assigned": _tps(m.assigned),
        "target": _tps(m.target), "pending_revocation": _tps(m.pending_revocation),
        "liveness": {
            "since_heartbeat_ms": live.since_heartbeat_ms,
            "session_expires_in_ms": live.session_expires_in_ms,
            "session_timeout_ms": live.session_timeout_ms,
            "rebalance_deadline_in_ms": live.rebalance_deadline_in_ms,
            "rebalance_deadline_kind": live.rebalance_deadline_kind,
        },
    }


def detail_json(d: GroupDetail, coordinator: int | None) -> dict[str, Any]:
    s = d.summary
    return {
        "group_id": s.group_id, "group_type": s.group_type, "state": s.state.value,
        "protocol_type": s.protocol_type, "protocol": s.protocol, "leader": s.leader or None,
        "generation": s.generation if s.group_type == "classic" else None,
        "group_epoch": s.generation if s.group_type in ("consumer", "share") else None,
        "assignment_epoch": d.assignment_epoch,
        "coordinator": {"node_id": coordinator, "partition": s.partition},
        "subscribed_topics": list(d.subscribed_topics),
        "rebalance_deadline_in_ms": d.rebalance_deadline_in_ms,
        "rebalance_deadline_kind": d.rebalance_deadline_kind,
        "members": [member_json(m) for m in d.members],
    }


def lag_json(group_id: str, tracker: LagTracker, now_ms: int) -> dict[str, Any]:
    """The group's latest lag per partition, with verdicts and series."""
    partitions = []
    for sample in tracker.latest(group_id):
        key = (sample.topic, sample.partition)
        partitions.append({**sample_json(sample),
                           "verdict": tracker.verdict(group_id, key, now_ms).value,
                           "series": [[p.at_ms, p.lag_records, p.lag_seconds]
                                      for p in tracker.series(group_id, key)]})
    return {"group_id": group_id, "at_ms": now_ms,
            "verdict": tracker.group_verdict(group_id, now_ms).value,
            "lag_records": sum(p["lag_records"] for p in partitions),
            "lag_seconds": max((p["lag_seconds"] or 0.0 for p in partitions), default=0.0),
            "phantom_records": sum(p["phantom_records"] for p in partitions),
            "partitions": partitions}


def sample_json(s: LagSample) -> dict[str, Any]:
    return {"topic": s.topic, "partition": s.partition, "committed": s.committed,
            "log_start": s.log_start, "log_end": s.log_end, "lag_records": s.lag_records,
            "lag_seconds": s.lag_seconds, "phantom_records": s.phantom_records,
            "phantom_cause": s.phantom_cause, "commit_ms": s.commit_ms}


def totals(group_id: str, tracker: LagTracker, now_ms: int) -> dict[str, Any]:
    latest = tracker.latest(group_id)
    return {"records": sum(s.lag_records for s in latest),
            "seconds": max((s.lag_seconds or 0.0 for s in latest), default=0.0),
            "verdict": tracker.group_verdict(group_id, now_ms).value if latest else None}


def share_partition_json(topic: str, partition: int, s: SharePartitionStats | None,
                         start_offset: int | None = None, lag: int | None = None
                         ) -> dict[str, Any]:
    """One share partition: SPSO, SPEO, lag and its in-flight records by state (None where
    the source cannot tell: a cluster's console has start offset and lag only)."""
    if s is None:
        return {"topic": topic, "partition": partition, "start_offset": start_offset,
                "end_offset": None, "lag": lag, "in_flight": None, "available": None,
                "acquired": None, "acknowledged": None, "archived": None}
    return {"topic": topic, "partition": partition, "start_offset": s.start_offset,
            "end_offset": s.end_offset, "lag": s.lag, "in_flight": s.in_flight,
            "available": s.available, "acquired": s.acquired,
            "acknowledged": s.acknowledged, "archived": s.archived}
