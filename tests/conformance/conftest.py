"""Fixtures of the conformance suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.javakit import JavaKit, compiled


@pytest.fixture
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaKit]:
    """Apache Kafka's Java client drivers (compiled once per session); every JVM a test
    started is gone when it ends. Skips the test when Java cannot be had."""
    kit = compiled(tmp_path_factory)
    yield kit
    kit.stop_all()
