"""Fixtures of the cluster tests: one throwaway PostgreSQL per session, a database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import PostgresServer, unavailable_reason


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server on a free port of 127.0.0.1, stopped and removed afterwards."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def pg_dsn(postgres: PostgresServer) -> str:
    """A fresh database of the test's own."""
    return postgres.create_database()
