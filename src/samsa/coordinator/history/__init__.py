"""Each group's rebalance history: why and when every generation or epoch bump happened.

* :mod:`.model`: the typed events (:class:`HistoryEvent`: cause, phases and who held each
  up) and the shard's hard-state part that holds them (:class:`GroupHistories`);
* :mod:`.codec`: their binary form, records of a samsa-private type in
  ``__consumer_offsets`` (Kafka's tools skip record types they do not know);
* :mod:`.recorder`: the pure producer the shard calls (trigger, records written, classic
  state changes) that writes the events in the same result as the records that caused
  them, so they are as durable as the group itself: kept through restarts and fail-overs,
  bounded per group by ``group.history.max.events`` (0 turns the history off).
"""

from samsa.coordinator.history.model import (
    Cause,
    GroupHistories,
    HistoryEvent,
    HistoryKey,
    LoadInfo,
    Outcome,
    Phase,
)

__all__ = ["Cause", "GroupHistories", "HistoryEvent", "HistoryKey", "LoadInfo", "Outcome",
           "Phase"]
