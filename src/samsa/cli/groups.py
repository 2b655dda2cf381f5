"""``samsa groups``: list, describe, delete, delete-offsets and watch consumer groups.

``reset-offsets`` lives in :mod:`samsa.cli.offsets`, ``plan`` in :mod:`samsa.cli.plan`,
``history`` in :mod:`samsa.cli.history` and ``lag`` in :mod:`samsa.cli.lag`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from samsa.cli import history, lag, offsets, plan
from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.output import Output, console
from samsa.cli.partitions import format_assignment, resolve_partitions
from samsa.cli.scrape import group_internals
from samsa.coordinator.queries import STATE_NAMES

#: the states ``--state`` accepts: classic and KIP-848 consumer group states
STATES = STATE_NAMES

PARTITION_COLUMNS = [("group", "GROUP"), ("topic", "TOPIC"), ("partition", "PARTITION"),
                     ("current_offset", "CURRENT-OFFSET"), ("log_end_offset", "LOG-END-OFFSET"),
                     ("lag", "LAG"), ("consumer_id", "CONSUMER-ID"), ("host", "HOST"),
                     ("client_id", "CLIENT-ID")]
MEMBER_COLUMNS = [("group", "GROUP"), ("consumer_id", "CONSUMER-ID"),
                  ("group_instance_id", "GROUP-INSTANCE-ID"), ("host", "HOST"),
                  ("client_id", "CLIENT-ID"), ("partitions", "#PARTITIONS")]
STATE_COLUMNS = [("group", "GROUP"), ("coordinator", "COORDINATOR (ID)"),
                 ("protocol_type", "PROTOCOL-TYPE"), ("assignment_strategy", "ASSIGNMENT-STRATEGY"),
                 ("state", "STATE"), ("members", "#MEMBERS")]
#: with --state, for KIP-848 consumer groups
CONSUMER_STATE_COLUMNS = [("group_epoch", "GROUP-EPOCH"),
                          ("assignment_epoch", "ASSIGNMENT-EPOCH")]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("groups", help="inspect and manage consumer groups",
                       description="Inspect and manage consumer groups.")
    cmds = p.add_subparsers(dest="groups_command", required=True, metavar="ACTION")

    c = cmds.add_parser("list", help="list groups")
    c.add_argument("--state", action="append", default=[], metavar="STATE",
                   help=f"only groups in STATE ({', '.join(STATES)}; repeatable)")
    add_client_options(c)
    c.set_defaults(run=run_list)

    c = cmds.add_parser("describe", help="offsets and lag per partition, members or state")
    c.add_argument("group")
    view = c.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="the group's state and protocol")
    c.add_argument("--verbose", action="store_true", help="with --members: assignments")
    c.add_argument("--metrics-url", metavar="URL",
                   help="a samsa broker's metrics endpoint, for generation and leader")
    add_client_options(c)
    c.set_defaults(run=run_describe)

    c = cmds.add_parser("delete", help="delete an empty group and its offsets")
    c.add_argument("group")
    add_client_options(c)
    c.set_defaults(run=run_delete)

    c = cmds.add_parser("delete-offsets", help="delete a group's committed offsets of a topic")
    c.add_argument("group")
    c.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,...]")
    add_client_options(c)
    c.set_defaults(run=run_delete_offsets)

    c = cmds.add_parser("watch", help="live view of a group's state, members and lag")
    c.add_argument("group")
    c.add_argument("--interval", type=float, default=2.0, metavar="SECONDS")
    c.add_argument("--iterations", type=int, default=0, metavar="N",
                   help="stop after N refreshes (default: until Ctrl-C)")
    c.add_argument("--metrics-url", metavar="URL",
                   help="a samsa broker's metrics endpoint, for the generation")
    add_client_options(c)
    c.set_defaults(run=run_watch)

    offsets.add_parser(cmds)
    plan.add_parser(cmds)
    history.add_parser(cmds)
    lag.add_parser(cmds)


def canonical_state(text: str, states: tuple[str, ...] = STATES, kind: str = "") -> str:
    """``text`` as one of ``states`` (any case); a :class:`CliError` naming them
    otherwise (``kind``: e.g. "share group ", in the message)."""
    for state in states:
        if state.lower() == text.lower():
            return state
    raise CliError(f"--state: unknown {kind}state {text!r} (one of {', '.join(states)})", 2)


# ---- list ---------------------------------------------------------------------------------

def run_list(args: argparse.Namespace) -> int:
    states = [canonical_state(s) for s in args.state]
    with open_admin(args) as admin:
        found = admin.list_groups(states)
    rows = [{"group": g, "state": s} for g, s in sorted(found.items())]
    Output(args.output).table(rows, [("group", "GROUP"), ("state", "STATE")],
                              empty="No groups.")
    return 0


# ---- describe -----------------------------------------------------------------------------

def snapshot(admin: Any, group_id: str) -> dict[str, Any]:
    """DescribeGroups + committed offsets + log end offsets of one group."""
    desc = admin.describe_groups([group_id])[group_id]
    if desc.error_code:
        from samsa.client.errors import error_for

        raise error_for(desc.error_code, f"describe group {group_id}")
    # a share group commits no offsets: its start offsets are the share partitions'
    committed = ({} if desc.group_type == "share"
                 else admin.list_consumer_group_offsets(group_id))
    if desc.state == "Dead" and not committed:
        raise CliError(f"group {group_id} does not exist")
    owner = {tp: m for m in desc.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owner))
    existing = admin.list_topics()
    live = [tp for tp in tps if tp.partition < existing.get(tp.topic, 0)]
    ends = {tp: off for tp, (off, _) in admin.list_offsets(
        dict.fromkeys(live, "latest")).items()} if live else {}
    rows = []
    for tp in tps:
        member = owner.get(tp)
        current, end = committed.get(tp), ends.get(tp)
        rows.append({"group": group_id, "topic": tp.topic, "partition": tp.partition,
                     "current_offset": current, "log_end_offset": end,
                     "lag": None if current is None or end is None else end - current,
                     "consumer_id": member.member_id if member else None,
                     "host": member.client_host if member else None,
                     "client_id": member.client_id if member else None})
    members = [{"group": group_id, "consumer_id": m.member_id,
                "group_instance_id": m.group_instance_id, "host": m.client_host,
                "client_id": m.client_id, "partitions": len(m.assignment),
                "topics": list(m.topics),
                "assignment": [[tp.topic, tp.partition] for tp in sorted(m.assignment)],
                **_epochs_of(m, desc.group_type)}
               for m in desc.members]
    snap = {"group": group_id, "state": desc.state, "protocol_type": desc.protocol_type,
            "assignment_strategy": desc.protocol, "group_type": desc.group_type,
            "members": members, "partitions": rows,
            "total_lag": sum(r["lag"] for r in rows if r["lag"] is not None)}
    if desc.group_type in EPOCH_TYPES:
        snap.update(group_epoch=desc.group_epoch, assignment_epoch=desc.assignment_epoch)
    return snap


#: the group types whose groups and members have epochs (KIP-848 consumer, KIP-932 share)
EPOCH_TYPES = ("consumer", "share")


def _epochs_of(member: Any, group_type: str) -> dict[str, Any]:
    """A KIP-848 member's epoch and target assignment, a share group member's epoch
    (nothing for classic members)."""
    if group_type == "share":
        return {"member_epoch": member.member_epoch}
    if group_type != "consumer":
        return {}
    target = member.target_assignment or ()
    return {"member_epoch": member.member_epoch,
            "target_assignment": [[tp.topic, tp.partition] for tp in sorted(target)]}


def run_describe(args: argparse.Namespace) -> int:
    out = Output(args.output)
    with open_admin(args) as admin:
        snap = snapshot(admin, args.group)
        if args.state:
            node, host, port = admin.find_coordinator(args.group)
    if args.state:
        row = {"group": args.group, "coordinator": f"{host}:{port} ({node})",
               "protocol_type": snap["protocol_type"],
               "assignment_strategy": snap["assignment_strategy"], "state": snap["state"],
               "members": len(snap["members"]), "group_type": snap["group_type"]}
        columns = [*STATE_COLUMNS, ("group_type", "TYPE")]
        if snap["group_type"] in EPOCH_TYPES:
            row.update(group_epoch=snap["group_epoch"], assignment_epoch=snap["assignment_epoch"])
            columns += CONSUMER_STATE_COLUMNS
        if args.metrics_url:
            row.update(group_internals(args.metrics_url, args.group, args.timeout))
            columns += [("generation", "GENERATION"), ("leader", "LEADER")]
        if out.json:
            out.data(row)
        else:
            out.table([row], columns)
        return 0
    if args.members:
        rows = snap["members"]
        columns = list(MEMBER_COLUMNS)
        consumer = snap["group_type"] == "consumer"
        if snap["group_type"] in EPOCH_TYPES:
            columns.append(("member_epoch", "MEMBER-EPOCH"))
        if args.verbose:
            rows = [{**r, "assignment_text": format_assignment(r["assignment"]),
                     "target_text": format_assignment(r.get("target_assignment", []))}
                    for r in rows]
            columns.append(("assignment_text", "ASSIGNMENT"))
            if consumer:
                columns.append(("target_text", "TARGET-ASSIGNMENT"))
        if out.json:
            out.data([{k: v for k, v in r.items() if k not in ("assignment_text", "target_text")}
                      for r in rows])
        else:
            out.table(rows, columns, empty=f"Consumer group '{args.group}' has no active members.")
        return 0
    if out.json:
        out.data(snap["partitions"])
        return 0
    if not snap["members"]:
        out.message(f"Consumer group '{args.group}' has no active members.")
    out.table(snap["partitions"], PARTITION_COLUMNS)
    return 0


# ---- delete -------------------------------------------------------------------------------

def run_delete(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        admin.delete_groups([args.group])
    out = Output(args.output)
    if out.json:
        out.data({"group": args.group, "deleted": True})
    else:
        out.message(f"Deleted group {args.group}.")
    return 0


def run_delete_offsets(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        tps = resolve_partitions(admin, args.topic)
        admin.delete_consumer_group_offsets(args.group, tps)
    rows = [{"topic": tp.topic, "partition": tp.partition, "status": "deleted"} for tp in tps]
    Output(args.output).table(rows, [("topic", "TOPIC"), ("partition", "PARTITION"),
                                     ("status", "STATUS")])
    return 0


# ---- watch --------------------------------------------------------------------------------

def render(snap: dict[str, Any]) -> Any:
    """A rich renderable of one snapshot: headline, members, partitions."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = (f"GROUP {snap['group']}  STATE {snap['state']}  "
            f"STRATEGY {snap['assignment_strategy'] or '-'}  MEMBERS {len(snap['members'])}  "
            f"TOTAL-LAG {snap['total_lag']}")
    if snap.get("generation") is not None:
        head += f"  GENERATION {snap['generation']}"
    parts: list[Any] = [Text(head, style="bold"), Text(time.strftime("%H:%M:%S"))]
    members = Table(box=None, pad_edge=False)
    for header in ("CONSUMER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"):
        members.add_column(header, no_wrap=True)
    for m in snap["members"]:
        members.add_row(Text(m["consumer_id"]), Text(m["host"]), Text(m["client_id"]),
                        Text(format_assignment(m["assignment"]) or "-"))
    lag = Table(box=None, pad_edge=False)
    for _, header in PARTITION_COLUMNS[1:7]:
        lag.add_column(header, no_wrap=True)
    for r in snap["partitions"]:
        lag.add_row(*(Text("-" if r[k] is None else str(r[k])) for k, _ in PARTITION_COLUMNS[1:7]))
    parts += [members, lag]
    return Group(*parts)


def run_watch(args: argparse.Namespace) -> int:
    import json

    from rich.live import Live

    out = Output(args.output)
    live_view = not out.json and sys.stdout.isatty()
    with open_admin(args) as admin:
        live = Live(console=console(), auto_refresh=False) if live_view else None
        if live is not None:
            live.start()
        try:
            n = 0
            while True:
                try:
                    snap = snapshot(admin, args.group)
                except CliError:
                    if n == 0:
                        raise
                    snap = {"group": args.group, "state": "Dead", "assignment_strategy": "",
                            "members": [], "partitions": [], "total_lag": 0}
                if args.metrics_url:
                    snap["generation"] = group_internals(args.metrics_url, args.group,
                                                         args.timeout)["generation"]
                n += 1
                if out.json:
                    print(json.dumps(snap), flush=True)
                elif live is not None:
                    live.update(render(snap), refresh=True)
                else:
                    console().print(render(snap))
                if args.iterations and n >= args.iterations:
                    return 0
                time.sleep(args.interval)
        finally:
            if live is not None:
                live.stop()
