"""What each listener needs to authenticate a connection, built from the broker's settings.

:func:`listener_security` gives, per listener: its TLS context (SSL, SASL_SSL), the mapper of
client certificate subjects to principals (``ssl.principal.mapping.rules``), and its SASL
mechanisms (``sasl.enabled.mechanisms``, each with its per-listener settings). PLAIN users
are checked against the SCRAM store, then the PlainLoginModule ``user_*`` entries of
``sasl.jaas.config`` or of the JAAS file named by ``java.security.auth.login.config``.
:func:`check` builds it all once to turn bad settings into one clear error at start.
"""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from samsa.security import jaas
from samsa.security.credentials import CredentialStore
from samsa.security.listeners import Listener, ListenerError, parse_advertised
from samsa.security.lists import config_list
from samsa.security.principal import KafkaPrincipal
from samsa.security.sasl import oauthbearer, plain, scram
from samsa.security.sasl.mechanism import MechanismFactory
from samsa.security.tls import CLIENT_AUTH, PrincipalMapper, server_context

MECHANISMS = ("PLAIN", *scram.NAMES, oauthbearer.NAME)


class Settings(Protocol):
    """What is read from the broker's configuration."""

    def __getitem__(self, name: str) -> Any: ...

    def for_listener(self, listener: str, key: str, mechanism: str | None = None) -> Any: ...

    def listeners(self) -> list[Listener]: ...


@dataclass(slots=True)
class ListenerSecurity:
    """How one listener authenticates its connections."""

    listener: Listener
    ssl: ssl.SSLContext | None = None
    #: client certificate subject -> principal name (SSL listeners)
    mapper: PrincipalMapper | None = None
    #: SASL mechanism name -> a fresh server mechanism (SASL listeners)
    mechanisms: dict[str, MechanismFactory] = field(default_factory=dict)
    max_reauth_ms: int = 0
    #: largest frame before authentication (``sasl.server.max.receive.size``)
    max_receive: int = 524_288
    #: who every connection is, without authenticating (the broker's in-process
    #: connections: the console's); None: as the protocol authenticates
    principal: KafkaPrincipal | None = None

    @property
    def client_auth(self) -> bool:
        """Whether client certificates are asked for (``ssl.client.auth`` not none)."""
        return self.ssl is not None and self.ssl.verify_mode != ssl.CERT_NONE


def _plain_verifier(settings: Settings, listener: str,
                    store: CredentialStore) -> Callable[[str, str], bool]:
    users: dict[str, str] = {}
    path = settings["java.security.auth.login.config"]
    if path:
        sections = jaas.read_file(str(path))
        for name in ("KafkaServer", f"{listener.lower()}.KafkaServer"):
            users.update(jaas.plain_users(sections.get(name, [])))
    inline = settings.for_listener(listener, "sasl.jaas.config", "PLAIN")
    if inline:
        users.update(jaas.plain_users(jaas.parse_config(str(inline))))

    def verify(user: str, password: str) -> bool:
        known = users.get(user)
        if known is not None:
            return hmac.compare_digest(known.encode(), password.encode())
        return store.verify_plain(user, password)

    return verify


def _oauth_validator(settings: Settings, listener: str) -> oauthbearer.Validator:
    def get(key: str) -> Any:
        return settings.for_listener(listener, key, oauthbearer.NAME)

    sub = str(get("sasl.oauthbearer.sub.claim.name"))
    skew = int(get("sasl.oauthbearer.clock.skew.seconds"))
    if str(get("sasl.server.callback.handler.class")) == oauthbearer.UNSECURED_HANDLER:
        return oauthbearer.UnsecuredValidator(sub, skew)
    return oauthbearer.JwtValidator(
        str(get("sasl.oauthbearer.jwks.endpoint.url")),
        issuer=str(get("sasl.oauthbearer.expected.issuer")),
        audience=str(get("sasl.oauthbearer.expected.audience")), sub_claim=sub, skew_s=skew)


def _mechanisms(settings: Settings, listener: str,
                store: CredentialStore) -> dict[str, MechanismFactory]:
    names = [m.upper() for m in
             config_list(str(settings.for_listener(listener, "sasl.enabled.mechanisms")))]
    unknown = [n for n in names if n not in MECHANISMS]
    if unknown or not names:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unknown) or 'none given'}: "
                         f"samsa serves {', '.join(MECHANISMS)}")
    out: dict[str, MechanismFactory] = {}
    for name in names:
        if name == plain.NAME:
            out[name] = partial(plain.PlainServer, _plain_verifier(settings, listener, store))
        elif name == oauthbearer.NAME:
            try:
                out[name] = partial(oauthbearer.OAuthBearerServer,
                                    _oauth_validator(settings, listener))
            except oauthbearer.ConfigError as exc:
                raise ValueError(str(exc)) from None
        else:
            out[name] = partial(scram.ScramServer, name, store)
    return out


def listener_security(settings: Settings, store: CredentialStore) -> list[ListenerSecurity]:
    """Every listener with what it needs (ValueError naming the setting when unusable)."""
    listeners = settings.listeners()
    parse_advertised(str(settings["advertised.listeners"]), listeners)
    out = []
    for lst in listeners:
        sec = ListenerSecurity(lst)

        def get(key: str, name: str = lst.name) -> Any:
            return settings.for_listener(name, key)

        if lst.tls:
            sec.ssl = server_context(get)
            if sec.ssl.verify_mode != ssl.CERT_NONE:
                sec.mapper = PrincipalMapper(str(get("ssl.principal.mapping.rules")))
        elif str(get("ssl.client.auth") or "none").lower() not in CLIENT_AUTH:
            raise ListenerError(f"ssl.client.auth: bad value {get('ssl.client.auth')!r}")
        if lst.sasl:
            sec.mechanisms = _mechanisms(settings, lst.name, store)
            sec.max_reauth_ms = int(get("connections.max.reauth.ms"))
            sec.max_receive = int(get("sasl.server.max.receive.size"))
        out.append(sec)
    return out


def check(settings: Settings) -> None:
    """Build every listener's security once (ValueError for unusable settings)."""
    listener_security(settings, CredentialStore())
