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

The data partitions are modelled with samsa's own partition and consumer code: a producer
sends a value to each partition its AddPartitionsToTxn added (checked and tracked by the
partition's :class:`~samsa.log.producer_state.ProducerStateManager`), markers are appended
as they are written, and a read_committed reader tails every partition up to its last
stable offset, leaving out aborted transactions as samsa's consumer does. After every step
a restarted partition's replayed producer state equals the live one; at the end the
history (transactions as the coordinator decided them, the reader's reads and a final
read) goes through the Jepsen-style checker (:mod:`tests.jepsen.checker`): no aborted
read, no torn or lost transaction, no duplicate, per-producer order, no read skipped
past a committed value.

A failing seed is a regression test: add it to ``SEEDS``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode

from samsa.client.fetcher import AbortedFilter
from samsa.log.producer_state import ProducerStateManager
from samsa.protocol.batch import BatchHeader
from samsa.protocol.records import DecodedBatch
from samsa.transactions import AddPartitions, EndTxn, InitProducerId, TxnState
from samsa.transactions.coordinator import Markers, TxnAnswer
from tests.coordinator.fake_timer import FakeTimer
from tests.jepsen.checker import Begin, End, Op, Outcome, Read, Send, check
from tests.transactions.harness import TxnHarness

E = ErrorCode
S = TxnState
IDS = ("a", "b", "c")
PARTITIONS = tuple(("t", p) for p in range(4))
SEEDS = range(20)
STEPS = 300


TRANSACTIONAL, CONTROL = 0x10, 0x20


@dataclass
class DataPartition:
    """A partition's batches (one record each) and its producer state, as a log keeps
    them; markers carry their type (0 abort, 1 commit)."""

    batches: list[tuple[BatchHeader, int | None, str]] = field(default_factory=list)
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)

    def append(self, pid: int, epoch: int, value: str, control: int | None = None) -> None:
        entry = self.producers.get(pid)
        seq = -1 if control is not None else (
            entry.last_seq + 1 if entry is not None and entry.epoch == epoch else 0)
        attributes = TRANSACTIONAL | (CONTROL if control is not None else 0)
        offset = len(self.batches)
        header = BatchHeader(0, offset, 0, 0, 2, 0, attributes, 0, 0, 0, pid, epoch, seq, 1)
        duplicate, staged = self.producers.check([header])  # raises if refused
        assert duplicate is None, (pid, epoch, value)
        self.producers.commit(staged)
        self.producers.track(header, control)
        self.batches.append((header, control, value))

    def read_committed(self, start: int) -> list[tuple[int, str]]:
        """(offset, value) from ``start`` up to the last stable offset, aborted transactions
        left out: the broker's LSO and aborted list, the consumer's filter."""
        lso = self.producers.last_stable_offset(len(self.batches))
        aborted = tuple((a.producer_id, a.first_offset)
                        for a in self.producers.aborted_between(start, lso))
        skip = AbortedFilter(aborted)
        out = []
        for header, _, value in self.batches[start:lso]:
            batch = DecodedBatch(header.base_offset, header.next_offset, 0, header.is_control,
                                 True, header.producer_id, [], header.producer_epoch)
            if not skip(batch) and not header.is_control:
                out.append((header.base_offset, value))
        return out

    def check_replay(self) -> None:
        """A restarted partition rebuilds the same producer state from its batches."""
        fresh = ProducerStateManager()
        for header, control, _ in self.batches:
            fresh.replay(header, control)
        assert (fresh.entries, fresh.ongoing, fresh.aborted) == (
            self.producers.entries, self.producers.ongoing, self.producers.aborted)


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
    data: dict[tuple[str, int], DataPartition] = field(
        default_factory=lambda: {tp: DataPartition() for tp in PARTITIONS})
    history: list[Op] = field(default_factory=list)
    read_to: dict[tuple[str, int], int] = field(default_factory=dict)
    sent: int = 0

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
                self.history.append(Begin(self.txn_name(self.key(tid)), tid))
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

    @staticmethod
    def txn_name(key: tuple[str, int]) -> str:
        return f"{key[0]}.{key[1]}"

    def send(self, client: Client, parts: tuple[tuple[str, int], ...]) -> None:
        """The client produces one value to each partition it added."""
        for tp in parts:
            self.sent += 1
            value = f"v{self.sent}"
            self.data[tp].append(client.pid, client.epoch, value)
            self.history.append(Send(self.txn_name(self.key(client.tid)), tp, value))

    def write_markers(self) -> None:
        """The markers asked for are appended to their partitions, then complete."""
        for m in self.h.markers:
            for tp in m.partitions:
                self.data[tp].append(m.producer_id, m.producer_epoch, "", int(m.commit))
        self.h.write_markers()

    def tail(self, final: bool = False) -> None:
        """The reader reads what became readable (or, ``final``, every partition again)."""
        session = "final" if final else "live"
        for tp, part in self.data.items():
            start = 0 if final else self.read_to.get(tp, 0)
            for offset, value in part.read_committed(start):
                self.history.append(Read(session, tp, offset, value, final))
                if not final:
                    self.read_to[tp] = offset + 1

    def check(self) -> None:
        self.tail()
        for part in self.data.values():
            part.check_replay()
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

    def pick(self) -> Client:
        """Mostly the newest instance of an id, sometimes any (a zombie)."""
        if self.rng.random() < 0.3:
            return self.rng.choice(self.clients)
        newest = {c.tid: c for c in self.clients}
        return self.rng.choice(list(newest.values()))

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
            client = self.pick()
            parts = tuple(rng.sample(PARTITIONS, rng.randint(1, 2)))
            before_key = self.key(client.tid)
            a = self.call(client, AddPartitions(client.tid, client.pid, client.epoch, parts))
            if a.error_code == E.none:
                key = self.key(client.tid)
                assert key == before_key or self.state(client.tid) is S.ONGOING
                self.added.setdefault(key, set()).update(parts)
                self.send(client, parts)
        elif roll < 0.70:
            client = self.pick()
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
            self.write_markers()
            self.seen_markers = 0
            self.observe(before)
        else:  # the coordinator restarts: markers not written yet are lost with it
            self.h.load()
            self.seen_markers = 0
            self.observe(before)

    def settle(self) -> None:
        """Write every marker and let every timeout fire: nothing stays undecided."""
        for _ in range(5):
            before = {tid: self.state(tid) for tid in IDS}
            self.write_markers()
            self.seen_markers = 0
            self.h.timer.advance(10_000)
            self.observe(before)
        self.write_markers()
        for tid in IDS:
            assert self.state(tid) not in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT), tid

    def check_history(self) -> None:
        """Every transaction ends as the coordinator decided it; a final read takes every
        partition again; the checker finds no anomaly."""
        for key in self.added:
            decided = self.decided.get(key)
            outcome = (Outcome.UNKNOWN if decided is None
                       else Outcome.COMMITTED if decided else Outcome.ABORTED)
            self.history.append(End(self.txn_name(key), outcome))
        self.tail(final=True)
        result = check(self.history)
        assert result.valid, result.summary()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_simulation(seed: int) -> None:
    sim = Sim(random.Random(seed))
    for _ in range(STEPS):
        sim.step()
        sim.check()
    sim.settle()
    sim.check()
    sim.check_history()
    assert sim.decided, "the run decided no transaction"
    assert any(isinstance(op, Read) and not op.final for op in sim.history)
