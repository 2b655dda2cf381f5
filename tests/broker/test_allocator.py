"""The broker keeps freed megabyte buffers for reuse instead of faulting in fresh pages."""

from __future__ import annotations

import subprocess
import sys

import pytest

_PROBE = """
import resource, sys
from samsa.broker.allocator import keep_large_buffers
if sys.argv[1] == "keep":
    assert keep_large_buffers()
size = 4 << 20
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
buf = bytearray(size)
del buf
before = faults()
for _ in range(20):
    buf = bytearray(size)  # zero-filled: every page is touched
    del buf
print(faults() - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True,
                         check=True)
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_reallocated_megabyte_buffers_do_not_fault_again() -> None:
    pages = (4 << 20) // 4096
    assert _faults("default") >= pages // 2  # glibc hands the buffer back at least once
    assert _faults("keep") < pages // 8
