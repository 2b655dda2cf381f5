"""``samsa topics``: list, create, describe, delete, add partitions and alter configs."""

from __future__ import annotations

import argparse
from typing import Any

from samsa import TopicPartition
from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.output import Output


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="list, create, describe and delete topics",
                       description="Manage topics.")
    cmds = p.add_subparsers(dest="topics_command", required=True, metavar="ACTION")

    c = cmds.add_parser("list", help="list topics")
    add_client_options(c)
    c.set_defaults(run=run_list)

    c = cmds.add_parser("create", help="create a topic")
    c.add_argument("name")
    c.add_argument("--partitions", type=positive, metavar="N",
                   help="partition count (default: the broker's num.partitions)")
    c.add_argument("--replication-factor", type=positive, default=1, metavar="N")
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic setting, e.g. retention.ms=60000 (repeatable)")
    add_client_options(c)
    c.set_defaults(run=run_create)

    c = cmds.add_parser("describe", help="partitions, offsets and configs of a topic")
    c.add_argument("name")
    add_client_options(c)
    c.set_defaults(run=run_describe)

    c = cmds.add_parser("delete", help="delete a topic")
    c.add_argument("name")
    add_client_options(c)
    c.set_defaults(run=run_delete)

    c = cmds.add_parser("add-partitions", help="grow a topic to N partitions")
    c.add_argument("name")
    c.add_argument("--partitions", type=positive, required=True, metavar="N",
                   help="the new total number of partitions")
    add_client_options(c)
    c.set_defaults(run=run_add_partitions)

    c = cmds.add_parser("alter-config", help="set or delete some configs of a topic")
    c.add_argument("name")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic setting, e.g. retention.ms=60000 (repeatable)")
    c.add_argument("--delete", action="append", default=[], metavar="KEY",
                   help="a setting to return to its default (repeatable)")
    c.add_argument("--validate-only", action="store_true",
                   help="only check the change with the broker")
    add_client_options(c)
    c.set_defaults(run=run_alter_config)


def positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not positive")
    return n


def parse_configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--config: expected KEY=VALUE, got {item!r}", 2)
        out[key.strip()] = value.strip()
    return out


def run_list(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        topics = admin.list_topics()
    rows = [{"topic": t, "partitions": n} for t, n in sorted(topics.items())]
    Output(args.output).table(rows, [("topic", "TOPIC"), ("partitions", "PARTITIONS")],
                              empty="No topics.")
    return 0


def run_create(args: argparse.Namespace) -> int:
    configs = parse_configs(args.config)
    with open_admin(args) as admin:
        admin.create_topics({args.name: args.partitions or -1}, configs={args.name: configs},
                            replication_factor=args.replication_factor)
        partitions = args.partitions or admin.list_topics()[args.name]
    out = Output(args.output)
    if out.json:
        out.data({"topic": args.name, "partitions": partitions, "configs": configs})
    else:
        out.message(f"Created topic {args.name} with {partitions} partition(s).")
    return 0


def describe(admin: Any, name: str) -> dict[str, Any]:
    """A topic's partitions (leader, log start and end offsets) and configs."""
    leaders = admin.describe_topics([name])[name]
    tps = [TopicPartition(name, p) for p in sorted(leaders)]
    start = admin.list_offsets(dict.fromkeys(tps, "earliest"))
    end = admin.list_offsets(dict.fromkeys(tps, "latest"))
    configs = admin.describe_topic_configs(name)
    return {
        "topic": name,
        "partitions": [{"partition": tp.partition, "leader": leaders[tp.partition],
                        "log_start_offset": start[tp][0], "log_end_offset": end[tp][0],
                        "records": end[tp][0] - start[tp][0]} for tp in tps],
        "configs": {k: {"value": v, "source": src} for k, (v, src) in sorted(configs.items())},
    }


def run_describe(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        info = describe(admin, args.name)
    out = Output(args.output)
    if out.json:
        out.data(info)
        return 0
    parts = info["partitions"]
    out.message(f"Topic: {args.name}  PartitionCount: {len(parts)}")
    out.table(parts, [("partition", "PARTITION"), ("leader", "LEADER"),
                      ("log_start_offset", "LOG-START-OFFSET"),
                      ("log_end_offset", "LOG-END-OFFSET"), ("records", "RECORDS")])
    rows = [{"name": k, "value": c["value"], "source": c["source"]}
            for k, c in info["configs"].items()]
    out.table(rows, [("name", "CONFIG"), ("value", "VALUE"), ("source", "SOURCE")])
    return 0


def run_delete(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        admin.delete_topics([args.name])
    out = Output(args.output)
    if out.json:
        out.data({"topic": args.name, "deleted": True})
    else:
        out.message(f"Deleted topic {args.name}.")
    return 0


def run_alter_config(args: argparse.Namespace) -> int:
    from samsa.cli.configs import alter

    to_set = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set: expected KEY=VALUE, got {item!r}", 2)
        to_set[key.strip()] = value.strip()
    to_delete = [k.strip() for k in args.delete]
    return alter(args, "topic", args.name, f"topic {args.name}", to_set, to_delete)


def run_add_partitions(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        admin.create_partitions({args.name: args.partitions})
    out = Output(args.output)
    if out.json:
        out.data({"topic": args.name, "partitions": args.partitions})
    else:
        out.message(f"Topic {args.name} now has {args.partitions} partitions.")
    return 0
