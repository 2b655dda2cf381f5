"""``samsa configs``: describe and change topic, broker and group configs at run time.

Named as Kafka's ``kafka-configs.sh``: ``--topic``, ``--broker``, ``--broker-defaults``,
``--group``, ``--add-config k1=v1,k2=[a,b]``, ``--delete-config k1,k2`` and ``--all``.
"""

from __future__ import annotations

import argparse
from typing import Any

from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.output import Output

SOURCES = {"topic": "DYNAMIC_TOPIC_CONFIG", "group": "GROUP_CONFIG",
           "dynamic-broker": "DYNAMIC_BROKER_CONFIG",
           "dynamic-default-broker": "DYNAMIC_DEFAULT_BROKER_CONFIG",
           "static-broker": "STATIC_BROKER_CONFIG", "default": "DEFAULT_CONFIG"}
"""samsa.Admin's source names -> Kafka's ConfigSource names (as kafka-configs prints)."""
DYNAMIC = {"topic", "group", "dynamic-broker", "dynamic-default-broker"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe and alter topic, broker and group configs",
                       description="Describe and change configs at run time (kafka-configs).")
    cmds = p.add_subparsers(dest="configs_command", required=True, metavar="ACTION")

    c = cmds.add_parser("describe", help="a resource's configs and their sources")
    _add_entity(c)
    c.add_argument("--all", action="store_true",
                   help="every config, not only the dynamic ones")
    add_client_options(c)
    c.set_defaults(run=run_describe)

    c = cmds.add_parser("alter", help="set or delete some configs of a resource")
    _add_entity(c)
    c.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]",
                   help="configs to set; list values in brackets: k=[a,b] (repeatable)")
    c.add_argument("--delete-config", action="append", default=[], metavar="K[,K]",
                   help="configs to return to their defaults (repeatable)")
    c.add_argument("--validate-only", action="store_true",
                   help="only check the change with the broker")
    add_client_options(c)
    c.set_defaults(run=run_alter)


def _add_entity(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--topic", metavar="NAME")
    g.add_argument("--broker", metavar="ID", help="a broker's settings, by node id")
    g.add_argument("--broker-defaults", action="store_true",
                   help="the cluster-wide dynamic defaults of every broker")
    g.add_argument("--group", metavar="GROUP_ID")


def entity(args: argparse.Namespace) -> tuple[str, str, str]:
    """(resource type, name, words for messages) of the chosen resource."""
    if args.topic is not None:
        return "topic", args.topic, f"topic {args.topic}"
    if args.group is not None:
        return "group", args.group, f"group {args.group}"
    if args.broker_defaults:
        return "broker", "", "the default broker"
    if not args.broker.isdigit():
        raise CliError(f"--broker: expected a node id, got {args.broker!r}", 2)
    return "broker", args.broker, f"broker {args.broker}"


def split_assignments(items: list[str], option: str = "--add-config") -> dict[str, str]:
    """``k1=v1,k2=[a,b]`` (as kafka-configs takes them) -> {k1: v1, k2: "a,b"}."""
    out: dict[str, str] = {}
    for item in items:
        for part in _split_top(item):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise CliError(f"{option}: expected KEY=VALUE, got {part!r}", 2)
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def split_names(items: list[str]) -> list[str]:
    names = [n.strip() for item in items for n in item.split(",")]
    if any(not n for n in names):
        raise CliError("--delete-config: empty config name", 2)
    return names


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def alter(args: argparse.Namespace, rtype: str, name: str, what: str,
          to_set: dict[str, str], to_delete: list[str]) -> int:
    """Send the change and report it (shared with ``samsa topics alter-config``)."""
    if not to_set and not to_delete:
        raise CliError("nothing to change: give configs to set or delete", 2)
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise CliError(f"set and deleted at once: {', '.join(both)}", 2)
    with open_admin(args) as admin:
        admin.alter_configs(rtype, name, set=to_set, delete=to_delete,
                            validate_only=args.validate_only)
    out = Output(args.output)
    if out.json:
        out.data({"resource_type": rtype, "name": name, "set": to_set, "deleted": to_delete,
                  "validate_only": args.validate_only})
    elif args.validate_only:
        out.message(f"The change to {what} is valid (nothing was changed).")
    else:
        out.message(f"Completed updating config for {what}.")
    return 0


def run_alter(args: argparse.Namespace) -> int:
    rtype, name, what = entity(args)
    return alter(args, rtype, name, what, split_assignments(args.add_config),
                 split_names(args.delete_config))


def run_describe(args: argparse.Namespace) -> int:
    rtype, name, what = entity(args)
    with open_admin(args) as admin:
        configs = admin.describe_configs(rtype, name)
    rows = [{"name": c.name, "value": c.value, "source": SOURCES.get(c.source, c.source),
             "read_only": c.read_only,
             "synonyms": [{"name": n, "value": v, "source": SOURCES.get(s, s)}
                          for n, v, s in c.synonyms]}
            for c in sorted(configs.values(), key=lambda c: c.name)
            if args.all or c.source in DYNAMIC]
    out = Output(args.output)
    if out.json:
        out.data(rows)
        return 0
    kind = "All" if args.all else "Dynamic"
    if not rows:
        out.message(f"No dynamic configs for {what}.")
        return 0
    out.table(rows, [("name", "CONFIG"), ("value", "VALUE"), ("source", "SOURCE")],
              title=f"{kind} configs for {what}:")
    return 0
