"""Kafka principals: ``<type>:<name>``, as Kafka's ``KafkaPrincipal``."""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who a connection acts as; compared by type and name (``User:alice``)."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected <type>:<name>, not {text!r}")
        return cls(kind, name)


#: the principal of a connection that did not authenticate (Kafka's ``ANONYMOUS``)
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
