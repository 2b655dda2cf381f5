"""``samsa groups history GROUP``: a group's rebalance timeline in the terminal.

The history is read where the coordinator keeps it: the group's ``__consumer_offsets``
partition, through the Kafka protocol (a consumer without a group reads the partition and
keeps the last record of each history slot), so it works against any samsa broker or
cluster with nothing but ``--bootstrap-server``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from samsa import TopicPartition
from samsa.cli.connect import add_client_options, check_reachable
from samsa.cli.errors import CliError
from samsa.cli.output import Output, console
from samsa.coordinator.hashing import partition_for
from samsa.coordinator.history import HistoryEvent, HistoryKey, codec

OFFSETS_TOPIC = "__consumer_offsets"


def add_parser(cmds: Any) -> None:
    c = cmds.add_parser("history", help="a group's rebalance history (samsa brokers)",
                        description="Why and when the group rebalanced: each generation or "
                                    "epoch bump with its cause, its phases and who held "
                                    "each phase up.")
    c.add_argument("group")
    c.add_argument("--last", type=int, default=0, metavar="N", help="only the last N events")
    add_client_options(c)
    c.set_defaults(run=run)


def read_history(bootstrap: str, group_id: str, timeout: float) -> list[HistoryEvent]:
    """The group's history records from its ``__consumer_offsets`` partition."""
    from samsa.client import Consumer

    consumer = Consumer(bootstrap_servers=bootstrap, client_id="samsa-cli-history",
                        enable_auto_commit=False, request_timeout_ms=int(timeout * 1000))
    try:
        count = len(consumer.partitions_for_topic(OFFSETS_TOPIC))
        if not count:
            raise CliError(f"this cluster has no {OFFSETS_TOPIC} topic")
        tp = TopicPartition(OFFSETS_TOPIC, partition_for(group_id, count))
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        slots: dict[int, HistoryEvent] = {}
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise CliError(f"timed out reading {tp.topic}-{tp.partition}")
            for r in consumer.poll(timeout_ms=500):
                if r.key is None:
                    continue
                key = codec.decode_key(r.key)
                if not isinstance(key, HistoryKey) or key.group != group_id:
                    continue
                if r.value is None:
                    slots.pop(key.slot, None)
                else:
                    slots[key.slot] = codec.decode_value(r.value)
        return sorted(slots.values(), key=lambda e: e.seq)
    finally:
        consumer.close()


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value} ms" if value < 1000 else f"{value / 1000:.1f} s"


def render(events: list[HistoryEvent]) -> Any:
    """A rich renderable: one block per event, phases and who held them up."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    for e in events:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.at_ms / 1000))
        head = Text(f"{when}.{e.at_ms % 1000:03d}  ", style="dim")
        head.append(e.cause.value, style="bold")
        if e.member_id:
            head.append(f"  {e.member_id}")
        if e.bumps:
            after = e.epoch_after if e.epoch_after >= 0 else "…"
            head.append(f"  epoch {e.epoch_before} -> {after}")
        head.append(f"  [{e.outcome.value}]", style="green" if e.outcome.value == "stable"
                    else "yellow")
        if e.bumps and e.ended_ms is not None:
            head.append(f"  {_ms(e.ended_ms - e.at_ms)}")
        parts.append(head)
        if e.reason:
            parts.append(Text(f"    reason: {e.reason}", style="dim"))
        if e.members:
            parts.append(Text(f"    also: {', '.join(e.members)}", style="dim"))
        previous = e.at_ms
        for p in e.phases:
            line = f"    {p.name:<20} +{_ms(p.at_ms - previous)}"
            if p.held_by:
                line += f"  held up by {', '.join(p.held_by)}"
            if p.note:
                line += f" ({p.note})"
            parts.append(Text(line))
            previous = p.at_ms
        if e.detail:
            parts.append(Text("    " + " ".join(f"{k}={v}" for k, v in e.detail), style="dim"))
    return Group(*parts)


def run(args: argparse.Namespace) -> int:
    from samsa.console.views import event_json

    check_reachable(args.bootstrap_server, args.timeout)
    events = read_history(args.bootstrap_server, args.group, args.timeout)
    if args.last:
        events = events[-args.last:]
    out = Output(args.output)
    if out.json:
        out.data([event_json(e) for e in events])
    elif not events:
        out.message(f"No rebalance history for group '{args.group}' (the group is unknown, or "
                    "its coordinator keeps none: group.history.max.events=0, or not samsa).")
    else:
        console().print(render(events))
    return 0
