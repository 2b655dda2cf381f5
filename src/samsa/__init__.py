"""samsa: a Kafka-wire-compatible event broker built around consumer groups."""

from typing import NamedTuple

__version__ = "0.1.0"


class TopicPartition(NamedTuple):
    """A topic name and a partition index."""

    topic: str
    partition: int


_CLIENT = ("AcknowledgeType", "Admin", "Consumer", "ConsumerRebalanceListener", "Producer",
           "ShareConsumer")


def __getattr__(name: str) -> object:
    """Lazy client exports: ``samsa.Consumer``, ``samsa.Producer``, ``samsa.Admin``,
    ``samsa.ShareConsumer``."""
    if name in _CLIENT:
        import samsa.client

        return getattr(samsa.client, name)
    raise AttributeError(f"module 'samsa' has no attribute {name!r}")


__all__ = ["TopicPartition", "__version__", *_CLIENT]
