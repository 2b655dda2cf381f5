"""Start and stop real ``samsa serve`` processes for tests (127.0.0.1, ephemeral ports);
:func:`end_process` stops any other subprocess a test started."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TextIO


def end_process(proc: subprocess.Popen[str], timeout: float = 20.0,
                drain: threading.Thread | None = None) -> int:
    """SIGTERM ``proc`` and return its exit code; one that does not exit within ``timeout``
    is SIGKILLed and fails the test (AssertionError). Either way it is reaped, ``drain`` (a
    thread reading its output) is joined and its pipes are closed: a Popen or pipe left
    behind is found by the garbage collector in some later test, which then fails with an
    unraisable ResourceWarning."""
    hung = False
    try:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                hung = True
                proc.kill()
                proc.wait(10)
    finally:
        if drain is not None:
            drain.join(10)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    if hung:
        raise AssertionError(f"{proc.args!r} did not exit within {timeout} s of SIGTERM")
    return int(proc.returncode)


_LISTENING = re.compile(r"samsa listening on ([\d.]+):(\d+)(?: \((\w+),)?")


class BrokerProcess:
    """A broker subprocess; ``bootstrap`` is its (first listener's) ``host:port``.

    With a ``listeners`` config (ports may be 0), ``ports`` has each listener's port and
    :meth:`address` its ``host:port``; a restart keeps the ports. ``env`` adds to the
    process's environment (a benchmark's ``PYTHONPATH`` of another checkout).
    """

    def __init__(self, data_dir: Path, config: dict[str, str] | None = None,
                 port: int = 0, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.env = dict(env or {})
        self.config = dict(config or {})
        self.extra_args = list(extra_args or [])
        self.requested_port = port
        self.port = 0
        self.ports: dict[str, int] = {}
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self._drain: threading.Thread | None = None
        self._log: TextIO | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def address(self, listener: str) -> str:
        """``127.0.0.1:port`` of a listener."""
        return f"127.0.0.1:{self.ports[listener]}"

    def _listener_names(self) -> list[str]:
        text = self.config.get("listeners", "")
        return [item.split("://")[0].strip().upper() for item in text.split(",") if item.strip()]

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        """Start the broker; a restart on its former port waits while that port is taken.

        Between a kill and a restart another socket may hold the port for a moment: on
        loopback a client reconnecting to the dead port can even be given that very port as
        its own (a TCP self-connect) until it gives the connection up.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._start_once(timeout)
            except RuntimeError:
                if not (self.requested_port and self._port_was_taken()
                        and time.monotonic() < deadline):
                    raise
                time.sleep(0.2)

    def _port_was_taken(self) -> bool:
        with open(self.log_path, errors="replace") as f:
            tail = f.readlines()[-3:]
        return any("address already in use" in line for line in tail)

    def _start_once(self, timeout: float) -> BrokerProcess:
        if self.proc is not None and self.proc.poll() is not None:
            self._join_drain()  # the one before exited by itself: close its pipe and log
        names = self._listener_names()
        self.ports = {}
        args = [sys.executable, "-m", "samsa.cli.main", "serve", "--data-dir", str(self.data_dir)]
        if not names:
            args += ["--listen", f"127.0.0.1:{self.requested_port}"]
        for k, v in self.config.items():
            args += ["--config", f"{k}={v}"]
        args += self.extra_args
        # line-buffered, so tests can read the log while the broker runs
        log = open(self.log_path, "a", buffering=1)  # noqa: SIM115 - closed with the process
        try:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        except BaseException:
            log.close()
            raise
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait(10)
                self.proc.stdout.close()
                log.close()
                raise RuntimeError(f"broker exited: see {self.log_path}")
            log.write(line)
            m = _LISTENING.search(line)
            if m:
                if not self.ports:
                    self.port = int(m.group(2))
                    self.requested_port = self.port  # restarts keep the same port
                self.ports[m.group(3) or "PLAINTEXT"] = int(m.group(2))
                if len(self.ports) >= max(1, len(names)):
                    break
        else:
            self.proc.kill()
            self.proc.wait(10)
            self.proc.stdout.close()
            log.close()
            raise TimeoutError("broker did not start")
        if names:  # restarts keep the same ports
            self.config["listeners"] = ",".join(
                f"{n}://127.0.0.1:{self.ports[n]}" for n in names)
        # Keep draining stdout into the log so the pipe never fills.

        stdout = self.proc.stdout
        self._log = log

        def drain() -> None:
            try:
                for ln in stdout:
                    log.write(ln)
            except (ValueError, OSError):
                pass  # closed by _join_drain

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        return self

    def _join_drain(self) -> None:
        if self._drain is not None:
            self._drain.join(10)
            self._drain = None
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL, no clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._join_drain()

    def stop(self) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._join_drain()
        return int(self.proc.returncode)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
