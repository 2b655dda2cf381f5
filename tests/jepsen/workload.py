"""The Jepsen-style transactional workload: real librdkafka (confluent-kafka) clients against
real brokers, recording a history for :mod:`tests.jepsen.checker` while a nemesis injects
faults.

* **writers**: transactional producers that send 1 to 4 values to random partitions of
  ``topic`` and commit or abort at random;
* **readers**: read_committed consumers assigned every partition from the start;
* **the app**: consume-transform-produce: a group member (read_committed) reads inputs
  from ``source`` that a transactional producer seeded, writes one output to ``sink`` per
  input and sends the group's offsets in the same transaction; it aborts some transactions
  and restarts (a new consumer and producer) after every abort or error, resuming from
  the group's committed offsets;
* **the nemesis** (:class:`~tests.jepsen.nemesis.Nemesis`) runs on its own thread.

After the run the nemesis heals, the app finishes the inputs with no faults, every open
transaction ends (by its timeout), and a final read takes every partition from its start
to its end. Every loop and call is bounded by a deadline or a timeout. The seed decides
every choice of the clients and the nemesis (the interleaving is the machine's).
"""

from __future__ import annotations

import random
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.jepsen.checker import (
    TP,
    Begin,
    End,
    OffsetsSeen,
    Op,
    Outcome,
    Read,
    Send,
    SendOffsets,
)
from tests.jepsen.nemesis import Nemesis

CALL_S = 10.0
"""The timeout of every blocking client call."""


@dataclass
class Spec:
    seed: int
    partitions: int = 4
    writers: int = 3
    readers: int = 2
    inputs: int = 400
    run_s: float = 30.0
    faults: int = 3
    abort_p: float = 0.3
    txn_timeout_ms: int = 5000


@dataclass
class Run:
    """One run: its history (appended from many threads) and what the nemesis did."""

    spec: Spec
    nemesis: Nemesis
    topic: str = field(default_factory=lambda: f"jep-{uuid.uuid4().hex[:6]}")
    history: list[Op] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    app_stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)
    #: the app's goal: per source partition, the offset after its last input
    input_ends: dict[TP, int] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.topic + "-src"

    @property
    def sink(self) -> str:
        return self.topic + "-out"

    @property
    def group(self) -> str:
        return self.topic + "-app"

    def record(self, *ops: Op) -> None:
        with self.lock:
            self.history.extend(ops)

    def note(self, event: str) -> None:
        with self.lock:
            self.events.append(f"{time.monotonic():.1f} {event}")

    def rng(self, name: str) -> random.Random:
        return random.Random(f"{self.spec.seed}-{name}")


# -- clients -----------------------------------------------------------------------------
def _conf(run: Run) -> dict[str, str | int | float | bool]:
    """What every client is given: librdkafka's logs of refused connections silenced (the
    nemesis causes them), and no re-bootstrap: after a few refused connections librdkafka
    2.x decommissions its brokers and a pending ``send_offsets_to_transaction`` then hangs
    past its timeout (librdkafka issues #5456 and #5511)."""
    return {"bootstrap.servers": run.nemesis.bootstrap, "log_level": 0,
            "metadata.recovery.strategy": "none"}


def _producer(run: Run, tid: str, stop: threading.Event) -> Producer | None:
    """A transactional producer with ``init_transactions`` done (retried while the broker
    is down), or None once ``stop`` is set."""
    while not stop.is_set():
        p = Producer({**_conf(run), "transactional.id": tid,
                      "acks": "all", "transaction.timeout.ms": run.spec.txn_timeout_ms,
                      "socket.connection.setup.timeout.ms": 3000,
                      "reconnect.backoff.max.ms": 500})
        try:
            p.init_transactions(CALL_S)
            return p
        except KafkaException as e:
            run.note(f"{tid} init_transactions: {e.args[0]}")
            time.sleep(0.2)
    return None


def _read(session: str, m: Message, final: bool = False) -> Read:
    """The checker's record of a consumed message."""
    topic, partition, offset, value = m.topic(), m.partition(), m.offset(), m.value()
    assert topic is not None and partition is not None and offset is not None
    return Read(session, (topic, partition), offset, (value or b"").decode(), final)


def _delivery(run: Run, txn: str, err: KafkaError | None) -> None:
    """A failed delivery says why a commit failed (a purged one, by an abort, does not)."""
    if err is not None and err.code() != KafkaError._PURGE_QUEUE:
        run.note(f"{txn} delivery: {err}")


def _end(run: Run, p: Producer, txn: str, commit: bool) -> Outcome:
    """Commit or abort; the outcome the client learnt (retriable errors are retried)."""
    for _ in range(3):
        try:
            if commit:
                p.commit_transaction(CALL_S)
                return Outcome.COMMITTED
            p.abort_transaction(CALL_S)
            return Outcome.ABORTED
        except KafkaException as e:
            err: KafkaError = e.args[0]
            run.note(f"{txn} {'commit' if commit else 'abort'}: {err}")
            if err.retriable():
                continue
            if err.txn_requires_abort():
                commit = False
                continue
            return Outcome.UNKNOWN  # fatal (fenced): the producer must be replaced
    return Outcome.UNKNOWN


