"""The range reader retries a fetch that timed out (a hung leader) instead of giving up."""

from __future__ import annotations

import itertools
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from samsa import TopicPartition
from samsa.spark.fetch import RangeReader
from tests.brokerproc import BrokerProcess
from tests.spark.conftest import create_topic, produce, unique

pytestmark = pytest.mark.spark

TIMEOUT_MS = 3000
HUNG_S = 4.5  # the fetch times out at 3 s; the retry's leader lookup waits until 6 s


def test_fetch_timed_out_then_retried(fresh_broker: BrokerProcess) -> None:
    """A fetch that times out is a failure like a lost connection: the reader refreshes
    the leader and fetches again. The no-progress limit counts from that failure, not from
    the last progress (the timed-out fetch alone used all of it)."""
    broker = fresh_broker.start()
    topic = create_topic(broker.bootstrap, unique("hung"), 1)
    produce(broker.bootstrap, topic, [b"%04d" % i * 250 for i in range(200)], batch_size=4000)
    assert broker.proc is not None
    pid = broker.proc.pid
    with RangeReader(broker.bootstrap, fetch_max_bytes=4096,
                     request_timeout_ms=TIMEOUT_MS) as reader:
        chunks: Iterator[tuple[bytes, int, int]] = reader.chunks(
            TopicPartition(topic, 0), 0, 200, fail_on_data_loss=True)
        spans = [next(chunks)[1:]]
        os.kill(pid, signal.SIGSTOP)  # hung, as a frozen machine: no reset, no answer
        resume = threading.Timer(HUNG_S, os.kill, (pid, signal.SIGCONT))
        resume.start()
        try:
            spans += [(pos, nxt) for _, pos, nxt in chunks]
        finally:
            resume.cancel()
            os.kill(pid, signal.SIGCONT)
    assert spans[0][0] == 0 and spans[-1][1] == 200
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert len(spans) > 3  # several fetches, so some went to the hung broker
