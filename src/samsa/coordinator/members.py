"""Member validation shared by SyncGroup, Heartbeat, LeaveGroup and OffsetCommit."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.group import Group

E = ErrorCode


def validate_current_member(group: Group, member_id: str, instance_id: str | None) -> int | None:
    """Kafka's ``validateCurrentMember``: a given instance id must exist and map to
    ``member_id`` (else UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID); a dynamic member must exist."""
    if instance_id is not None:
        if not group.has_static(instance_id):
            return E.unknown_member_id
        if group.is_static_fenced(instance_id, member_id):
            return E.fenced_instance_id
        return None
    if member_id not in group.members:
        return E.unknown_member_id
    return None
