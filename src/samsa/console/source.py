"""Where the console's data comes from: the base both sources share.

* :class:`~samsa.console.broker_source.BrokerSource`: inside a samsa broker (``samsa serve
  --metrics-port``), reading the coordinator's views on the broker's loop: history,
  liveness clocks and coordinator health included;
* :class:`~samsa.console.remote_source.RemoteSource`: ``samsa console --bootstrap-server``
  against any Kafka-compatible cluster through the Kafka protocol; the samsa-only panels
  (history, liveness, health) are off (:attr:`Source.features`).

The console acts as a principal (``console.principal``; ``samsa console``: the credentials of
its ``--command-config``). Changing actions (an offset reset) go through a Kafka admin client
in both cases, so the cluster's own checks apply: with an authorizer, the principal's ACLs
(DESCRIBE on the group and its topics for a preview, READ on both to execute, as Kafka's
OffsetCommit and ``kafka-consumer-groups --reset-offsets``); a refusal answers 403 with
what is missing. Actions are off unless the operator enables them, and each is written to
the audit log. A broker's console also shows only the groups and topics its principal may
DESCRIBE; a cluster's answers are already so filtered.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from samsa.console import views
from samsa.console.audit import AuditLog
from samsa.console.lag import LagTracker

T = TypeVar("T")


@dataclass(frozen=True)
class ConsoleOptions:
    """How the console runs (``samsa serve`` reads them from ``console.*`` settings,
    ``samsa console`` from its options)."""

    #: offset resets may be executed (previews are always allowed)
    actions_enabled: bool = False
    #: the principal the console acts as: whose ACLs decide what it shows and may do (in
    #: a broker), and who is written to the audit log
    principal: str = "User:ANONYMOUS"
    #: how often lag is sampled and live pages are pushed
    sample_interval_ms: int = 5000
    audit_path: Path | None = None
    #: TLS and SASL settings of the console's clients (``samsa console --command-config``;
    #: a broker's console connects in-process and needs none)
    client_config: Mapping[str, Any] = field(default_factory=dict)


class ActionError(Exception):
    """An action was refused or failed; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def now_ms() -> int:
    return int(time.time() * 1000)


