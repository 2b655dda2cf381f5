"""``samsa serve`` refuses consumer-group settings Kafka refuses: exit 2, one line naming the
setting, no traceback, no broker started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SAMSA = Path(sys.executable).with_name("samsa")


@pytest.mark.parametrize(("setting", "message"), [
    ("group.consumer.migration.policy=bogus", "group.consumer.migration.policy: invalid value "
     "'bogus', expected one of disabled, upgrade, downgrade, bidirectional"),
    ("group.consumer.heartbeat.interval.ms=50000", "group.consumer.heartbeat.interval.ms "
     "(50000) must be less than or equal to group.consumer.max.heartbeat.interval.ms (15000)"),
])
def test_serve_refuses_bad_group_settings(tmp_path: Path, setting: str, message: str) -> None:
    cmd = [str(SAMSA)] if SAMSA.exists() else [sys.executable, "-m", "samsa.cli.main"]
    r = subprocess.run([*cmd, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                        str(tmp_path / "data"), "--config", setting],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert r.stderr == f"samsa serve: {message}\n"
    assert "Traceback" not in r.stdout and not (tmp_path / "data").exists()
