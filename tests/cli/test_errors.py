"""Exit codes and one-line errors of the installed ``samsa`` command (subprocesses)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess

SAMSA = Path(sys.executable).with_name("samsa")


def samsa(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    cmd = [str(SAMSA)] if SAMSA.exists() else [sys.executable, "-m", "samsa.cli.main"]
    return subprocess.run([*cmd, *argv], input=stdin, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture(scope="module")
def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("argv", [
    ["topics", "list"],
    ["topics", "describe", "t"],
    ["groups", "list"],
    ["groups", "describe", "g"],
    ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"],
    ["produce", "t"],
    ["consume", "t", "--max-messages", "1"],
])
def test_unreachable_broker(argv: list[str], dead_port: int) -> None:
    r = samsa(*argv, "--bootstrap-server", f"127.0.0.1:{dead_port}", stdin="x\n")
    assert r.returncode == 1
    assert r.stderr == f"samsa: cannot reach a broker at 127.0.0.1:{dead_port}: " \
                       "Connection refused\n"
    assert r.stdout == ""


def test_unknown_group_and_topic(broker: BrokerProcess) -> None:
    r = samsa("groups", "describe", "never-seen", "--bootstrap-server", broker.bootstrap)
    assert (r.returncode, r.stderr) == (1, "samsa: group never-seen does not exist\n")
    r = samsa("topics", "describe", "never-seen", "--bootstrap-server", broker.bootstrap)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "no such topic" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("argv", [
    ["bogus"],
    ["groups"],
    ["groups", "describe"],
    ["topics", "create"],
    ["topics", "create", "x", "--partitions", "-1"],
    ["groups", "list", "--bootstrap-server", "no-port"],
    ["groups", "list", "--output", "xml"],
])
def test_bad_arguments(argv: list[str]) -> None:
    r = samsa(*argv)
    assert r.returncode == 2, r
    assert r.stderr.startswith("samsa") and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == ""
