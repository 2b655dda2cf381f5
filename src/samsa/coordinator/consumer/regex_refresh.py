"""When and how a consumer group's topic regexes are resolved: Kafka's
``GroupMetadataManager.maybeUpdateRegularExpressions`` and
``handleRegularExpressionsResult``.

A heartbeat never resolves a regex itself. :func:`maybe_refresh` looks at the group after
the member's subscription is written and, when Kafka would, hands the edge a job
(:class:`RegexWork`: every regex the group subscribes to, against the topic names the
member may describe, KAFKA-18813) unless one is awaited already; while a target job of the
group is awaited, the refresh starts when that lands. Kafka's conditions, in its
order: the group subscribes to a regex; no resolution within the last 10 s
(``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``); and a regex is unresolved, or topics appeared
since the last resolution (``TopicsSnapshot.new_topics_version``), or the last resolution
is older than ``group.consumer.regex.refresh.interval.ms`` (10 min).

:func:`resolved` takes the outcome: each regex still subscribed gets a regular expression
record (topics, the topics version it saw, now); if a regex now names other topics the
caller bumps the group epoch, and the group's next target includes them. So a member that
subscribes to a regex and a topic name is first assigned the named topic's partitions, and
the regex's topics in a later epoch, as with Kafka.

A member's own subscription changes are answered at once (:func:`subscription_changed`):
the group epoch is bumped when a member switches to a regex the group has resolved already,
drops its regex, or leaves a regex nobody else uses and that named topics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from samsa.coordinator.config import REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
from samsa.coordinator.consumer import record_factory as records
from samsa.coordinator.consumer import regex as rx
from samsa.coordinator.consumer.group import ConsumerGroup
from samsa.coordinator.consumer.records import (
    ConsumerGroupRegularExpressionValue,
)
from samsa.coordinator.core import ShardCore
from samsa.coordinator.jobs import Job, JobFailed, JobKind

REGEX = JobKind.REGEX_RESOLUTION

Describable = Callable[[Iterable[str]], Iterable[str]]


@dataclass(frozen=True, eq=False)
class RegexWork:
    """Resolve ``regexes`` among ``names`` (a job's work: pure, picklable); ``version`` is
    the topics version the names come from."""

    regexes: tuple[str, ...]
    names: tuple[str, ...]
    version: int

    def __call__(self) -> dict[str, frozenset[str]]:
        return {regex: rx.resolve(regex, self.names) for regex in self.regexes}


def subscription_changed(core: ShardCore, group: ConsumerGroup, old_regex: str | None,
                         new_regex: str | None) -> bool:
    """After a member's subscription (old -> new regex) is written: drop a regex nobody
    uses any more; True if the group epoch must be bumped now."""
    bump = False
    if old_regex != new_regex:
        if old_regex:
            bump |= drop_unused(core, group, old_regex)
        if new_regex and new_regex in group.regexes:
            bump = True  # Kafka: switching to a regex the group has resolved rebalances
        elif not new_regex and old_regex:
            bump = True  # Kafka: a member that drops its regex rebalances
    return bump


def maybe_refresh(core: ShardCore, group: ConsumerGroup,
                  describable: Describable | None) -> Job | None:
    """Kafka's conditions for a refresh (see the module); the job started, or None. While a
    target job of the group is awaited the refresh waits for it (:func:`asked_meanwhile`):
    a resolution landing meanwhile would make that target stale, and the named topics of a
    new member are assigned first, as with Kafka 4.3's inline assignment."""
    gid = group.group_id
    wanted = group.subscribed_regexes()
    if not wanted or core.awaits(REGEX, gid) is not None:
        return None
    now = core.now_ms
    topics = core.topics
    last = group.last_regex_refresh()
    if last is not None:  # the group's first regex is resolved at once
        last_time, last_version = last
        if now <= last_time + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
            return None
        if (all(r in group.regexes for r in wanted)
                and last_version >= topics.new_topics_version
                and now < last_time + core.config.consumer_regex_refresh_interval_ms):
            return None
    if core.awaits(JobKind.TARGET_ASSIGNMENT, gid) is not None:
        group.regex_refresh_after_target = (describable,)
        return None
    group.regex_refresh_after_target = None
    names = topics.by_name if describable is None else describable(topics.by_name)
    work = RegexWork(tuple(sorted(wanted)), tuple(names), topics.version)
    return core.start_job(REGEX, gid, work)


def asked_meanwhile(core: ShardCore, group: ConsumerGroup) -> None:
    """The group's target job landed: start the refresh a heartbeat asked for meanwhile."""
    asked = group.regex_refresh_after_target
    if asked is not None and core.awaits(JobKind.TARGET_ASSIGNMENT, group.group_id) is None:
        maybe_refresh(core, group, asked[0])


def resolved(core: ShardCore, group: ConsumerGroup, job: Job, outcome: object) -> bool:
    """Write the resolution of each regex the group still subscribes to; True if one now
    names other topics than before (the caller bumps the group epoch). A failed job is
    dropped: the next heartbeat asks again."""
    if isinstance(outcome, JobFailed):
        return False
    work = job.work
    assert isinstance(work, RegexWork) and isinstance(outcome, Mapping)
    wanted = group.subscribed_regexes()
    changed = False
    for regex in sorted(outcome):
        if regex not in wanted:
            continue
        topics = frozenset(outcome[regex])
        old = group.regexes.get(regex)
        changed |= (frozenset() if old is None else old.topics) != topics
        core.write(*records.regex(group.group_id, regex, ConsumerGroupRegularExpressionValue(
            tuple(sorted(topics)), work.version, core.now_ms)))
    return changed


def drop_unused(core: ShardCore, group: ConsumerGroup, regex: str) -> bool:
    """A regex nobody subscribes to any more loses its record; True if it resolved to
    topics (the subscription shrank)."""
    if regex in group.subscribed_regexes() or regex not in group.regexes:
        return False
    topics = group.regexes[regex].topics
    core.write(*records.regex_tombstone(group.group_id, regex))
    return bool(topics)
