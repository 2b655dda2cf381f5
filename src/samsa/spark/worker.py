"""Executor-side setup of the Python worker processes that run the source's and sink's
tasks."""

from __future__ import annotations

import gc

__all__ = ["freeze_imports"]

_frozen = False


def freeze_imports() -> None:
    """Once per Python worker: move the objects alive now to gc's permanent generation.

    PySpark's reused Python workers run ``gc.collect()`` after every task; it walks every
    object of the imported modules (~100,000: pyspark, pyarrow, numpy, the protocol's
    schemas), about 45 ms per task, as long as decoding 100,000 records. Frozen, they are
    left out of each collection (``gc.freeze``); what tasks create is collected as before.
    """
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()
