"""The shard's group types are families side by side (samsa.coordinator.family): a third
one slots in beside classic and consumer without either changing. A toy family shows it:
requests naming its groups reach it, others go where they went, and the offsets APIs and
DeleteGroups serve its groups through the group interface."""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
    CoordinatorShard,
    DeleteGroups,
    FetchGroup,
    Heartbeat,
    ListGroups,
    OffsetCommit,
    OffsetFetch,
)
from samsa.coordinator.consumer.group import ConsumerGroupState
from samsa.coordinator.family import ACCEPT, CommitCheck, ExpirationCondition, Handler
from samsa.coordinator.jobs import Job, JobKind
from samsa.coordinator.queries import GroupDescription, GroupSummary
from samsa.coordinator.records import RecordKey
from samsa.coordinator.responses import (
    DeletedGroup,
    DeleteGroupsResponse,
    FetchedGroup,
    FetchedPartition,
    FetchedTopic,
    HeartbeatResponse,
    ListedGroup,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    PartitionError,
    TopicErrors,
)
from samsa.coordinator.shard import FAMILIES
from samsa.coordinator.timers import TimerKey, TimerKind

E = ErrorCode
#: the toy family's answer to a Heartbeat: an error code no other family gives here
TOY_ANSWER = E.rebalance_in_progress


@dataclass
class ToyGroup:
    group_id: str

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int,
                               api_version: int | None) -> CommitCheck:
        return ACCEPT if generation_or_epoch == 7 else CommitCheck(E.illegal_generation)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        return None

    def validate_offset_delete(self) -> int | None:
        return None

    def validate_delete_group(self) -> int | None:
        return None

    def is_empty(self) -> bool:
        return True

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return False

    def offset_expiration_condition(self) -> ExpirationCondition | None:
        return None

    def should_expire(self) -> bool:
        return True

    def group_tombstone_keys(self) -> list[RecordKey]:
        return []


def _toy_heartbeat(core: object, ev: Heartbeat, token: object) -> None:
    assert isinstance(core, CoordinatorShard)
    core.reply(token, HeartbeatResponse(TOY_ANSWER))


@dataclass
class ToyFamily:
    ids: set[str]
    forgotten: list[str] = field(default_factory=list)
    group_type: str = "toy"
    key_types: tuple[type, ...] = ()
    handlers: dict[type, Handler] = field(default_factory=lambda: {Heartbeat: _toy_heartbeat})
    home_apis: dict[type, Handler] = field(default_factory=dict)
    timer_kinds: frozenset[TimerKind] = frozenset()
    job_kinds: frozenset[JobKind] = frozenset()
    removes_emptied_group: bool = False

    def replay(self, hard: object, key: object, value: object) -> None:
        pass

    def group(self, core: object, group_id: str) -> ToyGroup | None:
        return ToyGroup(group_id) if group_id in self.ids else None

    def groups(self, core: object) -> list[ToyGroup]:
        return [ToyGroup(g) for g in sorted(self.ids)]

    def summary(self, core: object, group: ToyGroup) -> GroupSummary:
        return GroupSummary(group.group_id, ConsumerGroupState.EMPTY, "toy", "", "", 0, 0, 0,
                            group_type="toy")

    def describe(self, core: object, group: ToyGroup) -> GroupDescription:
        return GroupDescription(self.summary(core, group), (), (), None)

    def forget(self, core: object, group: ToyGroup) -> None:
        self.ids.discard(group.group_id)
        self.forgotten.append(group.group_id)

    def commit_accepted(self, core: object, group: object, check: CommitCheck) -> None:
        pass

    def loaded(self, core: object) -> None:
        pass

    def started(self, core: object) -> None:
        pass

    def unloaded(self, core: object) -> None:
        pass

    def fire(self, core: object, key: TimerKey) -> None:
        pass

    def complete(self, core: object, job: Job, outcome: object) -> None:
        pass


def _shard(toy: ToyFamily) -> CoordinatorShard:
    shard = CoordinatorShard(0, families=(*FAMILIES, toy))
    shard.load([], 0)
    return shard


def _answer(shard: CoordinatorShard, event: object) -> object:
    result = shard.handle(event, 1, reply_to="t")  # type: ignore[arg-type]
    (reply,) = result.replies
    return reply.response


def test_a_request_naming_a_group_of_a_third_type_reaches_its_family() -> None:
    shard = _shard(ToyFamily({"s"}))
    assert _answer(shard, Heartbeat("s", 1, "m")) == HeartbeatResponse(TOY_ANSWER)
    # another group goes where it went: the classic family knows no such member
    assert _answer(shard, Heartbeat("c", 1, "m")) == HeartbeatResponse(E.unknown_member_id)
    assert _answer(shard, ListGroups()) == ListGroupsResponse(
        E.none, (ListedGroup("s", "toy", "Empty", "toy"),))


def test_the_offsets_path_and_delete_groups_ask_the_third_type_through_the_interface() -> None:
    toy = ToyFamily({"s"})
    shard = _shard(toy)
    topics = (CommitTopic("t", (CommitPartition(0, 42),)),)
    def commit(generation: int) -> object:
        return _answer(shard, OffsetCommit("s", topics, generation_id=generation, member_id="m"))

    assert commit(6) == _commit_answer(E.illegal_generation)
    assert not shard.offsets_of("s")
    assert commit(7) == _commit_answer(E.none)
    assert "s" not in shard.groups  # the commit made no classic group of it
    assert _answer(shard, OffsetFetch((FetchGroup("s"),))) == OffsetFetchResponse((
        FetchedGroup("s", (FetchedTopic("t", (FetchedPartition(0, 42),)),)),))
    assert _answer(shard, DeleteGroups(("s",))) == DeleteGroupsResponse(
        (DeletedGroup("s", E.none),))
    assert toy.forgotten == ["s"] and not shard.offsets_of("s")


def _commit_answer(error: int) -> OffsetCommitResponse:
    return OffsetCommitResponse((TopicErrors("t", (PartitionError(0, error),)),))
