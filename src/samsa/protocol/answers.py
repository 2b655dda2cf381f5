"""Answers of small, hot APIs encoded once and reused (Heartbeat, ConsumerGroupHeartbeat).

A steady heartbeat is answered the same way again and again (a KIP-848 member's answer
differs from another's by its member id and epoch): building a kio entity, converting it to
the request's version and encoding it field by field cost more than the coordinator's work.
A handler keeps an :class:`AnswerMemo` that maps the coordinator's (hashable) answer and the
request's version to the encoded bytes: built, converted and encoded by kio once, then a
dict lookup. The broker sends an :class:`~samsa.protocol.codec.Encoded` answer after a
fresh correlation id.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from samsa.protocol.build import convert
from samsa.protocol.codec import Encoded, encode_answer, response_class

K = TypeVar("K", bound=Hashable)


class AnswerMemo(Generic[K]):
    """Encoded answers of one API by (version, coordinator answer); at most ``limit``
    kept (all forgotten when full, as :class:`~samsa.protocol.codec.RequestTemplates`)."""

    def __init__(self, api_key: int, build: Callable[[K], Any], limit: int = 1 << 16) -> None:
        self.api_key = api_key
        self._build = build
        self._limit = limit
        self._encoded: dict[tuple[int, K], Encoded] = {}

    def __call__(self, version: int, answer: K) -> Encoded:
        """The encoded answer: ``build(answer)`` (a typed kio entity of any version of the
        API) converted to ``version``."""
        key = (version, answer)
        found = self._encoded.get(key)
        if found is None:
            typed = convert(self._build(answer), response_class(self.api_key, version))
            found = encode_answer(typed)
            if len(self._encoded) >= self._limit:
                self._encoded.clear()
            self._encoded[key] = found
        return found
