"""Fixtures of the cluster tests: a database per test on the session's PostgreSQL
(``postgres`` in tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.pg import PostgresServer


@pytest.fixture
def pg_dsn(postgres: PostgresServer) -> str:
    """A fresh database of the test's own."""
    return postgres.create_database()
