"""SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768): a JWT checked with PyJWT.

The client's one message is ``n,[a=authzid],\\x01auth=Bearer <jwt>\\x01[key=value\\x01]\\x01``.
A token must be signed by a key of the configured JWKS file (or the one PEM public key in
it), unexpired (``sasl.oauthbearer.clock.skew.seconds`` allowed), and carry the principal
claim (``sasl.oauthbearer.sub.claim.name``); ``sasl.oauthbearer.expected.issuer`` and
``.audience`` are checked when set. Unsigned (``alg: none``) tokens are accepted only by
the :class:`UnsecuredValidator`, which the broker uses only when
``sasl.server.callback.handler.class`` names Kafka's unsecured validator (development).

A refused token is answered as Kafka does: an RFC 7628 error challenge
(``{"status":"invalid_token"}``), the client's ``\\x01`` reply, then the failure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

import jwt

from samsa.security.lists import config_list
from samsa.security.principal import USER_TYPE, KafkaPrincipal
from samsa.security.sasl.mechanism import AuthenticationFailed

NAME = "OAUTHBEARER"
#: the class name (Kafka's) that turns on unsigned tokens
UNSECURED_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                     "OAuthBearerUnsecuredValidatorCallbackHandler")
_AUTH = re.compile(r"^Bearer ([-_.a-zA-Z0-9]+)$")
_SAFE_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                    "ES512", "EdDSA")


@dataclass(frozen=True, slots=True)
class Token:
    """A validated token: who, and until when (ms since the epoch)."""

    principal: str
    expires_at_ms: int


class Validator(Protocol):
    def validate(self, token: str, now_ms: int) -> Token:
        """The token's principal; AuthenticationFailed with the reason otherwise."""
        ...


class ConfigError(ValueError):
    """OAUTHBEARER settings that cannot be used."""


def _path(url: str) -> Path:
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else url)
    raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: {url!r}: samsa reads keys from a "
                      "file (file:///path or a path), not over the network")


def load_keys(url: str) -> dict[str | None, tuple[Any, str | None]]:
    """kid (None for a key without one) -> (public key, its algorithm or None), from a JWKS
    JSON file or a PEM public key file."""
    path = _path(url)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: cannot read {path}: "
                          f"{exc.strerror}") from None
    try:
        if text.lstrip().startswith("-----BEGIN"):
            from cryptography.hazmat.primitives.serialization import load_pem_public_key

            return {None: (load_pem_public_key(text.encode()), None)}
        keys: dict[str | None, tuple[Any, str | None]] = {}
        for jwk in jwt.PyJWKSet.from_json(text).keys:
            keys[jwk.key_id] = (jwk.key, jwk.algorithm_name)
        return keys
    except (ValueError, jwt.PyJWTError) as exc:
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: {path} is neither a JWKS nor "
                          f"a PEM public key: {exc}") from None


class JwtValidator:
    """Signed tokens (Kafka's ``OAuthBearerValidatorCallbackHandler``)."""

    def __init__(self, jwks_url: str, *, issuer: str = "", audience: str = "",
                 sub_claim: str = "sub", skew_s: int = 30) -> None:
        if not jwks_url:
            raise ConfigError("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (the "
                              "issuer's keys), or the unsecured validator for development")
        self.keys = load_keys(jwks_url)
        self.issuer = issuer or None
        self.audience = config_list(audience) or None
        self.sub_claim = sub_claim
        self.skew_s = skew_s

    def validate(self, token: str, now_ms: int) -> Token:
        try:
            header = jwt.get_unverified_header(token)
            kid = header.get("kid")
            found = self.keys.get(kid)
            if found is None and len(self.keys) == 1:  # one key: whatever the token's kid
                found = next(iter(self.keys.values()))
            if found is None:
                raise AuthenticationFailed(f"no key with kid {kid!r} in the JWKS")
            key, alg = found
            algorithms = [alg] if alg else [a for a in _SAFE_ALGORITHMS
                                              if a == header.get("alg")]
            claims = jwt.decode(
                token, key, algorithms=algorithms, audience=self.audience, issuer=self.issuer,
                leeway=self.skew_s,
                options={"require": ["exp", self.sub_claim], "verify_aud": bool(self.audience)})
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed(str(exc)) from None
        return _token(claims, self.sub_claim)


class UnsecuredValidator:
    """Unsigned ``alg: none`` tokens, as Kafka's unsecured validator: for development only."""

    def __init__(self, sub_claim: str = "sub", skew_s: int = 30) -> None:
        self.sub_claim = sub_claim
        self.skew_s = skew_s

    def validate(self, token: str, now_ms: int) -> Token:
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") != "none":
                raise AuthenticationFailed("the unsecured validator accepts alg none only")
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed(str(exc)) from None
        out = _token(claims, self.sub_claim)
        if out.expires_at_ms + self.skew_s * 1000 < now_ms:
            raise AuthenticationFailed("the token has expired")
        return out


def _token(claims: dict[str, Any], sub_claim: str) -> Token:
    sub = claims.get(sub_claim)
    exp = claims.get("exp")
    if not isinstance(sub, str) or not sub:
        raise AuthenticationFailed(f"the token has no {sub_claim!r} claim")
    if not isinstance(exp, int | float):
        raise AuthenticationFailed("the token has no exp claim")
    return Token(sub, int(exp * 1000))


def _error_challenge() -> bytes:
    return json.dumps({"status": "invalid_token"}).encode()


class OAuthBearerServer:
    """One OAUTHBEARER authentication."""

    def __init__(self, validator: Validator) -> None:
        self._validator = validator
        self._error: str | None = None
        self.complete = False
        self.principal: KafkaPrincipal | None = None
        self.expires_at_ms: int | None = None

    def step(self, token: bytes, now_ms: int) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(f"Authentication failed: {self._error}")
            raise AuthenticationFailed("Authentication failed: expected %x01 after the error")
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message") from None
        gs2, sep, rest = text.partition("\x01")
        if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith("\x01\x01"):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        fields = dict(kv.partition("=")[::2] for kv in rest[:-2].split("\x01") if kv)
        m = _AUTH.match(fields.get("auth", ""))
        if m is None:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no "
                                       "auth=Bearer token")
        authzid = next((p[2:] for p in gs2.split(",") if p.startswith("a=")), "")
        try:
            found = self._validator.validate(m.group(1), now_ms)
        except AuthenticationFailed as exc:
            self._error = str(exc)
            return _error_challenge()
        if authzid and authzid != found.principal:
            self._error = "the authorization id is not the token's principal"
            return _error_challenge()
        self.complete = True
        self.principal = KafkaPrincipal(USER_TYPE, found.principal)
        self.expires_at_ms = found.expires_at_ms
        return b""
