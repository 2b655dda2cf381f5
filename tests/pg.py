"""A throwaway PostgreSQL server for tests: ``initdb``/``pg_ctl`` from Debian's
``/usr/lib/postgresql/*/bin``, run as the ``postgres`` user through ``runuser`` (PostgreSQL
refuses to run as root), in a temporary directory, on a free port of 127.0.0.1 only.

``PostgresServer.start()`` returns once it accepts connections; ``stop()`` stops it and
removes its directory. ``create_database()`` gives each test a database of its own.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

USER = "postgres"


def find_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    return Path(found[-1]).parent if found else None


def unavailable_reason() -> str | None:
    """Why a throwaway server cannot run here (None when it can)."""
    if find_bin() is None:
        return "PostgreSQL is not installed (make test installs Debian's postgresql as root)"
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return "starting PostgreSQL as the postgres user needs root and runuser"
    try:
        import pwd

        pwd.getpwnam(USER)
    except KeyError:
        return "there is no postgres user"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in a temp dir; ``dsn(db)`` names a database on it."""

    def __init__(self, *, fsync: bool = False) -> None:
        self.bin = find_bin()
        self.port = 0
        self.root: Path | None = None
        self.fsync = fsync
        self._counter = 0

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        assert self.bin is not None
        cmd = ["runuser", "-u", USER, "--", str(self.bin / args[0]), *args[1:]]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True,
                              cwd="/")

    def start(self) -> PostgresServer:
        import pwd

        entry = pwd.getpwnam(USER)
        self.root = Path(tempfile.mkdtemp(prefix="samsa-pg-"))
        os.chown(self.root, entry.pw_uid, entry.pw_gid)
        data = self.root / "data"
        self._run("initdb", "-D", str(data), "-U", USER, "-A", "trust", "--no-sync",
                  "-E", "UTF8", "--locale=C")
        self.port = free_port()
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                   f"-c unix_socket_directories={self.root} -c max_connections=200 "
                   f"-c fsync={'on' if self.fsync else 'off'} "
                   f"-c synchronous_commit={'on' if self.fsync else 'off'} "
                   "-c full_page_writes=off -c shared_buffers=64MB")
        self._run("pg_ctl", "-D", str(data), "-l", str(self.root / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")
        return self

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "server.log"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        assert self.bin is not None
        cmd = ["runuser", "-u", USER, "--", str(self.bin / "psql"), "-h", "127.0.0.1",
               "-p", str(self.port), "-d", database, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True,
                              cwd="/").stdout

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its DSN."""
        self._counter += 1
        name = f"{prefix}_{os.getpid()}_{self._counter}_{int(time.time() * 1000) % 100000}"
        self.psql(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def stop(self) -> None:
        if self.root is None:
            return
        try:
            if (self.root / "data" / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w",
                          "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
