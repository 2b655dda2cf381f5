"""kcat (librdkafka's CLI) against samsa: metadata listing, produce, consume."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.conformance

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")


def _kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    out = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60,
                         check=True)
    return out.stdout


@needs_kcat
def test_kcat_produce_consume_and_list(broker: BrokerProcess) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    lines = [f"key{i}:value {i}" for i in range(100)]
    _kcat("-b", broker.bootstrap, "-P", "-t", topic, "-K:", stdin="\n".join(lines) + "\n")
    listing = _kcat("-b", broker.bootstrap, "-L", "-t", topic)
    assert f'topic "{topic}" with 1 partitions' in listing
    assert "broker 0 at 127.0.0.1" in listing
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                     "-f", "%k=%s@%o\n")
    got = consumed.strip().splitlines()
    assert got == [f"key{i}=value {i}@{i}" for i in range(100)]
