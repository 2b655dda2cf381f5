"""Apache Kafka's Java client in the conformance tests (tests/conformance/test_java_*.py).

The drivers in ``tests/conformance/java/*.java`` are compiled once per test session against
the jars of ``make java-deps`` (``.java-libs/``; fetched here when missing). A driver runs in
its own JVM and prints one JSON object per line on stdout; some take commands on stdin.

    kit = compiled(tmp_path_factory)          # skips the test when Java cannot be had
    d = kit.start("Member", bootstrap, group, topic, "session.timeout.ms=3000")
    d.wait_for(lambda e: e["event"] == "assigned")
    d.request("commit")                       # a command and its reply
    d.kill()                                  # SIGKILL
    kit.run("Produce", ...)                   # to completion; returns the events

Every wait is bounded. A test module wraps :func:`compiled` in a fixture that calls
:meth:`JavaKit.stop_all` afterwards, so no JVM outlives its test.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.conformance.java.fetch_jars import complete, fetch

ROOT = Path(__file__).resolve().parents[2]
SOURCES = Path(__file__).resolve().parent / "java"
LIBS = ROOT / ".java-libs"
# Small, quick-starting JVMs: the client needs little heap and no optimising compiler.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx160m", "-Xss512k"]

Event = dict[str, Any]


class Driver:
    """One running driver JVM; ``events`` is every JSON line it printed so far, each with a
    ``ts`` (wall-clock ms: the driver's own, else when the line was read)."""

    def __init__(self, name: str, cmd: list[str], stderr_path: Path) -> None:
        self.name = name
        self.stderr_path = stderr_path
        self.events: list[Event] = []
        self._cond = threading.Condition()
        self._stderr = open(stderr_path, "w")  # noqa: SIM115 - closed in _reap
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._stderr, text=True, bufsize=1)
        except BaseException:
            self._stderr.close()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event: Event = json.loads(line)
            except ValueError:
                event = {"event": "text", "text": line}
            if isinstance(event, dict):  # the driver's own clock, else when the line was read
                event.setdefault("ts", int(time.time() * 1000))
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        if not self._stderr.closed:  # closed once the JVM is reaped
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def send(self, line: str) -> None:
        """Write one command line to the driver's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 30.0,
                 what: str = "event", start: int = 0) -> Event:
        """The first event from index ``start`` on that matches; fails on a timeout or if
        the JVM exits without printing one."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events[start:]:
                    if predicate(e):
                        return e
                start = len(self.events)
                left = deadline - time.monotonic()
                exited = not self._reader.is_alive()
                if left <= 0 or exited:
                    break
                self._cond.wait(min(left, 0.5))
        why = "exited" if exited else "timed out"
        raise AssertionError(f"{self.name}: {why} waiting for {what}; last events "
                             f"{self.events[-5:]}; stderr:\n{self.stderr()}")

    def request(self, command: str, timeout: float = 60.0) -> Event:
        """Send a command and return its reply (an event with ``reply``)."""
        with self._cond:
            start = len(self.events)
        self.send(command)
        name = command.split()[0]
        return self.wait_for(lambda e: e.get("reply") == name, timeout, f"reply to {name}",
                             start)

    def of(self, kind: str) -> list[Event]:
        """Events of one kind (the ``event`` field), in order."""
        with self._cond:
            return [e for e in self.events if e.get("event") == kind]

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise AssertionError(f"{self.name} did not exit; stderr:\n{self.stderr()}") from exc
        self._reap()
        return code

    def close(self, timeout: float = 30.0) -> int:
        """Ask the driver to finish (end of stdin) and wait for its exit code."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):  # the JVM may be gone already
                self.proc.stdin.close()
        return self.wait_exit(timeout)

    def kill(self) -> None:
        """SIGKILL: the JVM disappears without a word to the broker."""
        if self.alive():
            self.proc.kill()
        self.proc.wait(10)
        self._reap()

    def _reap(self) -> None:
        self._reader.join(10)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None and not f.closed:
                with contextlib.suppress(OSError):
                    f.close()
        self._stderr.close()


class JavaKit:
    """Compiled drivers and the classpath to run them."""

    def __init__(self, classes: Path, logs: Path) -> None:
        self.classes = classes
        self.logs = logs
        self.classpath = f"{classes}:{LIBS}/*"
        self.drivers: list[Driver] = []
        self._count = 0

    def start(self, main: str, *args: str, name: str | None = None) -> Driver:
        """Start driver class ``main`` with ``args``; its stderr goes to a log file."""
        self._count += 1
        name = name or f"{main}-{self._count}"
        java = shutil.which("java")
        assert java is not None
        cmd = [java, *JVM_FLAGS, "-cp", self.classpath, main, *args]
        driver = Driver(name, cmd, self.logs / f"{self._count:03d}-{name}.stderr.log")
        self.drivers.append(driver)
        return driver

    def run(self, main: str, *args: str, timeout: float = 120.0) -> list[Event]:
        """Run a driver to completion; it must exit 0. Returns its events."""
        d = self.start(main, *args)
        d.close(timeout)
        assert d.proc.returncode == 0, (f"{main} exited {d.proc.returncode}: "
                                        f"{d.events[-3:]}\n{d.stderr()}")
        return d.events

    def stop_all(self) -> None:
        """Kill every driver still running and reap every driver, exited or not, so no
        pipe or log file is left for the garbage collector (test teardown)."""
        for d in self.drivers:
            d.kill()
        self.drivers.clear()


_KIT: JavaKit | str | None = None


def _build(tmp_path_factory: pytest.TempPathFactory) -> JavaKit | str:
    """A compiled kit, or the reason there can be none."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "javac/java not found (make java-deps installs default-jdk-headless as root)"
    if not complete(LIBS):
        try:
            fetch(LIBS)
        except (RuntimeError, OSError) as exc:
            return f"Kafka's Java client jars are missing and could not be fetched: {exc}"
    classes = tmp_path_factory.mktemp("java-classes")
    sources = sorted(str(p) for p in SOURCES.glob("*.java"))
    done = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{LIBS}/*",
                           *sources], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"javac failed:\n{done.stdout}\n{done.stderr}")
    return JavaKit(classes, tmp_path_factory.mktemp("java-logs"))


def compiled(tmp_path_factory: pytest.TempPathFactory) -> JavaKit:
    """The session's kit, compiled on first use; skips the calling test without Java."""
    global _KIT
    if _KIT is None:
        _KIT = _build(tmp_path_factory)
    if isinstance(_KIT, str):
        pytest.skip(_KIT)
    return _KIT


# Member settings for group tests: short but legal (the test broker allows session timeouts
# down to 1000 ms); max.poll.interval.ms is also a classic member's rebalance timeout.
MEMBER_FAST = {
    "session.timeout.ms": "3000",
    "heartbeat.interval.ms": "300",
    "max.poll.interval.ms": "15000",
    "reconnect.backoff.max.ms": "200",
    "retry.backoff.max.ms": "300",
}

ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}

Tp = tuple[str, int]


def tps(pairs: list[list[Any]] | None) -> set[Tp]:
    return {(str(t), int(p)) for t, p in pairs or []}


class JavaMember:
    """A ``Member`` driver (a KafkaConsumer in a classic group) seen as a groupkit member:
    its JVM polls by itself, so :meth:`poll` only paces the caller's loop."""

    def __init__(self, kit: JavaKit, bootstrap: str, group: str, topics: list[str], name: str,
                 **config: str) -> None:
        settings = {**MEMBER_FAST, "client.id": name, **config}
        self.name = name
        self.closed = False
        self.driver = kit.start("Member", bootstrap, group, ",".join(topics),
                                *(f"{k}={v}" for k, v in settings.items()), name=name)

    def poll(self, timeout: float = 0.02) -> None:
        time.sleep(timeout)

    def rebalances(self) -> list[Event]:
        """The assigned / revoked / lost events, in order."""
        return [e for e in self.driver.events if e.get("event") in ("assigned", "revoked", "lost")]

    def assignment(self) -> set[Tp]:
        """What the member holds after its latest rebalance callback."""
        events = self.rebalances()
        if not events or self.closed:
            return set()
        last = events[-1]
        held = tps(last["assignment"])
        return held if last["event"] == "assigned" else held - tps(last["partitions"])

    def positions(self) -> dict[Tp, int]:
        return {}

    def generation(self) -> int:
        assigned = self.driver.of("assigned")
        return int(assigned[-1]["generation"]) if assigned else -1

    def records(self) -> list[Event]:
        return [r for e in self.driver.of("records") for r in e["records"] or []]

    def values(self) -> list[str]:
        return [r["value"] for r in self.records()]

    def errors(self) -> list[Event]:
        return self.driver.of("error")

    def commit(self) -> Event:
        return self.driver.request("commit")

    def close(self) -> None:
        """KafkaConsumer.close(): a dynamic member leaves the group, a static one stays."""
        if not self.closed:
            self.closed = True
            self.driver.send("close")
            self.driver.wait_for(lambda e: e["event"] == "closed", 30, "closed")
            assert self.driver.close() == 0

    def kill(self) -> None:
        self.closed = True
        self.driver.kill()


def generations_disjoint(members: list[JavaMember]) -> list[str]:
    """Violations of: in any one generation, no partition is assigned to two members (each
    member's assignment at the end of its rebalance into that generation)."""
    by_gen: dict[int, dict[str, set[Tp]]] = {}
    for m in members:
        for e in m.driver.of("assigned"):
            by_gen.setdefault(int(e["generation"]), {})[m.name] = tps(e["assignment"])
    bad = []
    for gen, held in sorted(by_gen.items()):
        seen: dict[Tp, str] = {}
        for name, parts in held.items():
            for tp in parts:
                if tp in seen:
                    bad.append(f"generation {gen}: {tp} held by {seen[tp]} and {name}")
                seen[tp] = name
    return bad


def coordinator_view(bootstrap: str, group: str) -> tuple[str, dict[str, set[Tp]]]:
    """The group's state and each member's assignment (by client id), as described."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    d = admin.describe_consumer_groups([group])[group].result(15)
    return d.state.name, {m.client_id: {(tp.topic, tp.partition)
                                         for tp in m.assignment.topic_partitions}
                          for m in d.members}
