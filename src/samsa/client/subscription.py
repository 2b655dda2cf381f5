"""What the consumer subscribes to, what it is assigned, and each partition's position.

The user thread owns this state. Assignments are replaced, never edited in place, so the
fetcher's view of "is this partition still assigned" is a dictionary lookup.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from samsa import TopicPartition
from samsa.client.errors import IllegalStateError

__all__ = ["PartitionState", "SubscriptionState", "SubscriptionType"]


class SubscriptionType(enum.Enum):
    NONE = 0
    TOPICS = 1
    PATTERN = 2
    USER_ASSIGNED = 3


@dataclass
class PartitionState:
    """Fetch state of one assigned partition."""

    position: int | None = None
    paused: bool = False
    reset: str | None = None
    """Pending offset reset ("earliest"/"latest") requested by seek_to_* or out of range."""
    high_watermark: int = -1


class SubscriptionState:
    """Subscription (topics, pattern or manual assignment) plus assigned partition states."""

    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.type = SubscriptionType.NONE
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.listener: Any = None
        self.assignment: dict[TopicPartition, PartitionState] = {}

    @property
    def auto_assigned(self) -> bool:
        return self.type in (SubscriptionType.TOPICS, SubscriptionType.PATTERN)

    def subscribe(self, topics: Iterable[str] | None, pattern: str | None,
                  listener: Any) -> bool:
        """Set topics or a pattern; True when the subscribed topics changed."""
        if self.type == SubscriptionType.USER_ASSIGNED:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        self.listener = listener
        if pattern is not None:
            self.type = SubscriptionType.PATTERN
            self.pattern = re.compile(pattern)
            return True
        new = frozenset(topics or ())
        if not new:
            raise ValueError("subscribe() needs topics or a pattern")
        changed = new != self.topics or self.type != SubscriptionType.TOPICS
        self.type = SubscriptionType.TOPICS
        self.pattern = None
        self.topics = new
        return changed

    def match_pattern(self, all_topics: Iterable[str], internal: Iterable[str]) -> bool:
        """Pattern subscription: set topics to the matching ones; True when they changed."""
        assert self.pattern is not None
        skip = set(internal)
        new = frozenset(t for t in all_topics if t not in skip and self.pattern.fullmatch(t))
        changed = new != self.topics
        self.topics = new
        return changed

    def matches(self, topic: str) -> bool:
        """True if ``topic`` belongs to the subscription (its topics, or its pattern)."""
        if self.type == SubscriptionType.PATTERN:
            return self.pattern is not None and self.pattern.fullmatch(topic) is not None
        return topic in self.topics

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        if self.auto_assigned:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        self.type = SubscriptionType.USER_ASSIGNED
        self.set_assignment(partitions)
        self.topics = frozenset(tp.topic for tp in self.assignment)

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment, keeping the state of partitions that stay."""
        new = {}
        for tp in partitions:
            tp = TopicPartition(*tp)
            new[tp] = self.assignment.get(tp) or PartitionState()
        self.assignment = new

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self.topics = frozenset()
        self.pattern = None
        self.listener = None
        self.assignment = {}

    def state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return st

    def is_fetchable(self, tp: TopicPartition) -> bool:
        st = self.assignment.get(tp)
        return st is not None and not st.paused and st.position is not None

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items()
                if not st.paused and st.position is not None]

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.position is None]

    def consumed(self) -> dict[TopicPartition, int]:
        """Positions of all assigned partitions that have one (what auto-commit commits)."""
        return {tp: st.position for tp, st in self.assignment.items()
                if st.position is not None}
