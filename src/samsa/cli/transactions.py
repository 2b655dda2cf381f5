"""``samsa transactions list | describe``: the transaction coordinator's view (KIP-664), as
Kafka's ``kafka-transactions.sh list`` and ``describe``.

``list`` shows every transactional id with its producer id and state (``--state`` keeps
some states); ``describe`` shows one id's producer, epoch, timeout, the start of its open
transaction and the partitions it wrote to.
"""

from __future__ import annotations

import argparse
from typing import Any

from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.output import Output


def add_parser(sub: Any) -> None:
    p = sub.add_parser("transactions", help="list and describe transactions (kafka-transactions)",
                       description="The transactional ids a cluster coordinates (KIP-664).")
    cmds = p.add_subparsers(dest="transactions_command", required=True, metavar="ACTION")
    c = cmds.add_parser("list", help="every transactional id, its producer id and state")
    c.add_argument("--state", action="append", default=[],
                   help="only ids in this state (Empty, Ongoing, CompleteCommit, ...); "
                        "repeatable")
    add_client_options(c)
    c.set_defaults(run=run_list)
    c = cmds.add_parser("describe", help="one transactional id's transaction")
    c.add_argument("transactional_id")
    add_client_options(c)
    c.set_defaults(run=run_describe)


def run_list(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        found = admin.list_transactions(args.state)
    Output(args.output).table(
        [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
          "state": t.state} for t in found],
        [("transactional_id", "TRANSACTIONAL ID"), ("producer_id", "PRODUCER ID"),
         ("state", "STATE")], empty="No transactional ids.")
    return 0


def run_describe(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    with open_admin(args) as admin:
        d = admin.describe_transactions([tid])[tid]
    Output(args.output).table([{
        "transactional_id": tid, "producer_id": d.producer_id, "epoch": d.producer_epoch,
        "state": d.state, "timeout_ms": d.timeout_ms, "start_ms": d.start_ms,
        "partitions": ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions)}],
        [("transactional_id", "TRANSACTIONAL ID"), ("producer_id", "PRODUCER ID"),
         ("epoch", "EPOCH"), ("state", "STATE"), ("timeout_ms", "TIMEOUT MS"),
         ("start_ms", "START MS"), ("partitions", "PARTITIONS")])
    return 0
