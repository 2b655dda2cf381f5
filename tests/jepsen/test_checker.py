"""The checker on hand-built histories: a clean one passes, and each anomaly is found (and
only the anomalies the history holds)."""

from __future__ import annotations

import pytest

from tests.jepsen.checker import (
    KINDS,
    Begin,
    End,
    OffsetsSeen,
    Op,
    Outcome,
    Read,
    Send,
    SendOffsets,
    check,
)

C, A, U = Outcome.COMMITTED, Outcome.ABORTED, Outcome.UNKNOWN
T0, T1 = ("t", 0), ("t", 1)
SRC, OUT = ("src", 0), ("out", 0)


def txn(tid: str, producer: str, sends: list[tuple[tuple[str, int], str]],
        outcome: Outcome) -> list[Op]:
    return [Begin(tid, producer), *(Send(tid, tp, v) for tp, v in sends), End(tid, outcome)]


def final(*reads: tuple[tuple[str, int], int, str]) -> list[Op]:
    return [Read("final", tp, o, v, final=True) for tp, o, v in reads]


def clean() -> list[Op]:
    """p1 commits x1 (both partitions), aborts y, its commit of z is unknown and took
    effect; p2 commits w in t0; a live session reads as the log holds."""
    return [
        *txn("p1.1", "p1", [(T0, "x1"), (T1, "x2")], C),
        *txn("p2.1", "p2", [(T0, "w1")], C),
        *txn("p1.2", "p1", [(T0, "y1"), (T1, "y2")], A),
        *txn("p1.3", "p1", [(T0, "z1"), (T0, "z2")], U),
        Read("c1", T0, 0, "x1"), Read("c1", T0, 1, "w1"), Read("c1", T1, 0, "x2"),
        *final((T0, 0, "x1"), (T0, 1, "w1"), (T0, 5, "z1"), (T0, 6, "z2"), (T1, 0, "x2")),
    ]


def found(history: list[Op]) -> set[str]:
    return {k for k, v in check(history).anomalies.items() if v}


def test_a_clean_history_is_valid() -> None:
    result = check(clean())
    assert result.valid, result.summary()
    assert result.stats["committed"] == 2 and result.stats["aborted"] == 1
    assert "valid" in result.summary()


def test_an_unknown_transaction_may_be_wholly_absent() -> None:
    history = [op for op in clean() if not (isinstance(op, Read) and op.value[0] == "z")]
    assert check(history).valid


def test_aborted_read() -> None:
    history = [*clean(), Read("c2", T1, 3, "y2")]
    assert found(history) == {"aborted_read"}
    assert "p1.2" in check(history).anomalies["aborted_read"][0]


def test_phantom_read_and_a_value_in_the_wrong_partition() -> None:
    assert found([*clean(), Read("c2", T0, 9, "nobody")]) == {"phantom_read"}
    assert found([*clean(), Read("c2", T1, 9, "w1")]) == {"phantom_read", "duplicate"}


def test_lost_write_of_a_committed_transaction() -> None:
    history = [op for op in clean() if op != Read("final", T1, 0, "x2", final=True)]
    history = [op for op in history if op != Read("c1", T1, 0, "x2")]
    assert found(history) == {"lost_write", "torn_txn"}


def test_a_committed_transaction_wholly_unseen() -> None:
    history = [op for op in clean() if not (isinstance(op, Read) and op.value == "w1")]
    assert found(history) == {"unseen_committed"}


def test_torn_transaction_of_unknown_outcome() -> None:
    history = [op for op in clean() if op != Read("final", T0, 6, "z2", final=True)]
    assert found(history) == {"torn_txn"}


def test_duplicate_at_two_offsets_and_twice_in_the_final_reads() -> None:
    assert found([*clean(), Read("c2", T0, 7, "x1")]) == {"duplicate"}
    assert found([*clean(), *final((T0, 9, "x1"))]) == {"duplicate"}


def test_inconsistent_offset() -> None:
    assert found([*clean(), Read("c2", T0, 1, "x1")]) == {"inconsistent_offset",
                                                          "duplicate"}


def test_per_producer_order_in_a_partition() -> None:
    history = [
        *txn("p1.1", "p1", [(T0, "a")], C),
        *txn("p1.2", "p1", [(T0, "b")], C),
        *final((T0, 2, "b"), (T0, 4, "a")),
    ]
    assert found(history) == {"order"}
    # another producer's values may interleave in any order
    history[3] = Begin("p2.1", "p2")
    history[4:6] = [Send("p2.1", T0, "b"), End("p2.1", C)]
    assert check(history).valid


