"""A Jepsen-style checker of a transactional Kafka history (pure: a list of operations in,
the anomalies found out).

The history is what clients saw: transactional producers begin transactions, send values
to partitions, send a consumer group's offsets, and end them (commit acknowledged, abort
acknowledged, or an outcome the client could not learn); read_committed consumers read
``(partition, offset, value)``; the committed offsets of groups are observed. Every value
sent is unique, so a read names the transaction that wrote it. The ``final`` reads are
made after the faults healed and every transaction ended: each partition read from its
start to its end, so they show what the log holds.

The anomalies (named after Jepsen's Kafka workload and its Bufstream and Redpanda
analyses):

* ``aborted_read`` (G1a): a value of an aborted transaction was read;
* ``phantom_read``: a value no producer sent was read;
* ``lost_write``: a transaction whose commit was acknowledged is missing values from the
  final reads (and ``unseen_committed``: it is missing all of them);
* ``torn_txn``: a transaction is seen partly: some of its values are in the final reads and
  others are not (its outcome may be unknown to the client: a transaction is all or
  nothing either way);
* ``duplicate``: a value sits at two offsets, or a final read holds it twice;
* ``inconsistent_offset``: two reads of one offset returned different values;
* ``order``: a producer's values in one partition are not at increasing offsets in the
  order it sent them (per-producer order);
* ``nonmonotonic_read`` / ``read_skip``: one consumer session read a partition's offsets
  out of order, or jumped over a committed value (one the final reads hold between two of
  its consecutive reads);
* ``offsets_aborted``: a group's observed committed offset was carried only by aborted
  transactions;
* ``offsets_regressed``: a group's committed offset of a partition, observed in history
  order, went back (a committed transaction's offsets lost, e.g. by a reload);
* ``offsets_torn``: consume-transform-produce: the final output holds the output of an
  input at or past the group's final committed offset (output visible without its
  offsets), or an input below it has no output (offsets visible without their output);
* ``output_duplicate``: an input's output is in the final output more than once.

A consume-transform-produce transaction declares which input each of its outputs comes
from (``Send.source``); the inputs are the records the final reads hold in the partitions
whose offsets a group commits. The checker needs no knowledge of value formats.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import pairwise

TP = tuple[str, int]
"""A topic partition."""


class Outcome(Enum):
    COMMITTED = "committed"  # the client's commit was acknowledged
    ABORTED = "aborted"  # the client's abort was acknowledged (or the commit refused)
    UNKNOWN = "unknown"  # the client could not learn it (a crash, a fatal error)


# -- operations --------------------------------------------------------------------------
@dataclass(frozen=True)
class Begin:
    txn: str
    producer: str


@dataclass(frozen=True)
class Send:
    """A value produced in a transaction; ``source`` is the input it was made from
    (consume-transform-produce: a topic partition and offset)."""

    txn: str
    tp: TP
    value: str
    source: tuple[str, int, int] | None = None


@dataclass(frozen=True)
class SendOffsets:
    """``send_offsets_to_transaction``: a group's next offsets, committed with ``txn``."""

    txn: str
    group: str
    offsets: tuple[tuple[TP, int], ...]


@dataclass(frozen=True)
class End:
    txn: str
    outcome: Outcome


@dataclass(frozen=True)
class Read:
    """A record a consumer session read; ``final`` marks the reads made after the run."""

    session: str
    tp: TP
    offset: int
    value: str
    final: bool = False


@dataclass(frozen=True)
class OffsetsSeen:
    """A group's committed offset of a partition as a client observed it; ``final`` after
    the run."""

    group: str
    tp: TP
    offset: int
    final: bool = False


Op = Begin | Send | SendOffsets | End | Read | OffsetsSeen


# -- the folded history ------------------------------------------------------------------
@dataclass
class Txn:
    id: str
    producer: str
    sends: list[Send] = field(default_factory=list)
    offsets: list[SendOffsets] = field(default_factory=list)
    outcome: Outcome = Outcome.UNKNOWN


@dataclass
class Result:
    """The anomalies found, each a list of examples (short strings), and counts."""

    anomalies: dict[str, list[str]]
    stats: dict[str, int]

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self) -> str:
        found = {k: len(v) for k, v in self.anomalies.items() if v}
        lines = [" ".join(f"{k}={v}" for k, v in self.stats.items()),
                 "valid" if not found else f"ANOMALIES {found}"]
        for kind, examples in self.anomalies.items():
            lines += [f"  {kind}: {e}" for e in examples[:5]]
        return "\n".join(lines)


