"""``samsa acls``: add, list and remove ACLs, with the options of Kafka's ``kafka-acls.sh``.

Online (``--bootstrap-server``) through CreateAcls, DescribeAcls and DeleteAcls; or
directly on the ACLs' store, to grant the first administrator before the brokers start with
``authorizer.class.name`` set: ``--data-dir DIR`` (the ACL file of a stopped broker's data
directory) or ``--storage postgresql://...`` (a cluster's database; running nodes apply the
change at once).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from samsa.cli.cluster import cluster_database
from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.errors import CliError
from samsa.cli.output import Output
from samsa.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
)
from samsa.security.authorizer import Authorizer, FileAclStore

R = TypeVar("R")

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
_OPERATIONS = {op.name.replace("_", "").lower(): op for op in Op
               if op not in (Op.UNKNOWN, Op.ANY)}


def operation(text: str) -> AclOperation:
    """``Read``, ``IdempotentWrite``, ``describe_configs``: Kafka's names, any case."""
    op = _OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
    if op is None:
        raise argparse.ArgumentTypeError(
            f"unknown operation {text!r} (one of {', '.join(sorted(_OPERATIONS))})")
    return op


def add_parser(sub: Any) -> None:
    p = sub.add_parser("acls", help="add, list and remove ACLs",
                       description="Manage ACLs (Kafka's authorization model).")
    cmds = p.add_subparsers(dest="acls_command", required=True, metavar="ACTION")

    c = cmds.add_parser("add", help="add ACLs: each principal x host x operation x resource")
    _resources(c, ("literal", "prefixed"))
    _entries(c)
    c.add_argument("--producer", action="store_true",
                   help="WRITE, DESCRIBE and CREATE on the topics (IDEMPOTENT_WRITE on the "
                        "cluster with --idempotent)")
    c.add_argument("--idempotent", action="store_true", help="with --producer")
    c.add_argument("--consumer", action="store_true",
                   help="READ and DESCRIBE on the topics, READ on the groups")
    _options(c)
    c.set_defaults(run=run_add)

    c = cmds.add_parser("list", help="list ACLs (all, or those of the resources given)")
    _resources(c, ("literal", "prefixed", "any", "match"))
    c.add_argument("--principal", metavar="TYPE:NAME", help="only ACLs of this principal")
    _options(c)
    c.set_defaults(run=run_list)

    c = cmds.add_parser("remove", help="remove the ACLs of resources (every principal, host "
                                       "and operation unless narrowed)")
    _resources(c, ("literal", "prefixed", "any", "match"))
    _entries(c)
    _options(c)
    c.set_defaults(run=run_remove)


def _resources(c: argparse.ArgumentParser, patterns: tuple[str, ...]) -> None:
    c.add_argument("--topic", action="append", default=[], metavar="NAME",
                   help="a topic ('*' for all; repeatable)")
    c.add_argument("--group", action="append", default=[], metavar="NAME",
                   help="a consumer group ('*' for all; repeatable)")
    c.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                   help="a transactional id ('*' for all; repeatable)")
    c.add_argument("--cluster", action="store_true", help="the cluster")
    c.add_argument("--resource-pattern-type", choices=patterns, default="literal",
                   help="how resource names match (default %(default)s)")


def _entries(c: argparse.ArgumentParser) -> None:
    c.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="e.g. User:alice, or User:* for everyone (repeatable)")
    c.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    c.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="an address or a CIDR range such as 10.0.0.0/8 (default *)")
    c.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    c.add_argument("--operation", action="append", default=[], type=operation, metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                        "DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable)")


def _options(c: argparse.ArgumentParser) -> None:
    add_client_options(c)
    direct = c.add_mutually_exclusive_group()
    direct.add_argument("--data-dir", type=Path, metavar="DIR",
                        help="work on the ACL file of a stopped broker's data directory")
    direct.add_argument("--storage", metavar="URL",
                        help="work on the ACLs of a cluster's database (postgresql://...)")