def test_nonmonotonic_read_and_read_skip() -> None:
    assert found([*clean(), Read("c2", T0, 1, "w1"), Read("c2", T0, 0, "x1")]) == {
        "nonmonotonic_read"}
    # c2 reads x1 then z1: w1 (offset 1) was committed between them
    assert found([*clean(), Read("c2", T0, 0, "x1"), Read("c2", T0, 5, "z1")]) == {
        "read_skip"}
    # gaps the log holds nothing committed in (markers, aborted records) are fine
    assert check([*clean(), Read("c2", T0, 1, "w1"), Read("c2", T0, 5, "z1")]).valid


def ctp(outcome_2: Outcome = A, final_offset: int = 2,
        outputs: tuple[int, ...] = (0, 1)) -> list[Op]:
    """Consume-transform-produce: seed writes inputs i0..i2 to src; the app's first
    transaction turns i0, i1 into o0, o1 with offset 2; its second turns i2 into o2 with
    offset 3 and ends with ``outcome_2``."""
    return [
        *txn("seed", "seed", [(SRC, "i0"), (SRC, "i1"), (SRC, "i2")], C),
        Begin("app.1", "app"),
        Send("app.1", OUT, "o0", source=("src", 0, 0)),
        Send("app.1", OUT, "o1", source=("src", 0, 1)),
        SendOffsets("app.1", "g", ((SRC, 2),)), End("app.1", C),
        Begin("app.2", "app"),
        Send("app.2", OUT, "o2", source=("src", 0, 2)),
        SendOffsets("app.2", "g", ((SRC, 3),)), End("app.2", outcome_2),
        OffsetsSeen("g", SRC, 2),
        *final((SRC, 0, "i0"), (SRC, 1, "i1"), (SRC, 2, "i2")),
        *final(*((OUT, i, f"o{i}") for i in outputs)),
        OffsetsSeen("g", SRC, final_offset, final=True),
    ]


def test_consume_transform_produce_clean() -> None:
    assert check(ctp()).valid
    assert check(ctp(C, 3, (0, 1, 2))).valid


def test_offsets_of_an_aborted_transaction_observed() -> None:
    assert found([*ctp(), OffsetsSeen("g", SRC, 3)]) == {"offsets_aborted"}


def test_offsets_regressed() -> None:
    # observed at 2, then (a reload lost app.1's commit) back at the start
    history = ctp()
    history.insert(history.index(OffsetsSeen("g", SRC, 2)) + 1, OffsetsSeen("g", SRC, 0))
    assert found(history) == {"offsets_regressed"}


def test_offsets_torn_from_their_output() -> None:
    # the output of i2 is committed but the group's offset stayed at 2
    assert found(ctp(C, 2, (0, 1, 2))) == {"offsets_torn"}
    # the offset moved to 3 but i2's output is not there
    assert found(ctp(C, 3, (0, 1))) == {"offsets_torn", "unseen_committed"}


def test_an_input_never_processed_below_the_committed_offset() -> None:
    history = ctp()
    # a committed transaction moves the offset to 3 without writing i2's output
    history[-1:] = [Begin("app.3", "app"), SendOffsets("app.3", "g", ((SRC, 3),)),
                    End("app.3", C), OffsetsSeen("g", SRC, 3, final=True)]
    assert found(history) == {"offsets_torn"}


def test_output_duplicate() -> None:
    history = [*ctp(), Begin("app.3", "app"),
               Send("app.3", OUT, "o0'", source=("src", 0, 0)), End("app.3", C),
               *final((OUT, 5, "o0'"))]
    assert found(history) == {"output_duplicate"}


@pytest.mark.parametrize("bad", [
    [Send("nope", T0, "v")],
    [*txn("a", "p", [(T0, "v")], C), *txn("a", "p", [], C)],
    [*txn("a", "p", [(T0, "v")], C), *txn("b", "p", [(T0, "v")], C)],
])
def test_malformed_histories_are_refused(bad: list[Op]) -> None:
    with pytest.raises(ValueError):
        check(bad)


def test_every_kind_is_reported() -> None:
    assert set(check(clean()).anomalies) == set(KINDS)
