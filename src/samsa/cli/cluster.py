"""``samsa cluster status``: nodes, leases and coordinator shard owners, read from the
cluster's PostgreSQL database; and :func:`cluster_database`, the database opened for the
commands that change it directly (``samsa acls --storage``, ``samsa users --storage``)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from samsa.cli.errors import CliError

if TYPE_CHECKING:
    from samsa.storage.pg.engine import PgEngine


def add_parser(sub: Any) -> None:
    p = sub.add_parser("cluster", help="inspect a cluster over PostgreSQL",
                       description="Inspect a samsa cluster through its database.")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    s = csub.add_parser("status", help="nodes, leases and coordinator shard owners")
    s.add_argument("--storage", required=True, metavar="URL",
                   help="the cluster's database, postgresql://USER@HOST:PORT/DB")
    s.add_argument("--output", choices=["text", "json"], default="text")
    s.set_defaults(run=run_status)


def run_status(args: argparse.Namespace) -> int:
    from samsa.storage.pg.leases import status as fetch_status

    status = asyncio.run(fetch_status(args.storage))
    if args.output == "json":
        print(json.dumps(status, indent=1, default=str))
        return 0
    print(f"{'NODE':>5} {'ADDRESS':<22} {'RACK':<10} {'LIVE':<5} {'EXPIRES-IN-MS':>13} LEASES")
    for n in status["nodes"]:
        print(f"{n['id']:>5} {n['host'] + ':' + str(n['port']):<22} {n['rack'] or '-':<10} "
              f"{'yes' if n['live'] else 'no':<5} {n['expires_in_ms']:>13} {n['leases']}")
    print()
    print(f"{'PARTITION':<32} {'OWNER':>5} {'EPOCH':>5} {'LOG-START':>10} {'LOG-END':>10}")
    for x in status["leases"]:
        owner = "-" if x["owner"] is None else str(x["owner"]) + ("" if x["owner_live"] else "!")
        name = f"{x['topic']}-{x['idx']}"
        if x["topic"] == "__consumer_offsets":
            name = f"shard {x['idx']} ({name})"
        elif x["topic"] == "__transaction_state":
            name = f"txn shard {x['idx']} ({name})"
        print(f"{name:<32} {owner:>5} {x['epoch']:>5} {x['log_start']:>10} {x['log_end']:>10}")
    return 0


@contextmanager
def cluster_database(url: str) -> Iterator[PgEngine]:
    """The cluster's database (its schema made if new) for one command; a one-line
    :class:`CliError` when it cannot be opened."""
    from samsa.storage.pg.engine import PgEngine

    engine = PgEngine(url, node_id=-1)
    try:
        engine.open()
    except Exception as exc:
        engine.close()
        raise CliError(f"--storage: cannot open {url}: {exc}") from None
    try:
        yield engine
    finally:
        engine.close()
