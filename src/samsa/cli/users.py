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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from samsa.cli.errors import CliError
from samsa.security.credentials import (
    MECHANISMS,
    MIN_ITERATIONS,
    CredentialError,
    CredentialStore,
    FileStore,
    ScramCredential,
    from_password,
)


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


def _change(args: argparse.Namespace, upserts: list[tuple[str, str, ScramCredential]],
            deletions: list[tuple[str, str]]) -> None:
    if args.data_dir is not None:
        store = FileStore(args.data_dir)
        asyncio.run(store.alter(upserts, deletions))
        return
    from samsa.storage.pg.credentials import write

    _with_pool(args.storage, lambda pool: write(pool, upserts, deletions))


def _store(args: argparse.Namespace) -> CredentialStore:
    if args.data_dir is not None:
        return FileStore(args.data_dir)
    from samsa.storage.pg.credentials import READ

    async def read(pool: Any) -> list[Any]:
        return list(await pool.fetch(READ))

    users: dict[str, dict[str, ScramCredential]] = {}
    for r in _with_pool(args.storage, read):
        users.setdefault(r["name"], {})[r["mechanism"]] = ScramCredential(
            bytes(r["salt"]), bytes(r["stored_key"]), bytes(r["server_key"]), r["iterations"])
    return CredentialStore(users)


def _with_pool(dsn: str, job: Callable[[Any], Any]) -> Any:
    import asyncpg

    from samsa.storage.pg.schema import create_schema

    async def run() -> Any:
        try:
            pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
        except (OSError, asyncpg.PostgresError) as exc:
            raise CliError(f"cannot reach the database {dsn}: {exc}") from None
        try:
            await create_schema(pool)
            return await job(pool)
        finally:
            await pool.close()

    return asyncio.run(run())


def run_add(args: argparse.Namespace) -> int:
    try:
        cred = from_password(args.mechanism, _password(args), args.iterations)
    except CredentialError as exc:
        raise CliError(str(exc), 2) from None
    _change(args, [(args.user, args.mechanism, cred)], [])
    print(f"added {args.mechanism} credential for {args.user}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    users = _store(args).users()
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
    known = _store(args).users().get(args.user, {})
    chosen = [args.mechanism] if args.mechanism else list(known)
    missing = [m for m in chosen if m not in known]
    if not chosen or missing:
        raise CliError(f"no {' or '.join(missing or ['SCRAM'])} credential for {args.user}")
    _change(args, [], [(args.user, m) for m in chosen])
    print(f"deleted {', '.join(chosen)} credential of {args.user}")
    return 0
