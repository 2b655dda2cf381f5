"""The ownership checker of the KIP-848 conformance and failover tests
(:func:`tests.conformance.consumer_protocol_kit.double_owners`), on made-up callbacks."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.conformance.consumer_protocol_kit import double_owners
from tests.conformance.javakit import Event


@dataclass
class Made:
    name: str
    events: list[Event] = field(default_factory=list)
    killed_at: int | None = None

    def on(self, ts: int, kind: str, *partitions: int) -> Made:
        self.events.append({"event": kind, "ts": ts,
                            "partitions": [["t", p] for p in partitions]})
        return self

    def rebalances(self) -> list[Event]:
        return self.events


def test_a_handover_after_the_revocation_is_clean() -> None:
    a = Made("a").on(1, "assigned", 0, 1).on(5, "revoked", 1)
    b = Made("b").on(6, "assigned", 1)
    assert double_owners([a, b]) == []


def test_an_overlap_ended_by_a_revocation_is_a_fault_even_with_fencing_allowed() -> None:
    a = Made("a").on(1, "assigned", 0, 1).on(9, "revoked", 1)
    b = Made("b").on(6, "assigned", 1)
    fenced: list[str] = []
    assert double_owners([a, b], fenced) == ["('t', 1) assigned to b at 6 while a held it"]
    assert fenced == []


def test_an_overlap_ended_by_a_loss_is_the_zombie_window_only_when_allowed() -> None:
    a = Made("a").on(1, "assigned", 0, 1).on(9, "lost", 0, 1)
    b = Made("b").on(6, "assigned", 1)
    assert double_owners([a, b]) == ["('t', 1) assigned to b at 6 while a held it"]
    fenced: list[str] = []
    assert double_owners([a, b], fenced) == []
    assert fenced == ["('t', 1) assigned to b at 6 while a held it"]


def test_a_killed_member_holds_nothing_after_its_death() -> None:
    a = Made("a", killed_at=4).on(1, "assigned", 1)
    b = Made("b").on(6, "assigned", 1)
    assert double_owners([a, b]) == []
