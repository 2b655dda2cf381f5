"""What a request handler receives: the broker's services, the decoded request and its
connection."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from samsa.broker.config import BrokerConfig
from samsa.broker.groups import GroupRuntime
from samsa.broker.metrics import BrokerMetrics
from samsa.broker.shares import ShareRuntime
from samsa.broker.storage import Leadership, ProducerIds
from samsa.broker.topics import TopicManager
from samsa.broker.transactions import TxnRuntime
from samsa.broker.txn_offsets import TxnOffsets
from samsa.protocol.build import build
from samsa.protocol.codec import Request, response_class
from samsa.security.authorizer import Authorizer
from samsa.security.credentials import CredentialStore
from samsa.security.principal import ANONYMOUS, KafkaPrincipal

#: kio resolves the response class by name on every lookup; requests repeat a few dozen.
_response_class = cache(response_class)


class Services(Protocol):
    """What handlers use of their broker (:class:`~samsa.broker.server.Broker` is one)."""

    config: BrokerConfig
    topics: TopicManager
    groups: GroupRuntime
    transactions: TxnRuntime
    txn_offsets: TxnOffsets
    shares: ShareRuntime
    leadership: Leadership
    producer_ids: ProducerIds
    metrics: BrokerMetrics
    authorizer: Authorizer | None
    credentials: CredentialStore
    #: API key -> (lowest, highest) version served
    supported: dict[int, tuple[int, int]]
    #: FinalizedFeaturesEpoch of ApiVersions (see :mod:`samsa.broker.features`)
    features_epoch: int


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request in flight."""

    broker: Services
    request: Request
    client_host: str
    #: who the connection authenticated as (``User:ANONYMOUS`` without authentication)
    principal: KafkaPrincipal = ANONYMOUS
    #: the name of the listener the connection came in on (``PLAINTEXT`` for ``--listen``)
    listener: str = "PLAINTEXT"
    #: the connection the request came on (an identity: share sessions close with it)
    connection: object = None

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def body(self) -> Any:
        return self.request.body

    def hold(self) -> None:
        """Hold this connection's later requests back until this one is answered: a handler
        that waits before it takes effect (or reads) calls it before its first wait, so
        that the connection's requests take effect in the order sent, as Kafka's do."""
        hold = getattr(self.connection, "hold", None)
        if hold is not None:
            hold()

    def respond(self, **fields: Any) -> Any:
        """The response entity of this request's API version, built from ``fields``."""
        return build(_response_class(self.request.api_key, self.request.api_version), fields)
