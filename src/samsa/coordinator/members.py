"""Member validation shared by SyncGroup, Heartbeat, LeaveGroup and OffsetCommit."""

from __future__ import annotations

from samsa.coordinator.group import Group


def validate_current_member(group: Group, member_id: str, instance_id: str | None) -> int | None:
    """Kafka's ``validateCurrentMember`` (:meth:`Group.member_error`)."""
    return group.member_error(member_id, instance_id)