KINDS = ("aborted_read", "phantom_read", "lost_write", "unseen_committed", "torn_txn",
         "duplicate", "inconsistent_offset", "order", "nonmonotonic_read", "read_skip",
         "offsets_aborted", "offsets_regressed", "offsets_torn", "output_duplicate")


def fold(history: Iterable[Op]) -> tuple[dict[str, Txn], list[Read], list[OffsetsSeen]]:
    """The transactions (with their sends, offsets and outcome), the reads and the offset
    observations of a history."""
    txns: dict[str, Txn] = {}
    reads: list[Read] = []
    seen: list[OffsetsSeen] = []
    for op in history:
        if isinstance(op, Begin):
            if op.txn in txns:
                raise ValueError(f"transaction {op.txn} begun twice")
            txns[op.txn] = Txn(op.txn, op.producer)
        elif isinstance(op, Send | SendOffsets | End):
            txn = txns.get(op.txn)
            if txn is None:
                raise ValueError(f"{op} names a transaction never begun")
            if isinstance(op, Send):
                txn.sends.append(op)
            elif isinstance(op, SendOffsets):
                txn.offsets.append(op)
            else:
                txn.outcome = op.outcome
        elif isinstance(op, Read):
            reads.append(op)
        else:
            seen.append(op)
    return txns, reads, seen


def check(history: Sequence[Op]) -> Result:
    """Every anomaly of ``history`` (see the module docstring)."""
    txns, reads, seen = fold(history)
    found: dict[str, list[str]] = {k: [] for k in KINDS}
    writer: dict[str, tuple[Txn, Send]] = {}
    for txn in txns.values():
        for send in txn.sends:
            if send.value in writer:
                raise ValueError(f"value {send.value!r} sent twice: values must be unique")
            writer[send.value] = (txn, send)
    final = [r for r in reads if r.final]
    final_values = Counter(r.value for r in final)
    _check_reads(reads, writer, found)
    _check_atomicity(txns, final_values, found)
    _check_offsets_of_values(reads, writer, found)
    _check_sessions(reads, final, found)
    _check_group_offsets(txns, seen, writer, final, found)
    outcomes = Counter(t.outcome for t in txns.values())
    stats = {"txns": len(txns), "committed": outcomes[Outcome.COMMITTED],
             "aborted": outcomes[Outcome.ABORTED], "unknown": outcomes[Outcome.UNKNOWN],
             "sends": len(writer), "reads": len(reads), "final_reads": len(final)}
    return Result(found, stats)


def _check_reads(reads: list[Read], writer: dict[str, tuple[Txn, Send]],
                 found: dict[str, list[str]]) -> None:
    for r in reads:
        w = writer.get(r.value)
        if w is None:
            found["phantom_read"].append(f"{r.session} read {r.value!r} at {r.tp}@{r.offset}")
        elif w[0].outcome is Outcome.ABORTED:
            found["aborted_read"].append(
                f"{r.session} read {r.value!r} of aborted {w[0].id} at {r.tp}@{r.offset}")
        elif w[1].tp != r.tp:
            found["phantom_read"].append(f"{r.value!r} sent to {w[1].tp}, read in {r.tp}")


def _check_atomicity(txns: dict[str, Txn], final_values: Counter[str],
                     found: dict[str, list[str]]) -> None:
    for txn in txns.values():
        if not txn.sends:
            continue
        missing = [s.value for s in txn.sends if s.value not in final_values]
        present = len(txn.sends) - len(missing)
        if missing and present:
            found["torn_txn"].append(f"{txn.id} ({txn.outcome.value}): {present} of "
                                     f"{len(txn.sends)} values seen, missing {missing[:3]}")
        if missing and txn.outcome is Outcome.COMMITTED:
            kind = "unseen_committed" if not present else "lost_write"
            found[kind].append(f"{txn.id}: committed, missing {missing[:3]}")
    for value, n in final_values.items():
        if n > 1:
            found["duplicate"].append(f"{value!r} read {n} times in the final reads")


