"""The clickstream example: restart from checkpoints loses and duplicates nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from examples.clickstream import generator, run

from tests.brokerproc import BrokerProcess

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def test_expected_counts_only_closed_windows() -> None:
    events = generator.clicks(1200, 0, step_ms=100)  # 2 minutes of event time
    assert run.expected_counts(events) == {}
    events = generator.clicks(3000, 0, step_ms=100)  # 5 minutes: minutes 0 and 1 closed
    counts = run.expected_counts(events)
    assert {w[0].minute for w in counts} == {0, 1}
    assert sum(counts.values()) == 1200


def test_clickstream_demo(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    run.demo(spark, broker.bootstrap, tmp_path, events=3000, topic="clicks-demo",
             results="page-counts-demo")
