from collections.abc import Iterator

import pytest

from .harness import LIVE


@pytest.fixture(autouse=True)
def replay_after_every_scenario() -> Iterator[None]:
    """After each test, replaying every record it wrote rebuilds each live shard exactly."""
    LIVE.clear()
    yield
    for ctx in LIVE:
        ctx.check_replay()
    LIVE.clear()
