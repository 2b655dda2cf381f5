"""Security in a cluster over PostgreSQL: SCRAM users live in the database (made offline with
``samsa users add --storage``, or online on any node, applying on every node: each re-reads
them by itself once the database says they changed), and each node registers its listeners,
so Metadata answers on a SASL listener name every node at its SASL address."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.cluster.nodes import ClusterNodeProcess, wait_until
from tests.wire import WireClient

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

LISTENERS = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN"}


def _sasl(node: ClusterNodeProcess, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": node.address("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": password, "log_level": "0"}


@pytest.fixture
def nodes(pg_dsn: str, tmp_path: Path) -> Iterator[list[ClusterNodeProcess]]:
    done = subprocess.run([sys.executable, "-m", "samsa.cli.main", "users", "add", "--storage",
                           pg_dsn, "--user", "admin", "--password", "admin-pw"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    started = [ClusterNodeProcess(tmp_path, i, pg_dsn, LISTENERS).start() for i in (1, 2)]
    yield started
    for n in started:
        n.stop()


def test_users_and_listeners_across_nodes(nodes: list[ClusterNodeProcess]) -> None:
    one, two = nodes
    admin = AdminClient(_sasl(one, "admin", "admin-pw"))  # the offline user, on node 1
    deadline = time.monotonic() + 30
    while True:  # node 2 is in the metadata once its registration is read (a tick)
        md = admin.list_topics(timeout=15)
        if len(md.brokers) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()} == {
        1: one.address("SASL_PLAINTEXT"), 2: two.address("SASL_PLAINTEXT")}
    plain = AdminClient({"bootstrap.servers": two.address("PLAINTEXT")})
    assert {b.port for b in plain.list_topics(timeout=15).brokers.values()} == {
        one.ports["PLAINTEXT"], two.ports["PLAINTEXT"]}

    # a user made through node 1: node 2 (never restarted, sent nothing about it) learns of
    # her from the database, with her credential (not just her name)
    assert not _logs_in(two, "carol", "carol-pw")
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", info, b"carol-pw", b"sixteen-byte-slt")]
    )["carol"].result(15)
    wait_until(lambda: _logs_in(two, "carol", "carol-pw"), 30, "node 2 accepting carol")
    assert not _logs_in(two, "carol", "wrong-pw")
    assert AdminClient(_sasl(two, "carol", "carol-pw")).list_topics(timeout=15).brokers
    # and her deletion through node 1 reaches node 2 the same way
    admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])["carol"].result(15)
    wait_until(lambda: not _logs_in(two, "carol", "carol-pw"), 30, "node 2 refusing carol")


def _logs_in(node: ClusterNodeProcess, user: str, password: str) -> bool:
    """Whether ``node``'s SASL listener takes a SCRAM-SHA-256 login (a refused one is
    answered with an error, then the connection is closed)."""
    c = WireClient(node.address("SASL_PLAINTEXT"))
    try:
        c.authenticate("SCRAM-SHA-256", user, password)
        return True
    except (AssertionError, ConnectionError):
        return False
    finally:
        c.close()


def test_users_cli_works_on_the_database(pg_dsn: str) -> None:
    """``samsa users list`` and ``delete`` read and change the cluster's users as ``add``
    does; a database that cannot be reached is one line."""
    from tests.security.kit import samsa

    user = f"cli-{time.monotonic_ns()}"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert samsa("users", "add", "--storage", pg_dsn, "--user", user, "--mechanism",
                     mechanism, "--password", "pw").returncode == 0
    listed = samsa("users", "list", "--storage", pg_dsn)
    assert f"{user}\tSCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=4096)" in \
        listed.stdout.splitlines()
    assert samsa("users", "delete", "--storage", pg_dsn, "--user", user).returncode == 0
    assert user not in samsa("users", "list", "--storage", pg_dsn).stdout
    gone = samsa("users", "delete", "--storage", pg_dsn, "--user", user)
    assert gone.returncode == 1 and f"no SCRAM credential for {user}" in gone.stderr
    unreachable = samsa("users", "list", "--storage", "postgresql://nobody@127.0.0.1:1/none")
    assert unreachable.returncode == 1 and "--storage: cannot open" in unreachable.stderr
    assert len(unreachable.stderr.strip().splitlines()) == 1
