"""Fixtures of the console tests: brokers with their HTTP port, the JSON API, and a real
browser (Playwright driving Debian's chromium; Playwright's own browser download is not
used). Screenshots go to ``<pytest tmp>/console-screenshots`` (or ``$SAMSA_SCREENSHOTS``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess, end_process
from tests.cluster.conftest import pg_dsn  # noqa: F401 - the cluster tests' database fixture
from tests.conftest import FAST_GROUPS

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
CONSOLE = {**FAST_GROUPS, "console.lag.sample.interval.ms": "300",
           "offsets.topic.num.partitions": "4"}
_HTTP = re.compile(r"samsa console on http://[\d.]+:(\d+)/console/")


def http_url(proc: BrokerProcess, timeout: float = 15.0, starts: int = 1) -> str:
    """The base URL of a broker's HTTP port (from its log; after a restart, ``starts``
    names how many times it has started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _HTTP.findall(proc.log_path.read_text(errors="replace"))
        if len(found) >= starts:
            return f"http://127.0.0.1:{found[-1]}"
        time.sleep(0.1)
    raise TimeoutError(f"no console URL in {proc.log_path}")


def console_broker(data_dir: Path, **config: str) -> BrokerProcess:
    return BrokerProcess(data_dir, {**CONSOLE, **config},
                         extra_args=["--metrics-port", "0"]).start()


@contextmanager
def remote_console(bootstrap: str, audit_log: Path) -> Iterator[str]:
    """``samsa console --bootstrap-server`` (the cluster source) in a process of its own;
    yields its base URL."""
    cmd = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli.main", "console", "--bootstrap-server", bootstrap,
         "--listen", "127.0.0.1:0", "--interval", "0.3", "--timeout", "3", "--audit-log",
         str(audit_log)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert cmd.stdout is not None
        base = None
        for line in cmd.stdout:
            if "samsa console on http://" in line:
                base = line.split("on ", 1)[1].strip().removesuffix("/console/")
                break
        assert base is not None
        yield base
    finally:
        end_process(cmd)


def api(base: str, path: str, body: Any = None, raw: bytes | None = None
        ) -> tuple[int, Any]:
    """(status, decoded JSON) of a GET, or of a POST when a body is given."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}/api/v1{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:  # its response (and socket) closed here, not by the garbage collector
            return exc.code, json.loads(exc.read() or b"null")


def group_row(base: str, gid: str) -> dict[str, Any] | None:
    """A group as ``GET /groups`` lists it (None: not listed)."""
    _, body = api(base, "/groups")
    return next((g for g in body["groups"] if g["group_id"] == gid), None)


def wait_for(check: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker of the test's own with its console, changing actions on."""
    proc = console_broker(tmp_path / "data", **{"console.actions.enable": "true"})
    try:
        yield proc, http_url(proc)
    finally:
        assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("SAMSA_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.getbasetemp() / "console-screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium through Playwright's sync API, for one module: that API runs an event loop
    on the main thread while it is open, and later tests of the session call asyncio.run."""
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (make test installs it from Debian)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    """A page in a fresh browser context (its own storage: a fresh profile)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    errors: list[str] = []
    pg = context.new_page()
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, f"errors in the page: {errors}"