def _named(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    named = [(ResourceType.TOPIC, n) for n in args.topic]
    named += [(ResourceType.GROUP, n) for n in args.group]
    named += [(ResourceType.TRANSACTIONAL_ID, n) for n in args.transactional_id]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return named


def _pattern(args: argparse.Namespace) -> PatternType:
    return PatternType[args.resource_pattern_type.upper()]


def _entry_sets(args: argparse.Namespace, any_host: str | None
                ) -> list[tuple[AclPermissionType, list[str], list[str | None]]]:
    """(permission, principals, hosts) for the allow and the deny side given; ``any_host``
    when no host is."""
    out = []
    for perm, principals, hosts in ((ALLOW, args.allow_principal, args.allow_host),
                                    (DENY, args.deny_principal, args.deny_host)):
        side = perm.name.lower()
        if hosts and not principals:
            raise CliError(f"--{side}-host needs --{side}-principal", 2)
        if principals:
            out.append((perm, principals, list(hosts) or [any_host]))
    return out


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    """Every ACL an ``add`` asks for (Kafka's kafka-acls.sh expansion)."""
    pattern = _pattern(args)
    named = _named(args)
    wanted: list[tuple[ResourceType, str, AclOperation]] = [
        (rtype, name, op) for rtype, name in named for op in args.operation]
    if args.producer:
        wanted += [(ResourceType.TOPIC, n, op) for n in args.topic
                   for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)]
        wanted += [(ResourceType.TRANSACTIONAL_ID, n, op) for n in args.transactional_id
                   for op in (Op.WRITE, Op.DESCRIBE)]
        if args.idempotent:
            wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE))
    if args.consumer:
        wanted += [(ResourceType.TOPIC, n, op) for n in args.topic
                   for op in (Op.READ, Op.DESCRIBE)]
        wanted += [(ResourceType.GROUP, n, Op.READ) for n in args.group]
    entries = _entry_sets(args, WILDCARD)
    if not named:
        raise CliError("name a resource: --topic, --group, --transactional-id or --cluster", 2)
    if not wanted:
        raise CliError("name an --operation (or use --producer / --consumer)", 2)
    if not entries:
        raise CliError("name an --allow-principal or a --deny-principal", 2)
    out = []
    for perm, principals, hosts in entries:
        for rtype, name, op in wanted:
            for principal in principals:
                for host in hosts:
                    b = AclBinding(rtype, name, PatternType.LITERAL if rtype ==
                                   ResourceType.CLUSTER else pattern, principal,
                                   host or WILDCARD, op, perm)
                    if b not in out:
                        out.append(b)
    return out


def filters_of(args: argparse.Namespace, *, list_all: bool) -> list[AclBindingFilter]:
    """The filters of a ``list`` or ``remove`` (every ACL for a bare ``list``)."""
    named = _named(args)
    pattern = _pattern(args)
    if not named:
        if not list_all:
            raise CliError("name the resources to remove ACLs of: --topic, --group, "
                           "--transactional-id or --cluster", 2)
        principal = getattr(args, "principal", None)
        return [AclBindingFilter(pattern_type=PatternType.ANY, principal=principal)]
    entries: list[tuple[AclPermissionType, str | None, str | None]] = [
        (perm, p, h) for perm, principals, hosts in _entry_sets(args, None)
        for p in principals for h in hosts] if not list_all else []
    if not entries:
        entries = [(AclPermissionType.ANY, getattr(args, "principal", None), None)]
    ops = getattr(args, "operation", None) or [Op.ANY]
    return [AclBindingFilter(rtype, name, pattern, principal, host, op, perm)
            for rtype, name in named for perm, principal, host in entries for op in ops]


def _rows(acls: list[AclBinding]) -> list[dict[str, str]]:
    return [b.to_dict() for b in acls]


def _print(args: argparse.Namespace, acls: list[AclBinding], verb: str) -> None:
    out = Output(args.output)
    if verb and not out.json:
        out.message(f"{verb} {len(acls)} ACL(s).")
    out.table(_rows(acls), [("principal", "PRINCIPAL"), ("host", "HOST"),
                            ("operation", "OPERATION"), ("permission", "PERMISSION"),
                            ("resource_type", "RESOURCE"), ("name", "NAME"),
                            ("pattern_type", "PATTERN")], empty="No ACLs.")


def _direct(args: argparse.Namespace, work: Callable[[Authorizer], Awaitable[R]]
            ) -> R | None:
    """``work`` on an authorizer over the ACL store itself (``--data-dir``, ``--storage``);
    None when neither is given (the broker is asked instead)."""
    if args.data_dir is not None:
        if not args.data_dir.is_dir():
            raise CliError(f"--data-dir: {args.data_dir} is not a directory", 2)
        return asyncio.run(_on(Authorizer(FileAclStore(args.data_dir)), work))
    if args.storage is None:
        return None
    with cluster_database(args.storage) as engine:
        return asyncio.run(_on(Authorizer(engine.acls), work))


async def _on(authorizer: Authorizer, work: Callable[[Authorizer], Awaitable[R]]) -> R:
    try:
        await authorizer.load()
    except OSError as exc:
        raise CliError(str(exc)) from None
    return await work(authorizer)


async def _describe(authorizer: Authorizer, filters: list[AclBindingFilter]
                    ) -> set[AclBinding]:
    return {b for f in filters for b in authorizer.describe(f)}


def run_add(args: argparse.Namespace) -> int:
    acls = bindings_to_add(args)
    for b in acls:
        try:
            b.validate()
        except InvalidAcl as exc:
            raise CliError(f"{exc}: {b}", 2) from None
    if _direct(args, lambda a: a.create(acls)) is None:
        with open_admin(args) as admin:
            admin.create_acls(acls)
    _print(args, sorted(acls), "Added")
    return 0


def run_list(args: argparse.Namespace) -> int:
    filters = filters_of(args, list_all=True)
    found = _direct(args, lambda a: _describe(a, filters))
    if found is None:
        with open_admin(args) as admin:
            found = {b for f in filters for b in admin.describe_acls(f)}
    _print(args, sorted(found), "")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    filters = filters_of(args, list_all=False)
    removed = _direct(args, lambda a: a.delete(filters))
    if removed is not None:
        gone = sorted({b for found in removed for b in found})
    else:
        with open_admin(args) as admin:
            gone = admin.delete_acls(filters)
    _print(args, gone, "Removed")
    return 0