class Source(abc.ABC):
    """The data behind the API (one per console server)."""

    #: "broker" (inside a samsa broker) or "cluster" (any cluster, through the protocol)
    kind = "cluster"

    def __init__(self, options: ConsoleOptions) -> None:
        self.options = options
        interval = options.sample_interval_ms
        self.tracker = LagTracker(min_stop_ms=max(10 * interval, 1000))
        self.audit = AuditLog(options.audit_path)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="samsa-console")

    @property
    def features(self) -> dict[str, bool]:
        """Which panels and actions this source offers."""
        return {"history": False, "liveness": False, "health": False,
                "actions": self.options.actions_enabled, "share_groups": False}

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking client call on the console's own worker thread (one at a time)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ data

    @abc.abstractmethod
    async def groups(self) -> list[dict[str, Any]]:
        """Every group: type, state, members, coordinator, lag, last rebalance."""

    @abc.abstractmethod
    async def group(self, group_id: str) -> dict[str, Any] | None:
        """One group in detail (None: unknown)."""

    async def history(self, group_id: str) -> list[dict[str, Any]] | None:
        """The group's rebalance history (None: this source has none)."""
        return None

    async def share_partitions(self, group_id: str) -> list[dict[str, Any]] | None:
        """A share group's share partitions (:func:`views.share_partition_json`; None: not a
        share group, or this source cannot tell)."""
        return None

    async def health(self) -> dict[str, Any] | None:
        """Coordinator shards, leases, fail-overs (None: this source has none)."""
        return None

    @abc.abstractmethod
    async def sample(self) -> None:
        """Take one lag sample of every group."""

    def lag(self, group_id: str) -> dict[str, Any]:
        return views.lag_json(group_id, self.tracker, now_ms())

    def visible(self, group_id: str) -> bool:
        """May the console's principal see ``group_id``? (A source whose cluster filters
        its answers itself sees only what it may.)"""
        return True

    def check_visible(self, group_id: str) -> None:
        """:class:`ActionError` 403 for a group the principal may not see."""
        if not self.visible(group_id):
            raise ActionError(403, f"{self.options.principal} is not authorized to DESCRIBE "
                                   f"group {group_id}")

    def audit_entries(self, group_id: str | None = None) -> list[dict[str, Any]]:
        """The audit log, newest first, of the groups the principal may see."""
        return [e for e in self.audit.recent(group_id) if self.visible(str(e.get("group")))]

    # ------------------------------------------------------------------ actions

    @abc.abstractmethod
    def admin(self) -> Any:
        """The admin client actions use (called on the worker thread)."""

    async def reset_offsets(self, group_id: str, request: Mapping[str, Any],
                            execute: bool) -> dict[str, Any]:
        """Preview (``execute`` False) or execute an offset reset; refused while the
        group has members, and while actions are off. Both are audited."""
        from samsa.client.offset_reset import ResetError, ResetSpec

        entry: dict[str, Any] = {
            "at_ms": now_ms(), "principal": self.options.principal, "group": group_id,
            "action": "reset-offsets", "dry_run": not execute,
            "mode": request.get("mode"), "value": request.get("value"),
            "topics": request.get("topics")}
        try:
            if execute and not self.options.actions_enabled:
                raise ActionError(403, "changing actions are off in this console "
                                       "(enable them: console.actions.enable=true)")
            try:
                value = request.get("value")
                spec = ResetSpec(str(request.get("mode", "")),
                                 None if value in (None, "") else int(value))
            except (ResetError, ValueError, TypeError) as exc:
                raise ActionError(400, str(exc)) from None
            topics = request.get("topics") or None
            refused, rows = await self.blocking(self._plan, group_id, spec, topics, execute)
        except ActionError as exc:
            entry.update(result="refused" if exc.status in (403, 409) else "error",
                         message=str(exc))
            self.audit.record(entry)
            raise
        entry.update(partitions=rows, result="refused" if refused else
                     ("executed" if execute else "previewed"), message=refused)
        self.audit.record(entry)
        if refused and execute:
            raise ActionError(409, refused)
        return {"group_id": group_id, "dry_run": not execute, "refused": refused,
                "executed": execute and not refused, "partitions": rows}

    def _plan(self, group_id: str, spec: Any, topics: list[str] | None,
              execute: bool) -> tuple[str | None, list[dict[str, Any]]]:
        from samsa.cli.errors import CliError
        from samsa.cli.partitions import resolve_partitions
        from samsa.client.errors import AuthorizationError, KafkaError, error_for
        from samsa.client.offset_reset import ResetError, plan_reset, refusal

        admin = self.admin()
        try:
            desc = admin.describe_groups([group_id])[group_id]
            if desc.error_code:
                raise error_for(desc.error_code, f"describe group {group_id}")
            refused = refusal(group_id, desc.state, len(desc.members))
            committed = admin.list_consumer_group_offsets(group_id)
            tps = resolve_partitions(admin, list(topics)) if topics else sorted(committed)
            if not tps:
                raise ActionError(400, f"group {group_id} has no committed offsets; "
                                       "name the topics to reset")
            plan = plan_reset(admin, spec, tps, committed)
            if execute and refused is None:
                admin.alter_consumer_group_offsets(group_id, plan)
        except (ResetError, CliError) as exc:
            raise ActionError(400, str(exc)) from None
        except AuthorizationError as exc:
            raise ActionError(403, f"refused: {self.options.principal} is not authorized "
                                   f"({exc}); an offset reset needs READ on the group and on "
                                   "its topics, a preview DESCRIBE on both") from None
        except KafkaError as exc:
            raise ActionError(502, str(exc)) from None
        rows = [{"topic": tp.topic, "partition": tp.partition, "current": committed.get(tp),
                 "new": plan[tp]} for tp in tps]
        return refused, rows