def writer(run: Run, name: str) -> None:
    rng = run.rng(name)
    p = _producer(run, name, run.stop)
    n = 0
    while p is not None and not run.stop.is_set():
        txn = f"{name}.{n}"
        n += 1
        try:
            p.begin_transaction()
        except KafkaException as e:
            run.note(f"{txn} begin: {e.args[0]}")
            p = _producer(run, name, run.stop)
            continue
        run.record(Begin(txn, name))
        commit = rng.random() >= run.spec.abort_p
        for i in range(rng.randint(1, 4)):
            partition = rng.randrange(run.spec.partitions)
            value = f"{txn}.{i}"
            try:
                p.produce(run.topic, value=value, partition=partition,
                          on_delivery=lambda err, m, txn=txn: _delivery(run, txn, err))
            except (KafkaException, BufferError) as e:
                run.note(f"{txn} produce: {e}")
                commit = False
                break
            run.record(Send(txn, (run.topic, partition), value))
        outcome = _end(run, p, txn, commit)
        run.record(End(txn, outcome))
        if outcome is Outcome.UNKNOWN:
            p = _producer(run, name, run.stop)


def reader(run: Run, name: str) -> None:
    c = Consumer({**_conf(run), "group.id": name,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(run.topic, p, 0) for p in range(run.spec.partitions)])
    try:
        while not run.stop.is_set():
            m = c.poll(0.2)
            if m is not None and not m.error():
                run.record(_read(name, m))
    finally:
        c.close()


