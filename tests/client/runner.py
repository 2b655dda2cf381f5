"""A consumer polled by its own thread, recording records, assignments and listener calls."""

from __future__ import annotations

import threading
from typing import Any

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client import CommitFailedError, Consumer, KafkaError, WakeupError


class Recorder:
    """Rebalance listener that records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []
        self.lock = threading.Lock()

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        with self.lock:
            self.calls.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        with self.lock:
            self.calls.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        with self.lock:
            self.calls.append(("lost", frozenset(lost)))

    def kinds(self) -> list[str]:
        with self.lock:
            return [k for k, _ in self.calls]


class Runner(threading.Thread):
    """Polls ``consumer`` until stopped; commits after each batch when ``commit``."""

    def __init__(self, consumer: Consumer, topics: list[str] | None = None,
                 pattern: str | None = None, commit: bool = False,
                 listener: Recorder | None = None) -> None:
        super().__init__(daemon=True)
        self.consumer = consumer
        self.listener = listener or Recorder()
        self.records: list[Any] = []
        self.commit = commit
        self.commit_failures = 0
        self.error: BaseException | None = None
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.stopped = threading.Event()
        self.paused_polling = threading.Event()
        consumer.subscribe(topics, pattern=pattern, listener=self.listener)

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                if self.paused_polling.is_set():
                    self.stopped.wait(0.05)
                    continue
                got = self.consumer.poll(100)
                self.records.extend(got)
                if got and self.commit:
                    self._commit()
                self.assignment = frozenset(self.consumer.assignment())
        except WakeupError:
            pass
        except KafkaError as exc:
            self.error = exc

    def _commit(self) -> None:
        """Commit the positions; a commit refused because the group is rebalancing is
        counted, as applications catch Kafka's CommitFailedException and
        RebalanceInProgressException: the next batch's commit covers these records."""
        try:
            self.consumer.commit()
        except CommitFailedError:
            self.commit_failures += 1
        except KafkaError as exc:
            if exc.code != ErrorCode.rebalance_in_progress:
                raise
            self.commit_failures += 1

    def stable(self) -> bool:
        return self.consumer.member_state == "STABLE" and not self.consumer.rejoin_pending

    def stop(self, close: bool = True) -> None:
        self.stopped.set()
        self.consumer.wakeup()
        self.join(30)
        if close:
            self.consumer.close()

    def crash(self) -> None:
        """Stop without leaving the group: no LeaveGroup, no more heartbeats."""
        self.stopped.set()
        self.consumer.wakeup()
        self.join(30)
        self.consumer.close(autocommit=False, leave_group=False)
