"""One member's reconciliation towards its target assignment (Kafka's
``CurrentAssignmentBuilder``), a pure function of the member, the target and who owns what.

States: STABLE (reconciled to the assignment epoch), UNREVOKED_PARTITIONS (must first give
up ``pending_revocation``: the member stays in its epoch until its heartbeat no longer
reports them), UNRELEASED_PARTITIONS (moved to the new epoch but waits for partitions that
another member still owns). Revocation always comes before assignment, and a partition is
handed out only once no other member holds it (``partition_epoch`` is -1). A partition
newly given to the member is stamped with the epoch the member moves to; kept and revoking
partitions keep the epoch they were assigned at (KIP-1251).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace

from samsa.coordinator.consumer.group import (
    Assignment,
    ConsumerMember,
    MemberState,
    stamp_epochs,
)

PartitionEpoch = Callable[[uuid.UUID, int], int]


class FencedMemberEpoch(Exception):
    """The member is in a state this coordinator does not know: it must rejoin."""


def owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    """Does the member still report any partition it must revoke? (``None``: the member
    did not say, so assume it does.)"""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in revoking.items())


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Assignment | None,
    subscribed: frozenset[uuid.UUID] | None = None,
) -> ConsumerMember:
    """The member's next state (the same object when nothing can move)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch,
                         owned, subscribed)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch,
                     owned, subscribed)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch,
                     owned, subscribed)
    if owned is None or owned:
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned,
                 subscribed)


def _next(
    member: ConsumerMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Assignment | None,
    subscribed: frozenset[uuid.UUID] | None,
) -> ConsumerMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        if subscribed is not None and topic_id not in subscribed:
            wanted = frozenset()
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        give_up = current - keep
        own_revoking = member.pending_revocation.get(topic_id, frozenset())
        free = set()
        for p in wanted - keep:
            if partition_epoch(topic_id, p) != -1 and p not in own_revoking:
                unreleased = True
            else:
                free.add(p)
        if keep:
            assigned[topic_id] = keep
        if give_up:
            revoking[topic_id] = give_up
        if free:
            pending[topic_id] = frozenset(free)
    if revoking and owns_any(owned, revoking):
        return _with(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    for topic_id, ps in pending.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with(member, state, target_epoch, assigned, {})


def _with(
    member: ConsumerMember,
    state: MemberState,
    epoch: int,
    assigned: Assignment,
    revoking: Assignment,
) -> ConsumerMember:
    return replace(
        member,
        state=state,
        previous_member_epoch=member.member_epoch,
        member_epoch=epoch,
        assigned=assigned,
        pending_revocation=revoking,
        assignment_epochs=stamp_epochs((assigned, revoking), member.assignment_epochs, epoch),
    )
