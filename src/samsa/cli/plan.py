"""``samsa groups plan``: what-if assignments with :func:`samsa.assignors.plan`.

The baseline is a live group (``--group``: its members, subscriptions and current
assignment) or members given on the command line (assigned with ``--current-strategy``,
default: the planned strategy). ``--add-member``/``--remove-member`` change the membership;
the plan runs the strategy with every member's current partitions as owned ones and shows
per-member counts and which partitions would move.
"""

from __future__ import annotations

import argparse
from typing import Any

from samsa import TopicPartition
from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.output import Output
from samsa.cli.partitions import format_assignment

MAX_ROUNDS = 5
"""Rebalances a what-if may take (cooperative strategies need a follow-up one)."""


STRATEGIES = "range, roundrobin, sticky, cooperative-sticky, optimal or a registered name"


def add_parser(cmds: Any) -> None:
    c = cmds.add_parser("plan", help="what-if: how a strategy would assign partitions",
                        description=__doc__.split("\n\n")[1] if __doc__ else None)
    c.add_argument("--strategy", metavar="NAME",
                   help=f"{STRATEGIES} (default: the live group's strategy, else range)")
    c.add_argument("--current-strategy", metavar="NAME",
                   help="how the baseline members are assigned now (default --strategy)")
    c.add_argument("--topic", action="append", default=[], metavar="TOPIC[:N]",
                   help="a topic and its partition count (without N: asked from the broker)")
    c.add_argument("--member", action="append", default=[], metavar="ID[=T1,T2]",
                   help="a member and its topics (default: every --topic)")
    c.add_argument("--members", type=int, metavar="N", help="N members on every --topic")
    c.add_argument("--group", metavar="GROUP", help="start from a live group")
    c.add_argument("--add-member", action="append", default=[], metavar="ID[=T1,T2]")
    c.add_argument("--remove-member", action="append", default=[], metavar="ID")
    add_client_options(c)
    c.set_defaults(run=run)


def parse_member(spec: str, default_topics: list[str]) -> tuple[str, list[str]]:
    member, sep, topics = spec.partition("=")
    if not member:
        raise CliError(f"member: expected ID or ID=T1,T2, got {spec!r}", 2)
    chosen = [t for t in topics.split(",") if t] if sep else list(default_topics)
    if not chosen:
        raise CliError(f"member {member} subscribes to no topic", 2)
    return member, chosen


def topic_counts(args: argparse.Namespace, admin: Any | None,
                 wanted: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    ask = set(wanted)
    for spec in args.topic:
        name, sep, n = spec.partition(":")
        if sep:
            if not n.isdigit() or int(n) < 1:
                raise CliError(f"--topic: bad partition count in {spec!r}", 2)
            counts[name] = int(n)
        else:
            ask.add(name)
    ask -= set(counts)
    if ask:
        if admin is None:
            raise CliError(f"give partition counts (--topic {sorted(ask)[0]}:N) "
                           "or use --group/a broker", 2)
        known = admin.list_topics()
        for name in sorted(ask):
            if name not in known:
                raise CliError(f"topic {name} does not exist")
            counts[name] = known[name]
    return counts


def compute(args: argparse.Namespace, admin: Any | None) -> dict[str, Any]:
    from samsa.assignors import assignor_names, plan

    for name in (args.strategy, args.current_strategy):
        if name is not None and name not in assignor_names():
            raise CliError(f"unknown strategy {name!r} (one of {', '.join(assignor_names())})",
                           2)
    topic_names = [t.partition(":")[0] for t in args.topic]
    subscriptions: dict[str, list[str]] = {}
    current: dict[str, list[TopicPartition]] = {}
    group_strategy = None
    if args.group:
        assert admin is not None
        desc = admin.describe_groups([args.group])[args.group]
        if not desc.members:
            raise CliError(f"group {args.group} has no members (state {desc.state})")
        if desc.protocol in assignor_names():
            group_strategy = desc.protocol
        for m in desc.members:
            subscriptions[m.member_id] = list(m.topics) or list(topic_names)
            current[m.member_id] = sorted(m.assignment)
    if not topic_names:  # members named without topics take the group's topics
        topic_names = sorted({t for ts in subscriptions.values() for t in ts})
    for spec in args.member:
        member, topics = parse_member(spec, topic_names)
        subscriptions[member] = topics
    for i in range(1, (args.members or 0) + 1):
        subscriptions[f"member-{i}"] = list(topic_names)
    if not subscriptions:
        raise CliError("no members: give --member, --members N or --group", 2)
    added = dict(parse_member(s, topic_names) for s in args.add_member)
    wanted = {t for ts in [*subscriptions.values(), *added.values()] for t in ts}
    counts = topic_counts(args, admin, wanted)
    if not args.group:
        base = plan(args.current_strategy or args.strategy or "range", counts, subscriptions)
        current = {m: list(tps) for m, tps in base.items()}
    for member in args.remove_member:
        if member not in subscriptions:
            raise CliError(f"--remove-member: no member {member}")
        subscriptions.pop(member)
    subscriptions.update(added)
    if not subscriptions:
        raise CliError("no members left", 2)
    strategy = args.strategy or group_strategy or "range"
    result = {m: list(current.get(m, [])) for m in subscriptions}
    rounds = 0
    for _ in range(MAX_ROUNDS):
        # A cooperative strategy revokes first and assigns in a follow-up rebalance.
        owned = {m: [(tp.topic, tp.partition) for tp in tps] for m, tps in result.items()}
        following = plan(strategy, counts, subscriptions, owned=owned)
        if following == result:
            break
        result = following
        rounds += 1
    rounds = max(rounds, 1)
    before = {tp: m for m, tps in current.items() for tp in tps}
    after = {tp: m for m, tps in result.items() for tp in tps}
    moves = [{"topic": tp.topic, "partition": tp.partition, "from": before.get(tp),
              "to": after.get(tp)}
             for tp in sorted(set(before) | set(after)) if before.get(tp) != after.get(tp)]
    members = sorted(set(current) | set(result))
    return {
        "strategy": strategy,
        "rebalances": rounds,
        "topics": counts,
        "members": [{"member": m, "topics": sorted(subscriptions.get(m, [])),
                     "before": len(current.get(m, [])), "after": len(result.get(m, [])),
                     "partitions": [[tp.topic, tp.partition] for tp in result.get(m, [])]}
                    for m in members],
        "moves": moves,
        "total_partitions": sum(counts.values()),
    }


def run(args: argparse.Namespace) -> int:

    needs_broker = bool(args.group) or any(":" not in t for t in args.topic)
    if needs_broker:
        with open_admin(args) as admin:
            result = compute(args, admin)
    else:
        result = compute(args, None)
    out = Output(args.output)
    if out.json:
        out.data(result)
        return 0
    rows = [{**m, "topics": ",".join(m["topics"]) or "-",
             "partitions": format_assignment(m["partitions"])} for m in result["members"]]
    out.table(rows, [("member", "MEMBER"), ("topics", "TOPICS"), ("before", "BEFORE"),
                     ("after", "AFTER"), ("partitions", "PARTITIONS")],
              title=f"strategy {result['strategy']}")
    moves = result["moves"]
    out.message(f"{len(moves)} of {result['total_partitions']} partition(s) would move "
                f"(converges in {result['rebalances']} rebalance(s)).")
    if moves:
        out.table(moves, [("topic", "TOPIC"), ("partition", "PARTITION"), ("from", "FROM"),
                          ("to", "TO")])
    return 0
