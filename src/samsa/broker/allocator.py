"""Keep glibc from handing megabyte request buffers back to the kernel after each request.

Every Produce request of ~1 MB passes through a few buffers of that size (the frame, the
records kio decodes out of it). With glibc's defaults a freed buffer that size is
returned to the kernel (unmapped, or trimmed off the top of the heap), so the next
request faults in fresh zeroed pages: about one page fault per 4 KiB produced, measured
in ``benchmarks/throughput.py`` (which prints the broker's minor faults per produced page).
Fixing the mmap and trim thresholds keeps buffers up to 32 MiB in the heap for reuse; it
costs at most the trim threshold of retained memory after a burst.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

__all__ = ["keep_large_buffers"]

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit
TRIM_THRESHOLD = 128 << 20


def keep_large_buffers() -> bool:
    """Set glibc's malloc thresholds (see module docstring); False where not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not ok:
        log.debug("mallopt refused the buffer thresholds; using the allocator's defaults")
    return ok
