"""The test harness's process helpers leave nothing for the garbage collector: a Popen or
pipe collected during a later test fails that test with an unraisable ResourceWarning."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess, end_process

IGNORES_SIGTERM = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                   "print('ready', flush=True); time.sleep(60)")


def test_end_process_kills_and_reaps_a_process_that_ignores_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    with pytest.raises(AssertionError, match="did not exit within"):
        end_process(proc, timeout=0.5)
    assert proc.returncode is not None and proc.stdout.closed


def test_end_process_returns_the_exit_code_and_closes_the_pipes() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert end_process(proc) == -15
    assert proc.stdin is not None and proc.stdin.closed
    assert proc.stdout is not None and proc.stdout.closed


def test_a_restart_after_the_broker_exited_by_itself_leaves_no_pipe_or_log_open(
        tmp_path: Path) -> None:
    """(pytest's configuration fails the test on the unraisable ResourceWarning of an
    unclosed file collected here.)"""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        assert broker.proc is not None
        old = broker.proc
        old.kill()  # not through the harness: as a broker that crashed
        old.wait(10)
        broker.start()
        assert old.stdout is not None and old.stdout.closed
        del old
        gc.collect()
    finally:
        broker.kill()
