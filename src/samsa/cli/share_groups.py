"""``samsa share-groups``: list, describe, reset-offsets, delete-offsets and delete share
groups (KIP-932), as Kafka's ``kafka-share-groups.sh``.

``describe`` (a group, or ``--all-groups``) shows share partitions (the default,
``--offsets``: start offset and lag, from DescribeShareGroupOffsets v1, KIP-1226), members
and their assignments (``--members``) or state (``--state``). In-flight, acquired and
archived record counts are no field of any Kafka API: they are read from the Prometheus
endpoint of the broker that leads each partition (``--metrics-url``, repeatable: each
partition's counts are on its leader; the ``samsa_share_partition_records`` gauge).

``reset-offsets`` plans (the default, ``--dry-run``) or sets (``--execute``) new start
offsets with AlterShareGroupOffsets; ``delete`` deletes a share group with DeleteGroups.
Both refuse a group that has members, as Kafka does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.groups import canonical_state
from samsa.cli.offsets import parse_datetime
from samsa.cli.output import Output
from samsa.cli.partitions import format_assignment, resolve_partitions
from samsa.cli.scrape import samples
from samsa.client.offset_reset import ResetError, ResetSpec, plan_reset

#: states of a share group (Kafka's ShareGroupState)
STATES = ("Empty", "Stable", "Dead")

OFFSET_COLUMNS = [("group", "GROUP"), ("topic", "TOPIC"), ("partition", "PARTITION"),
                  ("start_offset", "START-OFFSET"), ("lag", "LAG")]
RECORD_COLUMNS = [("in_flight", "IN-FLIGHT"), ("acquired", "ACQUIRED"),
                  ("archived", "ARCHIVED")]
MEMBER_COLUMNS = [("group", "GROUP"), ("consumer_id", "CONSUMER-ID"), ("host", "HOST"),
                  ("client_id", "CLIENT-ID"), ("partitions", "#PARTITIONS"),
                  ("assignment_text", "ASSIGNMENT")]
STATE_COLUMNS = [("group", "GROUP"), ("coordinator", "COORDINATOR (ID)"), ("state", "STATE"),
                 ("members", "#MEMBERS")]
RESET_COLUMNS = [("group", "GROUP"), ("topic", "TOPIC"), ("partition", "PARTITION"),
                 ("start_offset", "START-OFFSET"), ("new_offset", "NEW-OFFSET")]
#: the metrics the record counts come from (the first by its ``state`` label)
RECORDS_METRIC = "samsa_share_partition_records"
IN_FLIGHT_METRIC = "samsa_share_partition_in_flight_records"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("share-groups", help="inspect and manage share groups (KIP-932)",
                       description="Inspect and manage share groups (kafka-share-groups).")
    cmds = p.add_subparsers(dest="share_groups_command", required=True, metavar="ACTION")

    c = cmds.add_parser("list", help="list share groups")
    c.add_argument("--state", action="append", default=[], metavar="STATE",
                   help=f"only groups in STATE ({', '.join(STATES)}; repeatable)")
    add_client_options(c)
    c.set_defaults(run=run_list)

    c = cmds.add_parser("describe", help="start offsets and lag, members, or state")
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("group", nargs="?")
    which.add_argument("--all-groups", action="store_true", help="every share group")
    view = c.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true",
                      help="one row per share partition (the default)")
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="the group's state")
    c.add_argument("--verbose", action="store_true",
                   help="more columns: leader epochs, member epochs, group epochs")
    c.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                   help="a samsa broker's metrics endpoint: in-flight, acquired and "
                        "archived records of the share partitions it leads (repeatable)")
    add_client_options(c)
    c.set_defaults(run=run_describe)

    c = cmds.add_parser("reset-offsets", help="move a share group's start offsets",
                        description="Plan (default) or set new share-partition start "
                                    "offsets; the group must have no members.")
    c.add_argument("--group", required=True)
    scope = c.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,...]")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has share state for")
    mode = c.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="each partition's log start")
    mode.add_argument("--to-latest", action="store_true", help="each partition's log end")
    mode.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    mode.add_argument("--to-datetime", metavar="ISO",
                      help="e.g. 2026-11-21T08:00:00Z (no zone: local time)")
    act = c.add_mutually_exclusive_group()
    act.add_argument("--dry-run", action="store_true", help="show the plan (the default)")
    act.add_argument("--execute", action="store_true", help="set the new start offsets")
    add_client_options(c)
    c.set_defaults(run=run_reset)

    c = cmds.add_parser("delete-offsets", help="forget a share group's state of topics")
    c.add_argument("group")
    c.add_argument("--topic", action="append", required=True, metavar="TOPIC")
    add_client_options(c)
    c.set_defaults(run=run_delete_offsets)

    c = cmds.add_parser("delete", help="delete a share group that has no members")
    c.add_argument("group")
    add_client_options(c)
    c.set_defaults(run=run_delete)


def describe_group(admin: Any, group_id: str, missing_ok: bool = False) -> Any:
    """The share group's description; a clear error when the group is of another type or
    (unless ``missing_ok``: then None) does not exist."""
    from samsa.client.errors import KafkaError

    try:
        return admin.describe_share_group(group_id)
    except KafkaError as exc:
        if exc.code != 69:  # GROUP_ID_NOT_FOUND: no such group, or not a share group
            raise
    other = next((g for g in admin.list_group_listings() if g.group_id == group_id), None)
    if other is not None:
        raise CliError(f"group {group_id} is a {other.group_type} group, not a share group")
    if missing_ok:
        return None
    raise CliError(f"share group {group_id} does not exist")


# ---- list ---------------------------------------------------------------------------------

def run_list(args: argparse.Namespace) -> int:
    states = [canonical_state(s, STATES, "share group ") for s in args.state]
    with open_admin(args) as admin:
        found = admin.list_group_listings(types=["share"], states=states)
    rows = [{"group": g.group_id, "state": g.state} for g in found]
    Output(args.output).table(rows, [("group", "GROUP"), ("state", "STATE")],
                              empty="No share groups.")
    return 0


# ---- describe -----------------------------------------------------------------------------

def record_counts(urls: list[str], group_id: str,
                  timeout: float) -> dict[tuple[str, int], dict[str, int]]:
    """(topic, partition) -> {"in_flight", "acquired", "archived", ...} from brokers'
    metrics."""
    out: dict[tuple[str, int], dict[str, int]] = {}
    for url in urls:
        for sample in samples(url, timeout):
            labels = sample.labels
            if (sample.name not in (RECORDS_METRIC, IN_FLIGHT_METRIC)
                    or labels.get("group") != group_id):
                continue
            key = (labels["topic"], int(labels["partition"]))
            name = labels["state"] if sample.name == RECORDS_METRIC else "in_flight"
            out.setdefault(key, {})[name] = int(sample.value)
    return out


def offset_rows(admin: Any, group_id: str, urls: list[str],
                timeout: float) -> list[dict[str, Any]]:
    """One row per share partition: start offset, lag, leader epoch (and the record
    counts when ``urls`` are given)."""
    offsets = admin.describe_share_group_offsets(group_id)
    counts = record_counts(urls, group_id, timeout) if urls else {}
    rows = []
    for tp, o in offsets.items():
        row: dict[str, Any] = {
            "group": group_id, "topic": tp.topic, "partition": tp.partition,
            "start_offset": None if o.start_offset < 0 else o.start_offset,
            "lag": None if o.lag < 0 else o.lag,
            "leader_epoch": None if o.leader_epoch < 0 else o.leader_epoch}
        if urls:
            found = counts.get((tp.topic, tp.partition), {})
            row.update({k: found.get(k) for k, _ in RECORD_COLUMNS})
        rows.append(row)
    return rows


def run_describe(args: argparse.Namespace) -> int:
    out = Output(args.output)
    with open_admin(args) as admin:
        if args.all_groups:
            names = sorted(g.group_id for g in admin.list_group_listings(types=["share"]))
        else:
            names = [args.group]
        described = [(name, describe_group(admin, name)) for name in names]
        if args.state:
            state_rows = []
            for name, desc in described:
                node, host, port = admin.find_coordinator(name)
                state_rows.append({
                    "group": name, "coordinator": f"{host}:{port} ({node})",
                    "state": desc.state, "members": len(desc.members),
                    "group_epoch": desc.group_epoch,
                    "assignment_epoch": desc.assignment_epoch})
            columns = STATE_COLUMNS + ([("group_epoch", "GROUP-EPOCH"),
                                        ("assignment_epoch", "ASSIGNMENT-EPOCH")]
                                       if args.verbose else [])
            if out.json:
                out.data(state_rows if args.all_groups else state_rows[0])
            else:
                out.table(state_rows, columns, empty="No share groups.")
            return 0
        if args.members:
            rows = [{"group": name, "consumer_id": m.member_id, "host": m.client_host,
                     "client_id": m.client_id, "partitions": len(m.assignment),
                     "member_epoch": m.member_epoch, "topics": list(m.topics),
                     "assignment": [[tp.topic, tp.partition] for tp in m.assignment]}
                    for name, desc in described for m in desc.members]
            if out.json:
                out.data(rows)
                return 0
            table = [{**r, "assignment_text": format_assignment(r["assignment"])}
                     for r in rows]
            columns = MEMBER_COLUMNS + ([("member_epoch", "MEMBER-EPOCH")]
                                        if args.verbose else [])
            empty = ("No share group has active members." if args.all_groups
                     else f"Share group '{args.group}' has no active members.")
            out.table(table, columns, empty=empty)
            return 0
        rows = [row for name, _ in described
                for row in offset_rows(admin, name, args.metrics_url, args.timeout)]
    if out.json:
        out.data(rows)
        return 0
    columns = list(OFFSET_COLUMNS)
    if args.verbose:
        columns.append(("leader_epoch", "LEADER-EPOCH"))
    if args.metrics_url:
        columns += RECORD_COLUMNS
    for name, desc in described:
        if not desc.members:
            out.message(f"Share group '{name}' has no active members.")
    empty = ("No share groups." if args.all_groups and not described else
             "No share partitions." if args.all_groups else
             f"Share group '{args.group}' has no share partitions.")
    out.table(rows, columns, empty=empty)
    return 0


# ---- reset-offsets ------------------------------------------------------------------------

def reset_spec(args: argparse.Namespace) -> ResetSpec:
    """The reset the options ask for (a bad time fails here, before any change)."""
    if args.to_earliest:
        return ResetSpec("earliest")
    if args.to_latest:
        return ResetSpec("latest")
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise CliError(f"--to-offset: must be at least 0, got {args.to_offset}", 2)
        return ResetSpec("offset", args.to_offset)
    return ResetSpec("timestamp", parse_datetime(args.to_datetime))


def run_reset(args: argparse.Namespace) -> int:
    spec = reset_spec(args)
    with open_admin(args) as admin:
        # a share group that does not exist yet may be given its start offsets, as Kafka
        desc = describe_group(admin, args.group, missing_ok=True)
        if desc is not None and desc.members:
            raise CliError(f"cannot reset offsets of share group {args.group}: it has "
                           f"{len(desc.members)} active member(s) (state {desc.state}); "
                           "stop its consumers first")
        current = {} if desc is None else {
            tp: o.start_offset
            for tp, o in admin.describe_share_group_offsets(args.group).items()}
        if args.all_topics:
            tps = sorted(current)
            if not tps:
                raise CliError(f"share group {args.group} has no share partitions; name the "
                               "partitions with --topic")
        else:
            tps = resolve_partitions(admin, args.topic)
        try:
            plan = plan_reset(admin, spec, tps, current)
        except ResetError as exc:
            raise CliError(str(exc)) from None
        if args.execute:
            admin.alter_share_group_offsets(args.group, plan)
    rows = [{"group": args.group, "topic": tp.topic, "partition": tp.partition,
             "start_offset": current.get(tp) if current.get(tp, -1) >= 0 else None,
             "new_offset": plan[tp]} for tp in tps]
    Output(args.output).table(rows, RESET_COLUMNS)
    if not args.execute:
        print("Dry run: nothing changed (add --execute to set these start offsets).",
              file=sys.stderr)
    return 0


# ---- delete -------------------------------------------------------------------------------

def run_delete_offsets(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        describe_group(admin, args.group)
        known = admin.list_topics()
        missing = [t for t in args.topic if t not in known]
        if missing:
            raise CliError(f"topic {missing[0]} does not exist")
        admin.delete_share_group_offsets(args.group, args.topic)
    Output(args.output).table([{"topic": t, "status": "deleted"} for t in args.topic],
                              [("topic", "TOPIC"), ("status", "STATUS")])
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from samsa.client.errors import KafkaError

    with open_admin(args) as admin:
        desc = describe_group(admin, args.group)
        try:
            admin.delete_groups([args.group])
        except KafkaError as exc:
            if exc.code == 68:  # NON_EMPTY_GROUP
                raise CliError(f"share group {args.group} is not empty: it has "
                               f"{len(desc.members)} active member(s) (GroupNotEmptyException)"
                               ) from None
            raise
    out = Output(args.output)
    if out.json:
        out.data({"group": args.group, "deleted": True})
    else:
        out.message(f"Deleted share group {args.group}.")
    return 0

