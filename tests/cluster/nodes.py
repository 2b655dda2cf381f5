"""Cluster nodes for tests: ``samsa serve --storage postgresql://...`` processes."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg

from tests.brokerproc import BrokerProcess

FAST = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "6",
    # Long enough that a node starved of CPU on a loaded machine keeps its leases: a killed
    # node is found dead at once anyway (its advisory lock goes with its connections); the
    # test pausing a node sets a short TTL of its own.
    "cluster.lease.ttl.ms": "10000",
}


class ClusterNodeProcess(BrokerProcess):
    """One node; ``node_id`` names it in Metadata."""

    def __init__(self, root: Path, node_id: int, dsn: str,
                 config: dict[str, str] | None = None) -> None:
        merged = {**FAST, "node.id": str(node_id), **(config or {})}
        super().__init__(root / f"node{node_id}", merged, extra_args=["--storage", dsn])
        self.node_id = node_id

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)


def query(dsn: str, sql: str, *args: Any) -> list[Any]:
    """Rows of one query against the cluster's database."""

    async def run() -> list[Any]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def leases(dsn: str, topic: str | None = None) -> dict[tuple[str, int], tuple[int | None, int]]:
    """(topic, partition) -> (owner, epoch)."""
    rows = query(dsn, "SELECT topic, idx, owner, epoch FROM samsa_partitions")
    return {(r["topic"], r["idx"]): (r["owner"], r["epoch"]) for r in rows
            if topic is None or r["topic"] == topic}


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def all_owned(dsn: str, live: set[int]) -> bool:
    """Every partition has a live owner."""
    found = leases(dsn)
    return bool(found) and all(owner in live for owner, _ in found.values())
