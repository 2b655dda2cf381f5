"""``samsa users``: SCRAM users of a broker, changed offline as ``kafka-storage format
--add-scram`` does (the first super user, before the broker ever starts).

    samsa users add --data-dir DIR --mechanism SCRAM-SHA-256 --user alice --password PW
    samsa users add --storage postgresql://... --user alice --password-file FILE
    samsa users list --data-dir DIR
    samsa users delete --data-dir DIR --user alice [--mechanism SCRAM-SHA-512]

Only the salted credential is stored, never the password. A running broker re-reads its
data directory's file within a second (a cluster's nodes re-read the database); to change
users through a running broker use a Kafka admin client (AlterUserScramCredentials).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from samsa.cli.cluster import cluster_database
from samsa.cli.errors import CliError
from samsa.security.credentials import (
    MECHANISMS,
    MIN_ITERATIONS,
    CredentialError,
    CredentialStore,
    FileStore,
    from_password,
)

R = TypeVar("R")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("users", help="SCRAM users (offline, like kafka-storage --add-scram)",
                       description="Add, list and delete the SCRAM users of a broker's data "
                                   "directory or of a cluster's database.")
    usub = p.add_subparsers(dest="users_command", required=True, metavar="COMMAND")

    def where(q: argparse.ArgumentParser) -> None:
        g = q.add_mutually_exclusive_group(required=True)
        g.add_argument("--data-dir", type=Path, metavar="DIR", help="a broker's data directory")
        g.add_argument("--storage", metavar="URL",
                       help="a cluster's database, postgresql://USER@HOST:PORT/DB")

    a = usub.add_parser("add", help="add a user or change its password")
    where(a)
    a.add_argument("--user", required=True)
    a.add_argument("--mechanism", default="SCRAM-SHA-256", choices=list(MECHANISMS))
    pw = a.add_mutually_exclusive_group(required=True)
    pw.add_argument("--password", help="the password (visible to other local users: prefer "
                                       "--password-file)")
    pw.add_argument("--password-file", type=Path, metavar="FILE",
                    help="a file whose first line is the password")
    a.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                   help="PBKDF2 iterations (default %(default)s, at most 16384)")
    a.set_defaults(run=run_add)

    ls = usub.add_parser("list", help="users and their mechanisms")
    where(ls)
    ls.add_argument("--output", "-o", choices=["table", "json"], default="table")
    ls.set_defaults(run=run_list)

    d = usub.add_parser("delete", help="delete a user's credential (every mechanism by default)")
    where(d)
    d.add_argument("--user", required=True)
    d.add_argument("--mechanism", choices=list(MECHANISMS))
    d.set_defaults(run=run_delete)


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    lines: list[str]
    try:
        lines = args.password_file.read_text().splitlines()
    except OSError as exc:
        raise CliError(f"--password-file: cannot read {args.password_file}: {exc.strerror}",
                       2) from None
    if not lines or not lines[0]:
        raise CliError(f"--password-file: {args.password_file} has no password on its first "
                       "line", 2)
    return str(lines[0])


def _on_store(args: argparse.Namespace,
              work: Callable[[CredentialStore], Coroutine[Any, Any, R]]) -> R:
    """``work`` on the users of the data directory (``--data-dir``) or of the cluster's
    database (``--storage``), read first."""
    if args.data_dir is not None:
        return asyncio.run(work(FileStore(args.data_dir)))
    with cluster_database(args.storage) as engine:
        store = engine.credentials

        async def run() -> R:
            await store.refresh()
            return await work(store)

        return asyncio.run(run())


async def _users(store: CredentialStore) -> dict[str, dict[str, int]]:
    return store.users()


def run_add(args: argparse.Namespace) -> int:
    try:
        cred = from_password(args.mechanism, _password(args), args.iterations)
    except CredentialError as exc:
        raise CliError(str(exc), 2) from None
    _on_store(args, lambda store: store.alter([(args.user, args.mechanism, cred)], []))
    print(f"added {args.mechanism} credential for {args.user}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    users = _on_store(args, _users)
    if args.output == "json":
        import json

        json.dump({u: [{"mechanism": m, "iterations": i} for m, i in ms.items()]
                   for u, ms in users.items()}, sys.stdout, indent=1)
        print()
        return 0
    for user, mechanisms in users.items():
        print(f"{user}\t" + ", ".join(f"{m} (iterations={i})" for m, i in mechanisms.items()))
    return 0


def run_delete(args: argparse.Namespace) -> int:
    async def delete(store: CredentialStore) -> list[str]:
        known = store.users().get(args.user, {})
        chosen = [args.mechanism] if args.mechanism else list(known)
        missing = [m for m in chosen if m not in known]
        if not chosen or missing:
            raise CliError(f"no {' or '.join(missing or ['SCRAM'])} credential for "
                           f"{args.user}")
        await store.alter([], [(args.user, m) for m in chosen])
        return chosen

    chosen = _on_store(args, delete)
    print(f"deleted {', '.join(chosen)} credential of {args.user}")
    return 0
