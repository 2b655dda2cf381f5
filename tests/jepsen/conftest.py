"""The cluster workload's database: the cluster tests' fixture."""

from tests.cluster.conftest import pg_dsn

__all__ = ["pg_dsn"]
