"""Acknowledgement types, the records a poll handed out, and how acknowledgements travel.

Pure (no I/O, no clock). :class:`Delivered` is Kafka's acknowledgement mode
(``share.acknowledgement.mode``):

* ``implicit`` (default): the records of one poll are ACCEPTed by the next ``poll``,
  ``commit_sync``/``commit_async`` or ``close``; :meth:`Delivered.acknowledge` is refused;
* ``explicit``: the application acknowledges each record (ACCEPT, RELEASE, REJECT, or RENEW
  to extend its lock: it must still be acknowledged after); ``poll`` with a record of the
  previous poll not acknowledged is refused (Kafka's IllegalStateException); a commit sends
  what is acknowledged so far; ``close`` sends it too and the broker releases the rest when
  the share session closes.

:func:`ack_batches` writes acknowledgements as ShareFetch/ShareAcknowledge batches.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from samsa import TopicPartition
from samsa.client.errors import IllegalStateError

__all__ = ["AckBatch", "AcknowledgeType", "Acks", "Delivered", "ack_batches"]


class AcknowledgeType(enum.IntEnum):
    """How a record is acknowledged (Kafka's ``AcknowledgeType``; the wire values)."""

    GAP = 0
    """Offsets acquired without a record (compacted away, transaction markers)."""
    ACCEPT = 1
    """Processed: never delivered again."""
    RELEASE = 2
    """Not processed: delivered again (to any member) with a higher delivery count."""
    REJECT = 3
    """Unprocessable: archived (and copied to the group's dead-letter topic, if any)."""
    RENEW = 4
    """Still being processed: the acquisition lock starts again (KIP-1222)."""


AckBatch = tuple[int, int, tuple[int, ...]]
"""(first offset, last offset, acknowledge types): one type for the whole range."""

Acks = dict[TopicPartition, dict[int, AcknowledgeType]]
"""Acknowledgements: partition -> offset -> type."""

FINAL = frozenset({AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT})
MODES = ("implicit", "explicit")


def ack_batches(acks: Mapping[int, AcknowledgeType]) -> list[AckBatch]:
    """Runs of consecutive offsets with one type, in offset order."""
    out: list[AckBatch] = []
    for offset in sorted(acks):
        kind = int(acks[offset])
        if out and out[-1][1] == offset - 1 and out[-1][2] == (kind,):
            out[-1] = (out[-1][0], offset, (kind,))
        else:
            out.append((offset, offset, (kind,)))
    return out


class Delivered:
    """The records the last poll handed out, until their acknowledgements are taken."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"share_acknowledgement_mode must be implicit or explicit, "
                             f"not {mode!r}")
        self.explicit = mode == "explicit"
        self.records: dict[tuple[TopicPartition, int], AcknowledgeType | None] = {}

    def deliver(self, records: Iterable[tuple[TopicPartition, int]]) -> None:
        """A poll returned these (partition, offset)s."""
        for key in records:
            self.records[key] = None

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """Explicit mode: acknowledge a record of the last poll (a later call before the
        acknowledgement is sent replaces the type)."""
        if not self.explicit:
            raise IllegalStateError("acknowledge() needs share_acknowledgement_mode="
                                    "'explicit' (implicit mode accepts every record)")
        key = (tp, offset)
        if key not in self.records:
            raise IllegalStateError(f"{tp.topic}-{tp.partition} offset {offset} cannot be "
                                    "acknowledged: not a record of the last poll, or "
                                    "acknowledged already")
        if kind == AcknowledgeType.GAP:
            raise ValueError("GAP is not an acknowledgement for a record")
        self.records[key] = AcknowledgeType(kind)

    def unacknowledged(self) -> int:
        return sum(1 for k in self.records.values() if k not in FINAL)

    def for_poll(self) -> Acks:
        """Before a poll: implicit, everything ACCEPTed; explicit, what was acknowledged,
        refused while a record has no final type."""
        if self.explicit and self.unacknowledged():
            raise IllegalStateError("All records must be acknowledged in explicit "
                                    f"acknowledgement mode ({self.unacknowledged()} of the "
                                    "last poll are not)")
        return self.take()

    def take(self) -> Acks:
        """The acknowledgements to send now (commit, close): implicit, every record
        ACCEPTed; explicit, the acknowledged ones (a RENEWed record stays, to be
        acknowledged again)."""
        out: Acks = {}
        kept: dict[tuple[TopicPartition, int], AcknowledgeType | None] = {}
        for (tp, offset), kind in self.records.items():
            if not self.explicit:
                kind = AcknowledgeType.ACCEPT
            if kind is None:
                kept[(tp, offset)] = None
                continue
            out.setdefault(tp, {})[offset] = kind
            if kind == AcknowledgeType.RENEW:
                kept[(tp, offset)] = None
        self.records = kept
        return out
