"""What the coordinator knows of the cluster's topics: a :class:`TopicsSnapshot`.

The coordinator stays pure: it never looks topics up. The broker edge builds a snapshot
from its topic metadata and hands it over with ``Coordinator.update_metadata(snapshot)``
whenever topics are created, deleted or grow partitions (and once before loading shards).
Consumer groups read it on their next heartbeat: names are resolved against it, regexes are
resolved again (in a background job) once new topics appear, and a change of a subscribed
topic (partitions, racks, deletion) bumps the group epoch.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from samsa.assignors.server.interface import TopicInfo

__all__ = ["TopicInfo", "TopicsSnapshot"]


@dataclass(frozen=True)
class TopicsSnapshot:
    """Every topic of the cluster, by id (``TopicInfo`` from the server assignor interface:
    id, name, partition count, replica racks per partition)."""

    topics: Mapping[uuid.UUID, TopicInfo] = field(default_factory=dict)
    #: set by ``Coordinator.update_metadata`` (higher on every update): resolved regexes
    #: record the version they were resolved against
    version: int = 0
    #: the version of the last update that brought a new topic name: regexes resolved
    #: before it are resolved again (Kafka's ``lastMetadataImageWithNewTopics``)
    new_topics_version: int = 0
    by_name: Mapping[str, TopicInfo] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {t.name: t for t in self.topics.values()})

    @classmethod
    def of(cls, topics: Iterable[TopicInfo]) -> TopicsSnapshot:
        return cls({t.topic_id: t for t in topics})

    def topic_hash(self, topic_id: uuid.UUID) -> int:
        """A 64-bit digest of one topic's metadata (id, name, partitions, racks); 0 if the
        topic does not exist. Any change of it makes subscribed groups rebalance."""
        info = self.topics.get(topic_id)
        if info is None:
            return 0
        racks = sorted((p, tuple(sorted(r))) for p, r in info.racks.items())
        text = repr((str(info.topic_id), info.name, info.partitions, racks))
        return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")

    def metadata_hash(self, topic_ids: Iterable[uuid.UUID]) -> int:
        """The digest of a set of subscribed topics (Kafka 4.1's group ``MetadataHash``)."""
        parts = sorted((str(t), self.topic_hash(t)) for t in topic_ids if t in self.topics)
        if not parts:
            return 0
        digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)


EMPTY_TOPICS = TopicsSnapshot()
