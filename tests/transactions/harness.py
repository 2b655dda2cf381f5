"""The transaction coordinator on a fake clock: requests in, answers, records and markers
out; every record also goes through its serialised form into a log, so a reload replays
exactly what was written."""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.coordinator.history.model import LoadInfo
from samsa.transactions import TxnAnswer, TxnConfig, TxnCoordinator, TxnResult
from samsa.transactions.coordinator import Markers, TxnEvent
from samsa.transactions.records import TxnKey, TxnValue, deserialize, serialize
from tests.coordinator.fake_timer import FakeTimer


@dataclass
class TxnHarness:
    partitions: int = 3
    max_timeout_ms: int = 60_000
    id_expiration_ms: int = 604_800_000
    timer: FakeTimer = field(default_factory=lambda: FakeTimer(1_000))
    #: partition -> serialised records, in write order (the ``__transaction_state`` log)
    log: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    #: markers asked for and not yet written
    markers: list[Markers] = field(default_factory=list)
    next_pid: int = 1000

    def __post_init__(self) -> None:
        self.timer.on_fire = lambda key, now: self._take(self.coord.fire(key, now))
        self.load()

    def load(self, lease_epoch: int | None = None) -> None:
        """(Re)start: a new coordinator replays the log of every partition (its shards
        taken under ``lease_epoch`` on a cluster)."""
        self.coord = TxnCoordinator(TxnConfig(self.partitions, self.max_timeout_ms,
                                              self.id_expiration_ms), self.timer)
        self.markers = []
        for p in range(self.partitions):
            records = []
            for k, v in self.log.get(p, []):
                found = deserialize(k, v)
                assert found is not None
                records.append(found)
            info = LoadInfo(self.timer.now_ms, lease_epoch=lease_epoch)
            self._take(self.coord.load(p, records, self.timer.now_ms, info))

    def _take(self, result: TxnResult) -> list[TxnAnswer]:
        for r in result.records:
            self.log.setdefault(r.partition, []).append(serialize(r.key, r.value))
        self.markers.extend(result.markers)
        return [reply.answer for reply in result.replies]

    def call(self, event: TxnEvent) -> TxnAnswer:
        (answer,) = self._take(self.coord.handle(event, self.timer.now_ms, reply_to=object()))
        return answer

    def allocate(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def write_markers(self) -> list[Markers]:
        done, self.markers = self.markers, []
        for m in done:
            self._take(self.coord.markers_written(m, self.timer.now_ms))
        return done

    def state(self, tid: str) -> TxnValue | None:
        shard = self.coord.shards[self.coord.partition_for(tid)]
        return shard.txns.get(tid)

    def stored(self, tid: str) -> TxnValue | None:
        """The last value written for ``tid``."""
        p = self.coord.partition_for(tid)
        key = serialize(TxnKey(tid), None)[0]
        last = None
        for k, v in self.log.get(p, []):
            if k == key:
                found = deserialize(k, v)
                assert found is not None
                last = found[1]
        return last
