"""``samsa serve`` refuses consumer- and share-group settings Kafka refuses (out of their
ranges or of their min/max settings): exit 2, one line naming the setting, no traceback, no
broker started."""

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
    ("group.share.record.lock.duration.ms=10000", "group.share.record.lock.duration.ms "
     "(10000) must be greater than or equal to group.share.min.record.lock.duration.ms "
     "(15000)"),
    ("group.share.max.record.lock.duration.ms=20000", "group.share.max.record.lock.duration.ms:"
     " must be between 30000 and 3600000, got 20000"),
    ("group.share.delivery.count.limit=11", "group.share.delivery.count.limit: must be between "
     "2 and 10, got 11"),
    ("group.share.min.delivery.count.limit=6", "group.share.delivery.count.limit (5) must be "
     "greater than or equal to group.share.min.delivery.count.limit (6)"),
    ("group.share.session.timeout.ms=90000", "group.share.session.timeout.ms (90000) must be "
     "less than or equal to group.share.max.session.timeout.ms (60000)"),
    ("group.share.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms (1000) must "
     "be greater than or equal to group.share.min.heartbeat.interval.ms (5000)"),
    ("group.share.max.size=1001", "group.share.max.size must be between 1 and 1000, got 1001"),
    ("group.share.partition.max.record.locks=5000", "group.share.partition.max.record.locks "
     "(5000) must be less than or equal to group.share.max.partition.max.record.locks (4000)"),
    ("group.share.min.partition.max.record.locks=99", "group.share.min.partition.max.record."
     "locks: must be between 100 and 10000, got 99"),
])
def test_serve_refuses_bad_group_settings(tmp_path: Path, setting: str, message: str) -> None:
    cmd = [str(SAMSA)] if SAMSA.exists() else [sys.executable, "-m", "samsa.cli.main"]
    r = subprocess.run([*cmd, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                        str(tmp_path / "data"), "--config", setting],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert r.stderr == f"samsa serve: {message}\n"
    assert "Traceback" not in r.stdout and not (tmp_path / "data").exists()
