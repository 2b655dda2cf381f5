"""``samsa transactions list | describe | find-hanging | abort``: transactions as Kafka's
``kafka-transactions.sh`` shows and repairs them (KIP-664).

``list`` shows every transactional id with its producer id and state (``--state`` keeps
some states); ``describe`` shows one id's producer, epoch, timeout, the start of its open
transaction and the partitions it wrote to. ``find-hanging`` lists open transactions of
partitions (DescribeProducers) older than ``--max-transaction-timeout`` minutes that their
coordinator does not know as ongoing there: such a transaction holds the last stable offset
back, and read_committed consumers with it, until ``abort`` writes an abort marker
(WriteTxnMarkers, CLUSTER_ACTION) for it, found by ``--start-offset`` or named by
``--producer-id``, ``--producer-epoch`` and ``--coordinator-epoch``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from samsa import TopicPartition
from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.output import Output
from samsa.client.admin import Admin, ProducerState
from samsa.client.errors import KafkaError


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
    c = cmds.add_parser("find-hanging", help="open transactions their coordinator does not "
                                             "know (they hold read_committed consumers back)")
    c.add_argument("--topic", help="the partitions of this topic")
    c.add_argument("--partition", type=int, help="only this partition (with --topic)")
    c.add_argument("--broker-id", type=int,
                   help="the partitions this broker leads (instead of --topic)")
    c.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="transactions open longer than this may hang (Kafka's "
                        "transaction.max.timeout.ms; default 15)")
    add_client_options(c)
    c.set_defaults(run=run_find_hanging)
    c = cmds.add_parser("abort", help="abort a hanging transaction of a partition")
    c.add_argument("--topic", required=True)
    c.add_argument("--partition", type=int, required=True)
    c.add_argument("--start-offset", type=int,
                   help="the first offset of the open transaction (find-hanging shows it)")
    c.add_argument("--producer-id", type=int)
    c.add_argument("--producer-epoch", type=int)
    c.add_argument("--coordinator-epoch", type=int)
    add_client_options(c)
    c.set_defaults(run=run_abort)


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


def _partitions(admin: Admin, args: argparse.Namespace) -> list[TopicPartition]:
    if (args.topic is None) == (args.broker_id is None):
        raise CliError("find-hanging needs --topic or --broker-id (one of them)")
    if args.partition is not None and args.topic is None:
        raise CliError("--partition needs --topic")
    if args.topic is not None:
        try:  # internal topics too: __consumer_offsets holds transactional offsets
            count = len(admin.describe_topics([args.topic])[args.topic])
        except KafkaError:
            raise CliError(f"topic {args.topic} does not exist") from None
        if args.partition is not None:
            if not 0 <= args.partition < count:
                raise CliError(f"topic {args.topic} has no partition {args.partition}")
            return [TopicPartition(args.topic, args.partition)]
        return [TopicPartition(args.topic, p) for p in range(count)]
    led = admin.describe_topics(admin.list_topics())
    return sorted(TopicPartition(t, p) for t, leaders in led.items()
                  for p, leader in leaders.items() if leader == args.broker_id)


def _hanging(admin: Admin, open_txns: list[tuple[TopicPartition, ProducerState]]
             ) -> list[tuple[TopicPartition, ProducerState]]:
    """The open transactions whose producer's coordinator has no ongoing transaction with
    that producer id and epoch on that partition (Kafka's FindHangingTransactions)."""
    if not open_txns:
        return []
    ids = {t.producer_id: t.transactional_id for t in admin.list_transactions()}
    out = []
    for tp, state in open_txns:
        tid = ids.get(state.producer_id)
        if tid is not None:
            try:
                d = admin.describe_transactions([tid])[tid]
            except KafkaError:
                d = None
            if d is not None and d.state == "Ongoing" and d.producer_id == state.producer_id \
                    and d.producer_epoch == state.producer_epoch and tp in d.partitions:
                continue  # its coordinator will end it (or time it out)
        out.append((tp, state))
    return out


def run_find_hanging(args: argparse.Namespace) -> int:
    now = int(time.time() * 1000)
    limit_ms = args.max_transaction_timeout * 60_000
    with open_admin(args) as admin:
        tps = _partitions(admin, args)
        described = admin.describe_producers(tps)
        candidates = [(tp, s) for tp in tps for s in described[tp]
                      if s.current_transaction_start_offset is not None
                      and now - s.last_timestamp >= limit_ms]
        hanging = _hanging(admin, candidates)
    Output(args.output).table(
        [{"topic": tp.topic, "partition": tp.partition, "producer_id": s.producer_id,
          "producer_epoch": s.producer_epoch, "coordinator_epoch": s.coordinator_epoch,
          "start_offset": s.current_transaction_start_offset,
          "last_timestamp": s.last_timestamp,
          "duration_min": max(0, now - s.last_timestamp) // 60_000}
         for tp, s in hanging],
        [("topic", "TOPIC"), ("partition", "PARTITION"), ("producer_id", "PRODUCER ID"),
         ("producer_epoch", "PRODUCER EPOCH"), ("coordinator_epoch", "COORDINATOR EPOCH"),
         ("start_offset", "START OFFSET"), ("last_timestamp", "LAST TIMESTAMP"),
         ("duration_min", "DURATION (MIN)")], empty="No hanging transactions.")
    return 0


def run_abort(args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    named = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is not None:
        if any(v is not None for v in named):
            raise CliError("give --start-offset, or --producer-id, --producer-epoch and "
                           "--coordinator-epoch, not both")
    elif any(v is None for v in named):
        raise CliError("abort needs --start-offset, or all of --producer-id, "
                       "--producer-epoch and --coordinator-epoch")
    with open_admin(args) as admin:
        if args.start_offset is not None:
            found = [s for s in admin.describe_producers([tp])[tp]
                     if s.current_transaction_start_offset == args.start_offset]
            if not found:
                raise CliError(f"no open transaction starts at offset {args.start_offset} "
                               f"of {tp.topic}-{tp.partition}")
            s = found[0]
            named = (s.producer_id, s.producer_epoch, max(0, s.coordinator_epoch))
        pid, epoch, coordinator_epoch = named
        admin.abort_transaction(tp, pid, epoch, coordinator_epoch)
    Output(args.output).table(
        [{"topic": tp.topic, "partition": tp.partition, "producer_id": pid,
          "producer_epoch": epoch, "coordinator_epoch": coordinator_epoch,
          "result": "aborted"}],
        [("topic", "TOPIC"), ("partition", "PARTITION"), ("producer_id", "PRODUCER ID"),
         ("producer_epoch", "PRODUCER EPOCH"), ("coordinator_epoch", "COORDINATOR EPOCH"),
         ("result", "RESULT")])
    return 0
