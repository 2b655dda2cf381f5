"""Which leading segments retention deletes (pure; the log does the file work)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["segments_to_delete"]


def segments_to_delete(
    sizes: Sequence[int],
    next_bases: Sequence[int],
    max_timestamp: Callable[[int], int],
    *,
    active_size: int,
    now_ms: int,
    log_start_offset: int,
    retention_ms: int,
    retention_bytes: int,
    delete_policy: bool,
) -> int:
    """Number of leading non-active segments to delete.

    ``sizes[i]`` and ``next_bases[i]`` (base offset of the following segment) describe the
    non-active segments oldest first; ``max_timestamp(i)`` is segment i's largest timestamp
    (asked lazily, as it may need the segment's time index). As in Kafka, a segment goes
    when it lies wholly below the log start offset, or (with the delete policy) when its
    largest timestamp is more than ``retention_ms`` old, or while the log without it is
    still at least ``retention_bytes`` big. Deletion always takes a prefix.
    """
    count = 0
    n = len(sizes)
    while count < n and next_bases[count] <= log_start_offset:
        count += 1
    if not delete_policy:
        return count
    if retention_ms >= 0:
        while count < n and now_ms - max_timestamp(count) > retention_ms:
            count += 1
    if retention_bytes >= 0:
        remaining = sum(sizes[count:]) + active_size
        while count < n and remaining - sizes[count] >= retention_bytes:
            remaining -= sizes[count]
            count += 1
    return count
