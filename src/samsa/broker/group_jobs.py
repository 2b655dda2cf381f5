"""Runs the group coordinator's background jobs (:mod:`samsa.coordinator.jobs`) for the
broker's edge: target assignments (KIP-1263's offload) and regex resolutions.

An inline job (``job.offload`` false: ``consumer.assignor.offload.enable=false``) runs at
once on the event loop. An offloaded one runs in a pool of
``group.coordinator.background.threads`` worker *processes* (started on demand): an
assignor is pure Python, and in a thread it would hold the GIL the event loop needs (every
request then waits up to the interpreter's switch interval, 5 ms, each time the loop gives
the GIL up; see ``benchmarks/rebalance.py`` (e) for the figures). A job's work is pickled
compactly (``TargetWork.__reduce__``); what cannot be pickled (a custom assignor object
that is not importable) runs in a thread instead. The outcome comes back on the event loop
and is handed to ``complete``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool

from samsa.coordinator.jobs import Job, JobFailed

log = logging.getLogger("samsa.groups")


def _run(work: Callable[[], object]) -> object:
    """In a worker: the work's outcome (an exception travels back as one)."""
    return work()


def _exit_with(parent: int) -> None:
    """A worker's initializer: exit when the broker that started it is gone (SIGKILLed, a
    crash): nothing else would tell an idle worker, and it would outlive the broker."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class JobRunner:
    """Starts jobs and hands their outcomes to ``complete(job, outcome)`` on the loop."""

    def __init__(self, workers: int, complete: Callable[[Job, object], None]) -> None:
        self._workers = max(1, workers)
        self._complete = complete
        self._processes: concurrent.futures.ProcessPoolExecutor | None = None
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    def start(self, job: Job) -> None:
        if self._closed:
            return
        if not job.offload:
            self._complete(job, job.run())
            return
        self._submit(job, self._pool())

    def _pool(self) -> concurrent.futures.Executor:
        if self._processes is None:
            self._processes = concurrent.futures.ProcessPoolExecutor(
                self._workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with, initargs=(os.getpid(),))
        return self._processes

    def _thread_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._threads is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(
                self._workers, thread_name_prefix="group-jobs")
        return self._threads

    def _submit(self, job: Job, pool: concurrent.futures.Executor) -> None:
        try:
            future = asyncio.wrap_future(pool.submit(_run, job.work))
        except (BrokenProcessPool, RuntimeError):  # a dead pool: start a new one
            self._processes = None
            future = asyncio.wrap_future(self._pool().submit(_run, job.work))
        future.add_done_callback(lambda f: self._done(job, pool, f))

    def _done(self, job: Job, pool: concurrent.futures.Executor,
              future: asyncio.Future[object]) -> None:
        if self._closed or future.cancelled():
            return
        error = future.exception()
        if error is None:
            self._complete(job, future.result())
            return
        if isinstance(error, BrokenProcessPool):
            log.warning("group job worker died; starting a new pool")
            if pool is self._processes:
                self._processes = None
            self._submit(job, self._pool())
        elif pool is self._processes and _unpicklable(error):
            self._submit(job, self._thread_pool())  # e.g. a custom assignor object
        else:
            log.warning("group job %s of %s failed: %s", job.kind.value, job.group_id, error)
            self._complete(job, JobFailed(f"{type(error).__name__}: {error}"))

    def close(self) -> None:
        self._closed = True
        for pool in (self._processes, self._threads):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._processes = self._threads = None


def _unpicklable(error: BaseException) -> bool:
    import pickle

    return isinstance(error, pickle.PicklingError | TypeError | AttributeError)
