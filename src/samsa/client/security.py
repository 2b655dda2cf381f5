"""TLS and SASL settings of samsa's clients, in kafka-python's spelling, and Kafka's
properties (``security.protocol``, ``sasl.jaas.config``, ``ssl.truststore.location`` ...)
turned into them for the CLI's ``--command-config`` and the Spark options.

    Consumer("t", bootstrap_servers="broker:9094", security_protocol="SASL_SSL",
             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
             sasl_plain_password="...", ssl_cafile="ca.pem")
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.security import jaas
from samsa.security.sasl.client import ClientMechanism, mechanism
from samsa.security.tls import client_context

DEFAULTS: dict[str, Any] = {
    "security_protocol": "PLAINTEXT",
    "ssl_context": None,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_password": None,
    "ssl_check_hostname": True,
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": None,
    "sasl_plain_password": None,
    "sasl_oauth_token_provider": None,
}
"""Security settings every samsa client takes (kafka-python's names and defaults)."""

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ClientSecurity:
    """How a client's connections authenticate (built once per client)."""

    protocol: str = "PLAINTEXT"
    ssl: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl: Callable[[], ClientMechanism] | None = None


def _token_provider(provider: Any) -> Callable[[], str] | None:
    if provider is None:
        return None
    token = getattr(provider, "token", None)  # kafka-python's AbstractTokenProvider
    if callable(token):
        return lambda: str(token())
    if callable(provider):
        return lambda: str(provider())
    raise ValueError("sasl_oauth_token_provider must have a token() method or be callable")


def client_security(config: Mapping[str, Any]) -> ClientSecurity:
    """A client's security from its settings (ValueError for an unusable combination)."""
    protocol = str(config.get("security_protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security_protocol must be one of {', '.join(PROTOCOLS)}")
    context: ssl.SSLContext | None = None
    if protocol in ("SSL", "SASL_SSL"):
        context = config.get("ssl_context")
        if context is None:
            settings = {
                "ssl.truststore.location": config.get("ssl_cafile"),
                "ssl.endpoint.identification.algorithm":
                    "https" if config.get("ssl_check_hostname", True) else "",
            }
            context = client_context(settings.get)
            if config.get("ssl_certfile"):
                context.load_cert_chain(config["ssl_certfile"], config.get("ssl_keyfile"),
                                        config.get("ssl_password"))
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, context)
    name = str(config.get("sasl_mechanism") or "PLAIN").upper()
    user, password = config.get("sasl_plain_username"), config.get("sasl_plain_password")
    provider = _token_provider(config.get("sasl_oauth_token_provider"))

    def make() -> ClientMechanism:
        return mechanism(name, username=user, password=password, token_provider=provider)

    make()  # fail now on missing credentials
    return ClientSecurity(protocol, context, name, make)


_DIRECT = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",  # librdkafka's names
    "sasl.password": "sasl_plain_password",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}


def from_properties(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka client properties (Java's or librdkafka's names) as samsa client settings.

    ``ssl.keystore.location`` is a PEM file with the key and the certificate chain
    (``ssl.keystore.type=PEM``); ``sasl.jaas.config`` gives the username and password;
    ``ssl.endpoint.identification.algorithm`` empty turns host name checks off. Properties
    that are not about security are left out."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in _DIRECT:
            out[_DIRECT[key]] = value
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if props.get(key, "PEM").upper() != "PEM":
            raise ValueError(f"{key}: only PEM files are supported")
    if props.get("ssl.keystore.location"):
        out["ssl_certfile"] = props["ssl.keystore.location"]
    if "ssl.endpoint.identification.algorithm" in props:
        out["ssl_check_hostname"] = props["ssl.endpoint.identification.algorithm"] != ""
    if props.get("sasl.jaas.config"):
        found = jaas.credentials(props["sasl.jaas.config"])
        if found is not None:
            out["sasl_plain_username"], out["sasl_plain_password"] = found
    return out
