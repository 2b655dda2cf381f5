"""Transactions in the PostgreSQL partition log across a change of leader: the new leader's
producer state has the aborted transactions (read_committed skips them) and the open ones
(the last stable offset) the previous leader had."""

from __future__ import annotations

import time

from samsa.log.producer_state import AbortedTxn
from samsa.protocol.records import encode_marker
from samsa.storage.pg.engine import PgEngine
from tests.cluster.test_pg_log import claim, run
from tests.log.helpers import batch, values
from tests.log.test_transactions import txn_batch


def test_aborted_and_open_transactions_survive_a_leader_change(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        now = int(time.time() * 1000)
        old = await claim(e1, pid)
        appended = [old.append(batch(*values(1)), now)]                   # 0 plain
        for seq in range(0, 14, 2):  # producer 1: more batches than the last five kept
            appended.append(old.append(txn_batch(1, seq), now))           # 1-14
        appended.append(old.append(encode_marker(False, 1, 0, 0, now), now))  # 15 abort
        appended.append(old.append(txn_batch(2, 0), now))                 # 16-17 committed
        appended.append(old.append(encode_marker(True, 2, 0, 0, now), now))   # 18 commit
        appended.append(old.append(txn_batch(3, 0), now))                 # 19-20 open
        appended.append(old.append(batch(*values(1)), now))               # 21 plain
        await old.wait_durable(appended[-1].last_offset + 1)
        before = (list(old.producers.aborted), old.producers.last_stable_offset(22))
        assert before == ([AbortedTxn(1, 1, 15)], 19)

        new = await claim(e2, pid)
        assert new.producers.aborted == [AbortedTxn(1, 1, 15)]
        assert new.producers.last_stable_offset(new.log_end_offset) == 19
        assert new.producers.aborted_between(0, 22) == [AbortedTxn(1, 1, 15)]
        # the open transaction ends on the new leader: the LSO moves to the log end
        info = new.append(encode_marker(True, 3, 0, 0, now), now)
        await new.wait_durable(info.last_offset + 1)
        assert new.producers.last_stable_offset(new.log_end_offset) == new.log_end_offset

    run(pg_dsn, scenario)
