"""The cluster's control step, pure: what a node does about the leases it just read.

:func:`reconcile` takes what the node knows of itself (:class:`Holder`: the leases it holds
and the epochs it writes with, when its registration was last renewed), the live nodes,
every partition's lease and the time, and returns :data:`Action` values; the node
(:class:`samsa.cluster.node.ClusterNode`) carries them out against the database, the
failover simulation (``tests/coordinator/failover_simulation.py``) against its own. Each
partition's preferred owner is the rendezvous hash over the live nodes
(:func:`samsa.cluster.placement.plan`, or the ``place`` given):

* a lease it no longer finds (its topic was deleted) is *forgotten*;
* a node whose own renewal is older than the TTL (its monotonic clock, measured from before
  the renewal was sent) *drops* every lease before anyone can take them over;
* a lease it holds whose row names another owner or epoch is *lost*: dropped;
* a partition with no owner, or whose owner is not live (its registration expired: it
  stopped renewing for a TTL, or its session closed), is *claimed* by its preferred owner
  with a compare-and-set on the epoch it read, which bumps it (the new leader epoch);
* a lease it holds whose preferred owner is another live node (a node joined) is *handed
  off* to it.

Fencing does not depend on any of it: every write names the epoch it is written under and
the database refuses it if the row moved on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from samsa.cluster.placement import plan

Lease = tuple[int | None, int]
"""(owner node id or None, epoch) of a partition's lease."""

Placement = Callable[[Mapping[int, str], Sequence[int]], Mapping[int, int | None]]
"""Preferred owner of each partition id (pid -> topic name) among the live nodes."""


@dataclass(frozen=True, slots=True)
class Holder:
    """A node, as it knows itself."""

    node_id: int
    ttl_ms: int
    owned: Mapping[int, int] = field(default_factory=dict)
    """Partition id -> the lease epoch it writes with."""
    renewed_at: float = 0.0
    """When (seconds, monotonic) the last renewal that took was sent."""
    busy: Collection[int] = frozenset()
    """Partitions with a claim or hand-off in flight: left alone."""


@dataclass(frozen=True, slots=True)
class Forget:
    """The lease is gone with its topic: stop counting it (its log is closed)."""

    pid: int


@dataclass(frozen=True, slots=True)
class Drop:
    """Stop leading ``pid``: its lease moved, or this node's registration is too old."""

    pid: int


@dataclass(frozen=True, slots=True)
class HandOff:
    """Hand ``pid`` over to ``target``: refuse appends, commit the pending ones, then name
    ``target`` the owner with a higher epoch."""

    pid: int
    target: int


@dataclass(frozen=True, slots=True)
class Claim:
    """Take these leases ``(pid, epoch read)`` with one compare-and-set."""

    leases: tuple[tuple[int, int], ...]


Action = Forget | Drop | HandOff | Claim


def expired(me: Holder, now: float) -> bool:
    """The node holds leases and has not renewed its registration for a TTL."""
    return bool(me.owned) and now - me.renewed_at > me.ttl_ms / 1000


def reconcile(me: Holder, live: Collection[int], leases: Mapping[int, Lease], now: float, *,
              topics: Mapping[int, str], act: bool = True,
              place: Placement = plan) -> list[Action]:
    """What ``me`` does about ``leases`` (partition id -> lease, as just read) among the
    ``live`` nodes at ``now`` (seconds, monotonic). ``topics`` names the partitions the node
    knows (others are left alone); with ``act`` false (its renewal did not take, or it is
    stopping) it only forgets and self-fences."""
    actions: list[Action] = [Forget(pid) for pid in me.owned if pid not in leases]
    owned = {pid: epoch for pid, epoch in me.owned.items() if pid in leases}
    if owned and now - me.renewed_at > me.ttl_ms / 1000:
        return actions + [Drop(pid) for pid in owned]
    if not act:
        return actions
    preferred = place({pid: t for pid, t in topics.items() if pid in leases}, sorted(live))
    claims: list[tuple[int, int]] = []
    for pid, (owner, epoch) in leases.items():
        if pid not in topics or pid in me.busy:
            continue
        held = owned.get(pid)
        if held is not None and (owner != me.node_id or epoch != held):
            actions.append(Drop(pid))
            held = None
        want = preferred.get(pid)
        if held is not None:
            if want is not None and want != me.node_id:
                actions.append(HandOff(pid, want))
        elif want == me.node_id and (owner is None or owner == me.node_id or owner not in live):
            claims.append((pid, epoch))
    if claims:
        actions.append(Claim(tuple(claims)))
    return actions