def _check_offsets_of_values(reads: list[Read], writer: dict[str, tuple[Txn, Send]],
                             found: dict[str, list[str]]) -> None:
    at: dict[tuple[TP, int], str] = {}
    offsets_of: dict[str, set[int]] = defaultdict(set)
    for r in reads:
        was = at.setdefault((r.tp, r.offset), r.value)
        if was != r.value:
            found["inconsistent_offset"].append(
                f"{r.tp}@{r.offset} read as {was!r} and as {r.value!r}")
        offsets_of[r.value].add(r.offset)
    for value, offsets in offsets_of.items():
        if len(offsets) > 1:
            found["duplicate"].append(f"{value!r} at offsets {sorted(offsets)}")
    # per producer and partition: send order is offset order
    sent: dict[tuple[str, TP], list[str]] = defaultdict(list)
    for value, (txn, send) in writer.items():
        sent[(txn.producer, send.tp)].append(value)
    order = {value: i for i, value in enumerate(writer)}  # sends in history order
    for (producer, tp), values in sent.items():
        located = sorted((order[v], min(offsets_of[v]), v) for v in values if v in offsets_of)
        for (_, o1, v1), (_, o2, v2) in pairwise(located):
            if o2 <= o1:
                found["order"].append(f"{producer} sent {v1!r} before {v2!r} in {tp}, "
                                      f"at offsets {o1} and {o2}")


def _check_sessions(reads: list[Read], final: list[Read],
                    found: dict[str, list[str]]) -> None:
    log: dict[TP, list[int]] = defaultdict(list)  # committed offsets the final reads hold
    for r in final:
        log[r.tp].append(r.offset)
    for offsets in log.values():
        offsets.sort()
    last: dict[tuple[str, TP], int] = {}
    for r in reads:
        key = (r.session, r.tp)
        prev = last.get(key)
        last[key] = r.offset
        if prev is None:
            continue
        if r.offset <= prev:
            found["nonmonotonic_read"].append(
                f"{r.session} read {r.tp}@{prev}, then @{r.offset}")
            continue
        skipped = [o for o in log.get(r.tp, ()) if prev < o < r.offset]
        if skipped:
            found["read_skip"].append(f"{r.session} read {r.tp}@{prev}, then @{r.offset}, "
                                      f"skipping committed {skipped[:3]}")


def _check_group_offsets(txns: dict[str, Txn], seen: list[OffsetsSeen],
                         writer: dict[str, tuple[Txn, Send]], final: list[Read],
                         found: dict[str, list[str]]) -> None:
    carried: dict[tuple[str, TP, int], set[Outcome]] = defaultdict(set)
    for txn in txns.values():
        for so in txn.offsets:
            for tp, offset in so.offsets:
                carried[(so.group, tp, offset)].add(txn.outcome)
    last: dict[tuple[str, TP], int] = {}
    for s in seen:
        was = last.get((s.group, s.tp), -1)
        last[(s.group, s.tp)] = max(was, s.offset)
        if s.offset < was:
            found["offsets_regressed"].append(
                f"{s.group} committed {s.tp}@{was}, then @{s.offset}")
        outcomes = carried.get((s.group, s.tp, s.offset))
        if outcomes == {Outcome.ABORTED}:
            found["offsets_aborted"].append(
                f"{s.group} committed {s.tp}@{s.offset}, sent only by aborted transactions")
    # consume-transform-produce: final output against the final committed offsets
    committed = {(s.group, s.tp): s.offset for s in seen if s.final}
    groups_of: dict[tuple[str, int], set[str]] = defaultdict(set)  # source tp -> groups
    for txn in txns.values():
        for so in txn.offsets:
            for tp, _ in so.offsets:
                groups_of[tp].add(so.group)
    out_count: Counter[tuple[str, int, int]] = Counter()
    for r in final:
        w = writer.get(r.value)
        if w is not None and w[1].source is not None:
            out_count[w[1].source] += 1
    inputs = set(out_count)  # and every record the final reads hold in a source partition
    inputs.update((r.tp[0], r.tp[1], r.offset) for r in final if r.tp in groups_of)
    for src in sorted(inputs):
        tp, offset = (src[0], src[1]), src[2]
        n = out_count[src]
        if n > 1:
            found["output_duplicate"].append(f"input {tp}@{offset} has {n} outputs")
        for group in groups_of.get(tp, ()):
            end = committed.get((group, tp))
            if end is None:
                continue
            if offset >= end and n:
                found["offsets_torn"].append(
                    f"output of {tp}@{offset} is committed, {group}'s offset is {end}")
            elif offset < end and not n:
                found["offsets_torn"].append(
                    f"{group} committed {tp} to {end}, input @{offset} has no output")
