"""The node coordinating a group SIGKILLed on three samsa nodes over PostgreSQL, for every
client library (confluent-kafka, Apache Kafka's Java client 4.3, ``samsa.Consumer``) and
both group protocols (``classic``, KIP-848 ``consumer``), in a stable group and while a
third member's join rebalances it; then the node is restarted and handed the group's shard
back under the same members (see :mod:`tests.cluster.failover`).

Each run: every acknowledged record is consumed, the commits reach the end offsets through
the new coordinator, no partition is held by two members at once (the members' own rebalance
callbacks, replayed in time order), no member fails fatally. ``-s`` prints the failover time
of each (kill -> Stable with every partition assigned and records flowing from every
partition); benchmarks/cluster.py prints the same figures. One cluster serves the module: the
killed node is restarted after each run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster import failover
from tests.cluster.test_cluster_clients import Cluster, three_nodes
from tests.conformance.javakit import JavaKit
from tests.pg import PostgresServer

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

KINDS = [(c, p) for c in failover.CLIENTS for p in failover.PROTOCOLS]


@pytest.fixture(scope="module")
def failover_cluster(tmp_path_factory: pytest.TempPathFactory,
                     postgres: PostgresServer) -> Iterator[Cluster]:
    dsn = postgres.create_database()
    with three_nodes(tmp_path_factory.mktemp("failover"), dsn, failover.CLUSTER_CONFIG) as c:
        yield c


@pytest.mark.parametrize("moment", failover.MOMENTS)
@pytest.mark.parametrize("kind", KINDS, ids=["-".join(k) for k in KINDS])
def test_group_survives_the_coordinator_node(failover_cluster: Cluster, kind: tuple[str, str],
                                             moment: str, request: pytest.FixtureRequest
                                             ) -> None:
    def java() -> JavaKit:
        kit = request.getfixturevalue("java")
        assert isinstance(kit, JavaKit)
        return kit

    group = f"failover-{'-'.join(kind)}-{moment}"
    outcome = failover.run(failover_cluster, kind, moment, group, java)
    print(outcome.line())
    assert not outcome.missing, f"{len(outcome.missing)} acknowledged records not consumed"
    assert outcome.double_owned == []
    assert outcome.fatal == {}
    assert outcome.handed_back
