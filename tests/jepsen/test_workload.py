"""The Jepsen-style transactional workload against real brokers that a nemesis kills (-9)
and restarts a few times: one broker, and three nodes over PostgreSQL with the
transaction coordinator's node killed. The checker must find no anomaly, and the app must
have processed every input exactly once.

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
from tests.cluster.test_cluster_clients import three_nodes
from tests.jepsen.checker import End, OffsetsSeen, Read, check
from tests.jepsen.nemesis import KillBroker, KillCoordinatorNode, Nemesis
from tests.jepsen.workload import Run, Spec, execute

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

TXN_PARTITIONS = 3
CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
}


def seed() -> int:
    value = int(os.environ.get("JEPSEN_SEED", random.randrange(1 << 16)))
    print(f"JEPSEN_SEED={value}")
    return value


def run_and_check(tmp_path: Path, spec: Spec, nemesis: Nemesis) -> None:
    run = Run(spec, nemesis)
    history = execute(run)
    result = check(history)
    (tmp_path / "events.log").write_text("\n".join(run.events))
    app = Counter(op.outcome.value for op in history if isinstance(op, End)
                  and op.txn.startswith("app."))
    sessions = {op.session for op in history if isinstance(op, Read)
                and op.session.startswith("app-")}
    report = "\n".join([f"JEPSEN_SEED={spec.seed}", result.summary(),
                        f"app: {dict(app)} in {len(sessions)} sessions", *run.events[-30:],
                        *run.errors, f"events: {tmp_path / 'events.log'}"])
    print(report)
    assert not run.errors, report
    assert result.valid, report
    assert sum("kill" in e for e in run.events) == spec.faults, report
    assert result.stats["committed"] > 10 and result.stats["aborted"] > 0, report
    # every input was processed: the group's final offsets are the end of the source
    final = {op.tp: op.offset for op in history if isinstance(op, OffsetsSeen) and op.final}
    assert final == run.input_ends, report


def test_transactions_under_broker_kills(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", CONFIG).start()
    try:
        run_and_check(tmp_path, Spec(seed()), KillBroker(broker))
    finally:
        broker.kill()


def test_transactions_under_coordinator_node_kills(tmp_path: Path, pg_dsn: str) -> None:
    """Three nodes over PostgreSQL; the nemesis kills the node coordinating a writer's or
    the app's transactional id (its ``__transaction_state`` lease) twice."""
    with three_nodes(tmp_path, pg_dsn, CONFIG) as cluster:
        tids = ("w0", "w1", "w2", "app")
        spec = Spec(seed(), faults=2)
        run_and_check(tmp_path, spec, KillCoordinatorNode(cluster, tids, TXN_PARTITIONS))
