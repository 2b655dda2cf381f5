"""KIP-848 consumer groups seen by operators: ``samsa groups describe`` shows the group type,
the group and assignment epochs, each member's epoch and its target beside its current
assignment (ConsumerGroupDescribe); the metrics endpoint counts groups by type."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa.cli.main import main
from tests.brokerproc import end_process
from tests.cli.conftest import parse_table
from tests.conformance.consumer_protocol_kit import BROKER_CONFIG, CpMember
from tests.conformance.groupkit import Member, create_topic, settle, tps_of, unique, wait_until

pytestmark = pytest.mark.conformance


class MetricsBroker:
    """``samsa serve --metrics-port 0`` with :data:`BROKER_CONFIG`; both ports from its log."""

    def __init__(self, data_dir: Path) -> None:
        args = [sys.executable, "-m", "samsa.cli.main", "serve", "--listen", "127.0.0.1:0",
                "--data-dir", str(data_dir), "--metrics-port", "0"]
        for k, v in BROKER_CONFIG.items():
            args += ["--config", f"{k}={v}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        assert self.proc.stdout is not None
        lines: list[str] = []
        ports: dict[str, int] = {}
        try:  # a broker that fails to start is not left running
            deadline = time.monotonic() + 30
            while len(ports) < 2 and time.monotonic() < deadline:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError("broker exited:\n" + "".join(lines))
                lines.append(line)
                for key, pattern in (("broker", r"listening on [\d.]+:(\d+)"),
                                     ("metrics", r"metrics on http://[\d.]+:(\d+)/metrics")):
                    m = re.search(pattern, line)
                    if m:
                        ports[key] = int(m.group(1))
            assert len(ports) == 2, "".join(lines)
        except BaseException:
            with contextlib.suppress(AssertionError):
                end_process(self.proc)
            raise
        self.bootstrap = f"127.0.0.1:{ports['broker']}"
        self.metrics_url = f"http://127.0.0.1:{ports['metrics']}/metrics"
        stdout = self.proc.stdout
        self._drain = threading.Thread(target=lambda: lines.extend(stdout), daemon=True)
        self._drain.start()

    def samples(self, family: str) -> list[tuple[dict[str, str], float]]:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            text = resp.read().decode()
        return [(s.labels, s.value) for f in text_string_to_metric_families(text)
                if f.name == family for s in f.samples]

    def by_type(self) -> dict[str, float]:
        return {labels["type"]: value for labels, value in self.samples("samsa_groups_by_type")}

    def of_group(self, family: str, group: str) -> list[tuple[dict[str, str], float]]:
        return [(labels, v) for labels, v in self.samples(family) if labels.get("group") == group]

    def stop(self) -> None:
        end_process(self.proc, drain=self._drain)


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsBroker]:
    b = MetricsBroker(tmp_path_factory.mktemp("cpcli") / "data")
    yield b
    b.stop()


def _cli(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> str:
    capsys.readouterr()
    assert main([*argv, "--bootstrap-server", bootstrap]) == 0
    return capsys.readouterr().out


def test_groups_describe_shows_epochs_and_target(mbroker: MetricsBroker,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import json

    bootstrap = mbroker.bootstrap
    topic, group, classic = unique("cli"), unique("g"), unique("classic")
    create_topic(bootstrap, topic, 4)
    every = tps_of(topic, 4)
    a = CpMember(bootstrap, group, "a").subscribe([topic])
    b = CpMember(bootstrap, group, "b").subscribe([topic])
    old = Member(bootstrap, classic, "old").subscribe([topic])
    try:
        settle([a, b], every, counts=[2, 2])

        def state() -> dict[str, object]:
            out = json.loads(_cli(capsys, bootstrap, "groups", "describe", group, "--state",
                                  "-o", "json"))
            assert isinstance(out, dict)
            return out

        wait_until(lambda: state()["state"] == "Stable", what="a Stable consumer group")
        s = state()
        assert s["group_type"] == "consumer" and s["members"] == 2
        assert s["protocol_type"] == "consumer" and s["assignment_strategy"] == "uniform"
        epoch = s["group_epoch"]
        assert isinstance(epoch, int) and epoch >= 1 and s["assignment_epoch"] == epoch

        members = json.loads(_cli(capsys, bootstrap, "groups", "describe", group,
                                  "--members", "--verbose", "-o", "json"))
        by_client = {m["client_id"]: m for m in members}
        assert set(by_client) == {"a", "b"}
        for name, m in (("a", a), ("b", b)):
            row = by_client[name]
            assert row["member_epoch"] == epoch
            assert row["assignment"] == row["target_assignment"]
            assert {tuple(tp) for tp in row["assignment"]} == m.assignment()

        table = parse_table(_cli(capsys, bootstrap, "groups", "describe", group, "--members",
                                 "--verbose"))
        assert {r["MEMBER-EPOCH"] for r in table} == {str(epoch)}
        assert all(r["ASSIGNMENT"] == r["TARGET-ASSIGNMENT"] for r in table)
        srow = parse_table(_cli(capsys, bootstrap, "groups", "describe", group, "--state"))[0]
        assert (srow["TYPE"], srow["GROUP-EPOCH"]) == ("consumer", str(epoch))

        # A classic group: its type, no epochs.
        wait_until(lambda: (old.poll(), bool(old.assignment()))[1], 30,
                   what="the classic member's assignment")
        crow = parse_table(_cli(capsys, bootstrap, "groups", "describe", classic, "--state"))[0]
        assert crow["TYPE"] == "classic" and "GROUP-EPOCH" not in crow

        counts = mbroker.by_type()
        assert counts.get("consumer", 0) >= 1 and counts.get("classic", 0) >= 1, counts
        # The per-group metrics read consumer groups through the query API too: members,
        # group epoch as the generation, state and assignor, rebalances (b's join made a
        # revoke: Reconciling).
        assert mbroker.of_group("samsa_group_members", group) == [({"group": group}, 2.0)]
        assert mbroker.of_group("samsa_group_generation", group) == [({"group": group}, epoch)]
        ((info, _),) = mbroker.of_group("samsa_group_info", group)
        assert (info["state"], info["protocol_type"], info["protocol"], info["leader"]) == (
            "Stable", "consumer", "uniform", "")
        ((_, rebalances),) = mbroker.of_group("samsa_group_rebalances", group)
        assert rebalances >= 1
        states = {labels["state"]: v for labels, v in mbroker.samples("samsa_groups")}
        assert {"Assigning", "Reconciling"} <= set(states) and states["Stable"] >= 2
    finally:
        for m in (a, b, old):
            m.close()
