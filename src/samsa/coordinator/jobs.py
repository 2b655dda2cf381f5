"""Background work the coordinator asks its edge for: target assignments and regular
expressions (KIP-1263's offload, Kafka's asynchronous regex resolution).

A handler that needs a group's target assignment computed, or its topic regexes resolved,
does not do it: it adds a :class:`Job` to its call's result (``Result.jobs``), next to
records, replies and timers. A job's ``work`` is a pure, picklable callable holding a
snapshot of what it needs (a ``GroupSpec``, topic names), so the edge may run it anywhere:

* ``job.offload``: off the event loop, in a background worker; its outcome comes back
  whenever it is done;
* otherwise at once, before the edge handles anything else for that shard (Kafka 4.3's
  inline assignment, ``consumer.assignor.offload.enable=false``; replies parked on the job
  are answered by its completion).

The edge hands the outcome back with ``Coordinator.complete(job, outcome, now_ms)`` (a
:class:`JobFailed` when the work raised) and handles the result like a request's, only if
the job's own result was appended: the jobs of a result whose records were lost are dropped
(the reloaded shard asks again). The shard remembers the one job it awaits per (kind,
group); a completion of any other job (a duplicate, a job superseded, one from before the
shard was unloaded and loaded again) is ignored, so an edge may deliver late, out of
order, twice or never (when the shard goes away) without harm. A completion the shard
accepts is validated against the group as it is now (:mod:`.consumer.batching`,
:mod:`.consumer.regex_refresh`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from samsa.coordinator.events import Event
from samsa.coordinator.responses import Response


class JobKind(enum.Enum):
    TARGET_ASSIGNMENT = "target-assignment"
    REGEX_RESOLUTION = "regex-resolution"


@dataclass(frozen=True, eq=False)
class Job:
    """One piece of background work for group ``group_id`` of shard ``partition``; compared
    by identity (the shard awaits this very object)."""

    partition: int
    kind: JobKind
    group_id: str
    #: the computation: pure, picklable, no access to the coordinator
    work: Callable[[], object]
    #: run off the event loop (True), or at once, before anything else of the shard
    offload: bool = True

    def run(self) -> object:
        """The outcome to hand back: the work's value, or :class:`JobFailed`."""
        try:
            return self.work()
        except Exception as exc:  # an assignor bug must not take the coordinator down
            return JobFailed(f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class JobFailed:
    """The outcome of a job whose work raised; the shard tries again later."""

    error: str


@dataclass
class Waiting:
    """A reply parked until the group's inline job completes: ``answer()`` builds it then;
    if the shard is unloaded first, ``event`` is answered NOT_COORDINATOR."""

    token: object
    event: Event
    answer: Callable[[], Response]
