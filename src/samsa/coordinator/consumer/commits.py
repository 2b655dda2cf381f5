"""Offset commits and fetches against a consumer group: Kafka 4.3's
``ConsumerGroup.validateOffsetCommit`` (with KIP-1251's per-partition check) and
``validateOffsetFetch``. Their rules live here only: ``ConsumerGroup`` answers the group
interface (:mod:`samsa.coordinator.family`) with them, for OffsetCommit and OffsetFetch
(:mod:`samsa.coordinator.offsets`), and TxnOffsetCommit is to use them too.

A commit with a negative epoch on an empty group is an admin commit: accepted. Otherwise
the member must exist (UNKNOWN_MEMBER_ID) and a consumer-protocol member must commit with
OffsetCommit v9+ (UNSUPPORTED_VERSION). Then the commit's member epoch is checked, for
every partition it commits, against the member's epoch (the broker's) and the epoch at
which the member was given that partition (``ConsumerMember.assignment_epochs``):

=================================  ===============================  ====================
commit's epoch                     the partition                    answer
=================================  ===============================  ====================
equal to the member's              any                              accepted
newer than the member's            any                              STALE_MEMBER_EPOCH
older                              held by the member (assigned or  accepted
                                   revoking), given at an epoch <=
                                   the commit's
older                              given to the member later        STALE_MEMBER_EPOCH
older                              not held by the member: nobody's STALE_MEMBER_EPOCH
                                   or another member's
=================================  ===============================  ====================

That is ``assignmentEpoch(partition) <= clientEpoch <= brokerEpoch`` where the epochs
differ. A member whose heartbeat moved it to a new epoch while its commit was on the way
keeps committing the partitions it still holds; a partition that moved to another member is
fenced. A classic member of a consumer group (online migration) gets ILLEGAL_GENERATION
where a consumer-protocol member gets STALE_MEMBER_EPOCH. One refused partition refuses the
whole commit, as Kafka's validator throws: nothing is written.

OffsetFetch (v9+, with a member id or an epoch) is unchanged by KIP-1251: the member must
exist and send its current epoch exactly.

For TxnOffsetCommit, Kafka first accepts a commit that names no member at all (epoch -1,
empty member id, no instance id) and has no version floor (``api_version=None`` here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from samsa.coordinator.family import ACCEPT, CommitCheck

if TYPE_CHECKING:
    from samsa.coordinator.consumer.group import ConsumerGroup

E = ErrorCode

#: OffsetCommit v9+ carries member epochs (KIP-848).
OFFSET_COMMIT_MEMBER_EPOCH_VERSION = 9




def validate_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int,
                           api_version: int | None) -> CommitCheck:
    """Check a commit to ``group``; ``api_version`` is the OffsetCommit version (``None``:
    no version floor, as for TxnOffsetCommit)."""
    if member_epoch < 0 and group.is_empty():
        return ACCEPT
    member = group.members.get(member_id)
    if member is None:
        return CommitCheck(E.unknown_member_id)
    classic = member.classic is not None
    if not classic and api_version is not None \
            and api_version < OFFSET_COMMIT_MEMBER_EPOCH_VERSION:
        return CommitCheck(E.unsupported_version)
    refusal = E.illegal_generation if classic else E.stale_member_epoch
    if member_epoch == member.member_epoch:
        return ACCEPT
    if member_epoch > member.member_epoch:
        return CommitCheck(refusal)
    return CommitCheck(member=member, epoch=member_epoch, refusal=refusal)


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None,
                          member_epoch: int) -> int | None:
    """Kafka's ``ConsumerGroup.validateOffsetFetch``: the error for a fetch that names a
    member or an epoch (None: answer it)."""
    if member_id is None and member_epoch < 0:
        return None
    member = group.members.get(member_id or "")
    if member is None:
        return E.unknown_member_id
    if member_epoch != member.member_epoch:
        return E.illegal_generation if member.classic is not None else E.stale_member_epoch
    return None
