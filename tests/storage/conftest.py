"""Fixtures of the storage contract: one kit per engine (:mod:`tests.storage.kits`); the
PostgreSQL one runs on a database of its own (skipped where PostgreSQL cannot run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import pg_dsn  # noqa: F401 - the cluster tests' database fixture
from tests.storage.kits import KITS, Kit


@pytest.fixture(params=sorted(KITS))
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    name = request.param
    dsn = request.getfixturevalue("pg_dsn") if name == "postgresql" else ""
    made = KITS[name](tmp_path, dsn)
    yield made
    made.close()
