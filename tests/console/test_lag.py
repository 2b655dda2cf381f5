"""Burrow-style verdicts and the lag tracker (pure)."""

from __future__ import annotations

from samsa.console.lag import Commit, LagSample, LagTracker, Verdict, evaluate, worst

W = 4


def window(*points: tuple[int, int, int]) -> list[Commit]:
    return [Commit(t, o, lag) for t, o, lag in points]


def test_no_lag_is_ok_whatever_the_window() -> None:
    assert evaluate(window((0, 5, 3), (10, 5, 3)), 0, 10_000, W, 100) is Verdict.OK


def test_a_consumer_that_stopped_committing_is_stop() -> None:
    commits = window((0, 1, 5), (100, 2, 5), (200, 3, 5), (300, 4, 5))
    assert evaluate(commits, 5, 350, W, 100) is Verdict.WARN
    assert evaluate(commits, 5, 700, W, 100) is Verdict.STOP  # 400 ms silent > 300 ms span
    assert evaluate(window((0, 1, 5)), 5, 50, W, 100) is Verdict.OK
    assert evaluate(window((0, 1, 5)), 5, 150, W, 100) is Verdict.STOP


def test_an_offset_that_went_back_is_rewind() -> None:
    assert evaluate(window((0, 9, 1), (10, 4, 6)), 6, 20, W, 100) is Verdict.REWIND


def test_committing_the_same_offset_with_lag_is_stall() -> None:
    commits = window((0, 7, 2), (10, 7, 3), (20, 7, 4), (30, 7, 5))
    assert evaluate(commits, 5, 35, W, 100) is Verdict.STALL
    assert evaluate(commits[:3], 4, 25, W, 100) is Verdict.OK  # not a full window yet


def test_moving_offsets_with_lag_that_never_shrinks_is_warn_and_shrinking_is_ok() -> None:
    growing = window((0, 1, 2), (10, 2, 3), (20, 3, 3), (30, 4, 4))
    assert evaluate(growing, 4, 35, W, 100) is Verdict.WARN
    shrinking = window((0, 1, 4), (10, 2, 3), (20, 3, 5), (30, 4, 2))
    assert evaluate(shrinking, 2, 35, W, 100) is Verdict.OK
    assert evaluate(window((0, 1, 4), (10, 2, 0)), 3, 15, W, 100) is Verdict.OK


def test_the_tracker_counts_new_commits_keeps_series_and_takes_the_worst() -> None:
    t = LagTracker(window_size=W, points=3, min_stop_ms=100)
    for at, (off, ms) in enumerate([(1, 10), (1, 10), (2, 20), (3, 30), (4, 40)]):
        t.observe("g", LagSample("t", 0, off, 0, 10 + 2 * at, 1.0, 0, None, ms), at * 10)
    assert [c.offset for c in t.tracks["g"][("t", 0)].window] == [1, 2, 3, 4]
    assert len(t.series("g", ("t", 0))) == 3
    assert t.verdict("g", ("t", 0), 45) is Verdict.WARN
    t.observe("g", LagSample("u", 0, 5, 0, 5, 0.0), 45)
    assert t.group_verdict("g", 45) is Verdict.WARN
    assert worst([Verdict.OK, Verdict.STOP, Verdict.WARN]) is Verdict.STOP
    t.retain("g", {("u", 0)})
    assert list(t.tracks["g"]) == [("u", 0)]


def test_phantom_lag_is_counted_within_the_offset_lag() -> None:
    s = LagSample("t", 0, committed=3, log_start=10, log_end=15, phantom_records=7,
                  phantom_cause="retention")
    assert s.lag_records == 12
