"""What every group member's machine may ask its driver to do, whatever its protocol.

The machines (:mod:`~samsa.client.group.classic_machine`,
:mod:`~samsa.client.group.consumer_machine`) return these beside their own requests
(JoinGroup, ConsumerGroupHeartbeat, ...); the shared parts of the driver perform them:
:class:`FindCoordinator` (:mod:`~samsa.client.group.discovery`), :class:`RevokePartitions`
and :class:`LosePartitions` (:mod:`~samsa.client.group.listeners`), :class:`RaiseError`
(the user's next ``poll``).
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa import TopicPartition

__all__ = ["NO_GENERATION", "NO_MEMBER_ID", "FindCoordinator", "LosePartitions", "RaiseError",
           "RevokePartitions"]

NO_MEMBER_ID = ""
"""The member id of a member the coordinator has not named yet (not an error code)."""
NO_GENERATION = -1
"""The generation (or member epoch) of a member outside the group: commits carry it."""


@dataclass(frozen=True)
class FindCoordinator:
    """Look the group's coordinator up."""


@dataclass(frozen=True)
class RevokePartitions:
    """Call ``on_partitions_revoked`` (the member still owns them), then drop them."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class LosePartitions:
    """Drop the partitions (others may own them already), then ``on_partitions_lost``."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class RaiseError:
    """An error raised to the user by ``poll`` (fatal, when it is the machine's ``fatal``)."""

    code: int
    message: str
