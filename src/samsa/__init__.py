"""samsa: a Kafka-wire-compatible event broker built around consumer groups."""

from typing import NamedTuple

__version__ = "0.1.0"


class TopicPartition(NamedTuple):
    """A topic name and a partition index."""

    topic: str
    partition: int


__all__ = ["TopicPartition", "__version__"]
