"""The share consumer (KIP-932): ``samsa.ShareConsumer`` and its pure parts.

* :mod:`~samsa.client.share.consumer`: :class:`ShareConsumer`, the thin I/O;
* :mod:`~samsa.client.share.sessions`: share sessions, fetches and acknowledgements per
  partition leader (pure);
* :mod:`~samsa.client.share.acknowledgements`: acknowledge types and the acknowledgement
  modes (pure);
* :mod:`~samsa.client.share.records`: cutting the acquired records, with their delivery
  counts, from an answer.

Membership is :mod:`samsa.client.group.share_driver` (ShareGroupHeartbeat).
"""

from samsa.client.share.acknowledgements import AcknowledgeType
from samsa.client.share.consumer import AcknowledgementCommitCallback, ShareConsumer

__all__ = ["AcknowledgeType", "AcknowledgementCommitCallback", "ShareConsumer"]
