"""A share partition's lag (KIP-1226): the records between its start offset (SPSO) and the
log end that are not yet acknowledged or archived. DescribeShareGroupOffsets v1 answers it
and the broker's metrics export it."""

from __future__ import annotations

from samsa.share.partition import DONE, DurableState


def share_lag(state: DurableState, log_end_offset: int) -> int:
    """``state``'s lag against a log ending at ``log_end_offset`` (never negative)."""
    done = sum(1 for o, (s, _) in state.offsets.items()
               if o >= state.start_offset and s in DONE)
    return max(0, log_end_offset - state.start_offset - done)
