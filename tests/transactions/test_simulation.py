"""A seeded simulation of the transaction coordinator (TigerBeetle's VOPR in miniature):
producers of a few transactional ids (some v1, some v2, some turned zombie) init, add
partitions, commit and abort at random while the clock runs (timeouts fire), markers are
written late or lost, and the coordinator restarts from its log. After every step:

* replaying the log rebuilds exactly the live state;
* a transaction is decided once: every marker of it (a reload writes them again) carries
  the same outcome and exactly the partitions it added;
* an EndTxn answered NONE got the outcome it asked for (no acknowledged commit is lost or
  turned into an abort, and the reverse);
* an id's producer epoch never goes back;
* once markers are written and the clock passes every timeout, nothing is left undecided.

A failing seed is a regression test: add it to ``SEEDS``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode

from samsa.transactions import AddPartitions, EndTxn, InitProducerId, TxnState
from samsa.transactions.coordinator import Markers, TxnAnswer
from tests.coordinator.fake_timer import FakeTimer
from tests.transactions.harness import TxnHarness

E = ErrorCode
S = TxnState
IDS = ("a", "b", "c")
PARTITIONS = tuple(("t", p) for p in range(4))
SEEDS = range(20)
STEPS = 300


@dataclass
class Client:
    """What a producer instance believes: its id and epoch (stale for a zombie)."""

    tid: str
    tv2: bool
    pid: int = -1
    epoch: int = -1


@dataclass
class Sim:
    rng: random.Random
    h: TxnHarness = field(default_factory=lambda: TxnHarness(partitions=2))
    clients: list[Client] = field(default_factory=list)
    #: per id: the number of its current (or last) transaction, and what it added
    instance: dict[str, int] = field(default_factory=dict)
    added: dict[tuple[str, int], set[tuple[str, int]]] = field(default_factory=dict)
    decided: dict[tuple[str, int], bool] = field(default_factory=dict)
    acked: dict[tuple[str, int], bool] = field(default_factory=dict)
    epochs: dict[str, tuple[int, int]] = field(default_factory=dict)
    seen_markers: int = 0

    def state(self, tid: str) -> S | None:
        txn = self.h.state(tid)
        return None if txn is None else txn.state

    def key(self, tid: str) -> tuple[str, int]:
        return tid, self.instance.get(tid, 0)

    # -- observing the coordinator ---------------------------------------------------
    def observe(self, before: dict[str, S | None]) -> None:
        """Attribute new transactions and new markers after a step."""
        for tid in IDS:
            now, was = self.state(tid), before[tid]
            deciding = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
            if (now is S.ONGOING and was is not S.ONGOING) or (
                    now in deciding and was not in (S.ONGOING, *deciding)):  # TV2 empty abort
                self.instance[tid] = self.instance.get(tid, 0) + 1
                self.added[self.key(tid)] = set()
        for m in self.h.markers[self.seen_markers:]:
            self.check_marker(m)
        self.seen_markers = len(self.h.markers)

    def check_marker(self, m: Markers) -> None:
        key = self.key(m.transactional_id)
        was = self.decided.setdefault(key, m.commit)
        assert was == m.commit, f"{key} decided {was}, then a marker says {m.commit}"
        assert set(m.partitions) == self.added.get(key, set()), (key, m.partitions)
        if key in self.acked:
            assert self.acked[key] == m.commit, f"{key} acknowledged {self.acked[key]}"

    def check(self) -> None:
        fresh = TxnHarness(partitions=2, timer=FakeTimer(self.h.timer.now_ms))
        fresh.log = {p: list(records) for p, records in self.h.log.items()}
        fresh.load()
        for tid in IDS:
            assert fresh.state(tid) == self.h.state(tid), tid
            txn = self.h.state(tid)
            if txn is not None:
                last = self.epochs.get(tid)
                if last is not None and last[0] == txn.producer_id:
                    assert txn.producer_epoch >= last[1], (tid, last, txn)
                self.epochs[tid] = (txn.producer_id, txn.producer_epoch)

    # -- steps ------------------------------------------------------------------------
    def call(self, client: Client, event: InitProducerId | AddPartitions | EndTxn
             ) -> TxnAnswer:
        before = {tid: self.state(tid) for tid in IDS}
        answer = self.h.call(event)
        self.observe(before)
        return answer

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        before = {tid: self.state(tid) for tid in IDS}
        if roll < 0.15 or not self.clients:
            tid = rng.choice(IDS)
            client = Client(tid, tv2=rng.random() < 0.5)
            a = self.call(client, InitProducerId(tid, rng.choice((2_000, 5_000)),
                                                 self.h.allocate()))
            if a.error_code == E.none:
                client.pid, client.epoch = a.producer_id, a.producer_epoch
                self.clients.append(client)  # older instances of tid live on as zombies
        elif roll < 0.50:
            client = rng.choice(self.clients)
            parts = tuple(rng.sample(PARTITIONS, rng.randint(1, 2)))
            before_key = self.key(client.tid)
            a = self.call(client, AddPartitions(client.tid, client.pid, client.epoch, parts))
            if a.error_code == E.none:
                key = self.key(client.tid)
                assert key == before_key or self.state(client.tid) is S.ONGOING
                self.added.setdefault(key, set()).update(parts)
        elif roll < 0.70:
            client = rng.choice(self.clients)
            commit = rng.random() < 0.6
            key = self.key(client.tid)
            was = self.state(client.tid)
            a = self.call(client, EndTxn(client.tid, client.pid, client.epoch, commit,
                                         bump=client.tv2))
            if a.error_code == E.none and was is S.ONGOING:
                self.acked[key] = commit
                assert self.decided.get(key) == commit, (key, self.decided.get(key))
            if a.error_code == E.none and client.tv2:
                client.pid, client.epoch = a.producer_id, a.producer_epoch
        elif roll < 0.82:
            self.h.timer.advance(rng.randint(100, 3_000))
            self.observe(before)
        elif roll < 0.95:
            written = self.h.write_markers()
            self.seen_markers = 0
            self.observe(before)
            assert written is not None
        else:  # the coordinator restarts: markers not written yet are lost with it
            self.h.load()
            self.seen_markers = 0
            self.observe(before)

    def settle(self) -> None:
        """Write every marker and let every timeout fire: nothing stays undecided."""
        for _ in range(5):
            before = {tid: self.state(tid) for tid in IDS}
            self.h.write_markers()
            self.seen_markers = 0
            self.h.timer.advance(10_000)
            self.observe(before)
        self.h.write_markers()
        for tid in IDS:
            assert self.state(tid) not in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT), tid


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_simulation(seed: int) -> None:
    sim = Sim(random.Random(seed))
    for _ in range(STEPS):
        sim.step()
        sim.check()
    sim.settle()
    sim.check()
    assert sim.decided, "the run decided no transaction"
