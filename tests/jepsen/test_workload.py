"""The Jepsen-style transactional workload against one real broker that a nemesis kills
(-9) and restarts a few times: the checker must find no anomaly, and the app must have
processed every input exactly once.

``JEPSEN_SEED=n`` repeats a run's choices (the seed is printed, with the history's summary
and the nemesis's log).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess
from tests.jepsen.checker import End, OffsetsSeen, Read, check
from tests.jepsen.workload import KillBroker, Run, Spec, execute

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "transaction.state.log.num.partitions": "3",
}


def test_transactions_under_broker_kills(tmp_path: Path) -> None:
    seed = int(os.environ.get("JEPSEN_SEED", random.randrange(1 << 16)))
    print(f"JEPSEN_SEED={seed}")
    broker = BrokerProcess(tmp_path / "data", CONFIG).start()
    run = Run(Spec(seed), KillBroker(broker))
    try:
        history = execute(run)
    finally:
        broker.kill()
    result = check(history)
    (tmp_path / "events.log").write_text("\n".join(run.events))
    app = Counter(op.outcome.value for op in history if isinstance(op, End)
                  and op.txn.startswith("app."))
    sessions = {op.session for op in history if isinstance(op, Read)
                and op.session.startswith("app-")}
    print(f"app: {dict(app)} in {len(sessions)} sessions")
    report = "\n".join([f"JEPSEN_SEED={seed}", result.summary(), *run.events[-30:],
                        *run.errors, f"events: {tmp_path / 'events.log'}"])
    print(report)
    assert not run.errors, report
    assert result.valid, report
    assert sum("kill" in e for e in run.events) == run.spec.faults, report
    assert result.stats["committed"] > 10 and result.stats["aborted"] > 0, report
    # every input was processed: the group's final offsets are the end of the source
    final = {op.tp: op.offset for op in history if isinstance(op, OffsetsSeen) and op.final}
    assert final == run.input_ends, report