def seed_inputs(run: Run) -> None:
    """The app's inputs, written by a transactional producer (so the checker knows them);
    ``run.input_ends`` from their delivery reports."""
    p = _producer(run, "seed", threading.Event())
    assert p is not None

    def delivered(err: KafkaError | None, m: Message) -> None:
        assert err is None, err
        partition, offset = m.partition(), m.offset()
        assert partition is not None and offset is not None
        tp = (run.source, partition)
        run.input_ends[tp] = max(run.input_ends.get(tp, 0), offset + 1)

    per_txn = 20
    for n in range(run.spec.inputs // per_txn):
        txn = f"seed.{n}"
        p.begin_transaction()
        run.record(Begin(txn, "seed"))
        for i in range(per_txn):
            value = f"{txn}.{i}"
            p.produce(run.source, value=value, partition=i % 2, on_delivery=delivered)
            run.record(Send(txn, (run.source, i % 2), value))
        p.commit_transaction(CALL_S)
        run.record(End(txn, Outcome.COMMITTED))
    p.flush(CALL_S)


def app(run: Run) -> None:
    """Consume-transform-produce until told to stop (after the run, once every input is
    processed or the deadline passes)."""
    rng = run.rng("app")
    incarnation = 0
    txns = 0
    while not run.app_stop.is_set():
        incarnation += 1
        session = f"app-{incarnation}"
        p = _producer(run, "app", run.app_stop)
        if p is None:
            return
        c = Consumer({**_conf(run), "group.id": run.group,
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        assignments = [0]

        def assigned(consumer: Consumer, partitions: list[TopicPartition],
                     count: list[int] = assignments) -> None:
            count[0] += 1  # positions restart from the committed offsets: a new session

        c.subscribe([run.source], on_assign=assigned)
        try:
            while not run.app_stop.is_set():
                batch: list[Read] = []
                deadline = time.monotonic() + 1.0
                while len(batch) < 5 and time.monotonic() < deadline:
                    m = c.poll(0.1)
                    if m is not None and not m.error():
                        batch.append(_read(f"{session}.{assignments[0]}", m))
                if not batch:
                    continue
                run.record(*batch)
                txn = f"app.{txns}"
                txns += 1
                p.begin_transaction()
                run.record(Begin(txn, "app"))
                offsets: dict[TP, int] = {}
                for i, r in enumerate(batch):
                    value = f"{txn}.{i}"
                    p.produce(run.sink, value=value, partition=0)
                    run.record(Send(txn, (run.sink, 0), value, source=(*r.tp, r.offset)))
                    offsets[r.tp] = r.offset + 1
                tps = [TopicPartition(t, p_, o) for (t, p_), o in offsets.items()]
                p.send_offsets_to_transaction(tps, c.consumer_group_metadata(), CALL_S)
                run.record(SendOffsets(txn, run.group, tuple(sorted(offsets.items()))))
                commit = rng.random() >= run.spec.abort_p / 2
                outcome = _end(run, p, txn, commit)
                run.record(End(txn, outcome))
                if outcome is not Outcome.COMMITTED:
                    break  # restart: resume from the committed offsets
                if not run.stop.is_set():  # spread the inputs over the faults
                    time.sleep(rng.uniform(0.0, 0.2))
        except KafkaException as e:
            run.note(f"{session}: {e.args[0]}")
            # a transaction begun and not ended: its outcome is unknown to the app
        finally:
            _observe_offsets(run, c, session)
            c.close()
            p.flush(0)


def _observe_offsets(run: Run, c: Consumer, session: str, final: bool = False) -> None:
    try:
        committed = c.committed([TopicPartition(run.source, i) for i in range(2)], CALL_S)
    except KafkaException as e:
        run.note(f"{session} committed: {e.args[0]}")
        return
    for tp in committed:
        if tp.offset >= 0:
            run.record(OffsetsSeen(run.group, (run.source, tp.partition), tp.offset, final))


def nemesis_loop(run: Run) -> None:
    rng = run.rng("nemesis")
    for _ in range(run.spec.faults):
        if run.stop.wait(rng.uniform(3.0, run.spec.run_s / (run.spec.faults + 1))):
            return
        run.note(run.nemesis.fault(rng))
        time.sleep(rng.uniform(0.3, 2.0))
        run.note(run.nemesis.heal())


# -- a whole run ---------------------------------------------------------------------------
def _threads(run: Run, target: Callable[..., None], *args: object) -> threading.Thread:
    def body() -> None:
        try:
            target(run, *args)
        except Exception as e:  # a client died: the history says what it did
            run.errors.append(f"{target.__name__}{args}: {e!r}")
    t = threading.Thread(target=body, daemon=True, name=f"{target.__name__}{args}")
    t.start()
    return t


def execute(run: Run) -> list[Op]:
    """Create the topics, seed the inputs, run every client and the nemesis for
    ``run_s``, heal, drain and read everything back; returns the history."""
    spec = run.spec
    admin = AdminClient(_conf(run))
    for name, n in ((run.topic, spec.partitions), (run.source, 2), (run.sink, 1)):
        admin.create_topics([NewTopic(name, n, 1)])[name].result(CALL_S)
    seed_inputs(run)
    threads = [_threads(run, writer, f"w{i}") for i in range(spec.writers)]
    threads += [_threads(run, reader, f"r{i}") for i in range(spec.readers)]
    app_thread = _threads(run, app)
    nemesis = _threads(run, nemesis_loop)
    time.sleep(spec.run_s)
    run.stop.set()
    nemesis.join(30)
    run.note(run.nemesis.heal())
    for t in threads:
        t.join(3 * CALL_S)
    _wait_for_inputs(run)
    run.app_stop.set()
    app_thread.join(3 * CALL_S)
    frames = sys._current_frames()
    for t in [*threads, app_thread, nemesis]:
        if t.is_alive() and t.ident in frames:
            stack = "".join(traceback.format_stack(frames[t.ident], limit=4))
            run.errors.append(f"thread {t.name} did not stop:\n{stack}")
    if run.errors:
        return run.history
    final_read(run)
    return run.history


def _wait_for_inputs(run: Run, timeout_s: float = 30.0) -> None:
    """Let the app (no faults now) commit every input, within ``timeout_s``."""
    c = Consumer({**_conf(run), "group.id": run.group,
                  "isolation.level": "read_committed"})
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                got = c.committed([TopicPartition(*tp) for tp in run.input_ends], CALL_S)
            except KafkaException:
                continue
            if all(tp.offset >= run.input_ends[(run.source, tp.partition)] for tp in got):
                return
            time.sleep(0.3)
    finally:
        c.close()


def final_read(run: Run, timeout_s: float = 40.0) -> None:
    """Once every transaction ended (the last stable offset is the high watermark), read
    every partition from its start to its end; then the group's committed offsets."""
    parts = [(run.topic, i) for i in range(run.spec.partitions)]
    parts += [(run.source, 0), (run.source, 1), (run.sink, 0)]
    c = Consumer({**_conf(run), "group.id": run.group,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + timeout_s
        ends: dict[TP, int] = {}
        for t, p in parts:
            while True:
                tp = TopicPartition(t, p)
                lso = c.get_watermark_offsets(tp, CALL_S, cached=False)[1]
                if lso == _high_watermark(run, tp):
                    ends[(t, p)] = lso
                    break
                assert time.monotonic() < deadline, f"{t}[{p}] keeps an open transaction"
                time.sleep(0.3)
        c.assign([TopicPartition(t, p, 0) for t, p in parts])
        pending = {tp for tp, end in ends.items() if end > 0}
        quiet_until = time.monotonic() + 5.0  # a tail of aborted records and markers
        while pending and time.monotonic() < quiet_until:
            assert time.monotonic() < deadline, f"final read did not reach {pending}"
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            quiet_until = time.monotonic() + 5.0
            r = _read("final", m, final=True)
            run.record(r)
            if r.offset + 1 >= ends[r.tp]:
                pending.discard(r.tp)
        _observe_offsets(run, c, "final", final=True)
    finally:
        c.close()


def _high_watermark(run: Run, tp: TopicPartition) -> int:
    c = Consumer({**_conf(run), "group.id": "hw"})
    try:
        return int(c.get_watermark_offsets(tp, CALL_S, cached=False)[1])
    finally:
        c.close()
