"""``samsa groups reset-offsets``: plan, export and apply new committed offsets.

As ``kafka-consumer-groups.sh --reset-offsets``: the default is a dry run that prints the
plan; ``--execute`` commits it. A group with active members is refused (their commits
would overwrite the reset). Offsets are clamped to each partition's [earliest, latest].
The planning is :mod:`samsa.client.offset_reset`'s, shared with the console.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import sys
import time
from typing import Any

from samsa import TopicPartition
from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.output import Output
from samsa.cli.partitions import resolve_partitions
from samsa.client.offset_reset import ResetError, ResetSpec, plan_reset, refusal

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$",
                       re.IGNORECASE)
COLUMNS = [("group", "GROUP"), ("topic", "TOPIC"), ("partition", "PARTITION"),
           ("current_offset", "CURRENT-OFFSET"), ("new_offset", "NEW-OFFSET")]


def add_parser(cmds: Any) -> None:
    c = cmds.add_parser("reset-offsets", help="move a group's committed offsets",
                        description="Plan (default) or apply new committed offsets.")
    c.add_argument("--group", required=True)
    scope = c.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,...]")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has committed offsets for")
    mode = c.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="each partition's log start")
    mode.add_argument("--to-latest", action="store_true", help="each partition's log end")
    mode.add_argument("--to-current", action="store_true",
                      help="the committed offset (log end where none)")
    mode.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    mode.add_argument("--shift-by", type=int, metavar="N",
                      help="committed offset + N (negative: back; clamped to the log)")
    mode.add_argument("--to-datetime", metavar="ISO",
                      help="e.g. 2026-11-21T08:00:00Z (no zone: local time)")
    mode.add_argument("--by-duration", metavar="PnDTnHnMnS",
                      help="back from now, e.g. PT30M or P1DT2H")
    act = c.add_mutually_exclusive_group()
    act.add_argument("--dry-run", action="store_true", help="show the plan (the default)")
    act.add_argument("--execute", action="store_true", help="commit the new offsets")
    c.add_argument("--export", action="store_true",
                   help="print the plan as CSV (topic,partition,offset)")
    add_client_options(c)
    c.set_defaults(run=run)


def parse_duration(text: str) -> float:
    """ISO-8601 duration (days, hours, minutes, seconds) -> seconds."""
    m = _DURATION.match(text)
    if not m or not any(m.groups()) or text.upper().endswith("T"):
        raise CliError(f"--by-duration: expected PnDTnHnMnS (e.g. PT30M), got {text!r}", 2)
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_datetime(text: str) -> int:
    """ISO-8601 date-time -> epoch milliseconds (a naive time is local, as in Kafka)."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--to-datetime: expected an ISO-8601 time, got {text!r}", 2) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def target_time(args: argparse.Namespace) -> int | None:
    if args.to_datetime is not None:
        return parse_datetime(args.to_datetime)
    if args.by_duration is not None:
        return int((time.time() - parse_duration(args.by_duration)) * 1000)
    return None


def spec_of(args: argparse.Namespace) -> ResetSpec:
    """The reset the options ask for."""
    when = target_time(args)  # parse before any lookups
    if args.to_earliest:
        return ResetSpec("earliest")
    if args.to_latest:
        return ResetSpec("latest")
    if args.to_current:
        return ResetSpec("current")
    if args.to_offset is not None:
        return ResetSpec("offset", args.to_offset)
    if args.shift_by is not None:
        return ResetSpec("shift", args.shift_by)
    return ResetSpec("timestamp", when)


def new_offsets(args: argparse.Namespace, admin: Any, tps: list[TopicPartition],
                committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The offset each partition is reset to (clamped to the log's range)."""
    try:
        return plan_reset(admin, spec_of(args), tps, committed)
    except ResetError as exc:
        raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:

    target_time(args)  # bad times fail before connecting
    with open_admin(args) as admin:
        desc = admin.describe_groups([args.group])[args.group]
        refused = refusal(args.group, desc.state, len(desc.members))
        if refused:
            raise CliError(refused)
        committed = admin.list_consumer_group_offsets(args.group)
        if args.all_topics:
            tps = sorted(committed)
            if not tps:
                raise CliError(f"group {args.group} has no committed offsets; "
                               "name the partitions with --topic")
        else:
            tps = resolve_partitions(admin, args.topic)
        plan = new_offsets(args, admin, tps, committed)
        if args.execute:
            admin.alter_consumer_group_offsets(args.group, plan)
    rows = [{"group": args.group, "topic": tp.topic, "partition": tp.partition,
             "current_offset": committed.get(tp), "new_offset": plan[tp]} for tp in tps]
    out = Output(args.output)
    if args.export:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        for r in rows:
            writer.writerow([r["topic"], r["partition"], r["new_offset"]])
    else:
        out.table(rows, COLUMNS)
    if not args.execute:
        print("Dry run: nothing changed (add --execute to commit these offsets).",
              file=sys.stderr)
    return 0
