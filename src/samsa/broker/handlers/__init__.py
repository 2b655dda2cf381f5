"""One module per Kafka API; each exports ``API_KEY``, ``VERSIONS`` and ``handle``.

Each module opens with its version notes: what changes at which version it serves.
``handle(ctx)`` is a coroutine returning the response entity, or ``None`` when the API
sends no response (Produce with acks=0). Every API but two builds a typed kio response of
its newest served version, which the broker converts to the request's version with
:func:`samsa.protocol.build.convert`; Fetch and Produce, the hot paths, build theirs from a
mapping for the request's version with ``ctx.respond(...)`` (each says why at its top).
What a request needs (Kafka's operations on resources) each handler asks
:mod:`samsa.broker.access`, and its docstring says.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from samsa.broker.context import RequestContext

Handler = Callable[[RequestContext], Awaitable[Any]]

API_MODULES = (
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "alter_configs",
    "alter_share_group_offsets",
    "alter_user_scram_credentials",
    "api_versions",
    "consumer_group_describe",
    "consumer_group_heartbeat",
    "create_acls",
    "create_partitions",
    "create_topics",
    "delete_acls",
    "delete_groups",
    "delete_share_group_offsets",
    "delete_topics",
    "describe_acls",
    "describe_cluster",
    "describe_configs",
    "describe_groups",
    "describe_producers",
    "describe_transactions",
    "describe_share_group_offsets",
    "describe_user_scram_credentials",
    "end_txn",
    "fetch",
    "find_coordinator",
    "heartbeat",
    "incremental_alter_configs",
    "init_producer_id",
    "join_group",
    "leave_group",
    "list_groups",
    "list_offsets",
    "list_transactions",
    "metadata",
    "offset_commit",
    "offset_delete",
    "offset_fetch",
    "produce",
    "sasl_authenticate",
    "sasl_handshake",
    "share_acknowledge",
    "share_fetch",
    "share_group_describe",
    "share_group_heartbeat",
    "sync_group",
    "txn_offset_commit",
    "write_txn_markers",
)
"""The handler modules of this package, one per API."""

MODULES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"{__name__}.{name}") for name in API_MODULES
)


def registry(extra: tuple[ModuleType, ...] = ()) -> dict[int, tuple[tuple[int, int], Handler]]:
    """API key → ((min version, max version), handler)."""
    return {m.API_KEY: (m.VERSIONS, m.handle) for m in (*MODULES, *extra)}
