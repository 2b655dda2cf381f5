"""TLS from PEM files (Kafka's ``ssl.keystore.type=PEM``) with the standard library's ``ssl``,
and the principal of a client certificate.

* :func:`server_context` / :func:`client_context`: an :class:`ssl.SSLContext` from Kafka's
  ``ssl.*`` settings (``ssl.keystore.location`` holds the private key and the certificate
  chain, ``ssl.key.password`` decrypts the key, ``ssl.truststore.location`` the CAs;
  ``ssl.client.auth=required|requested|none`` on a server).
* :func:`subject_dn`: a peer certificate's subject as Java's ``X500Principal.getName()``
  (RFC 2253: most specific attribute first, ``CN=alice,OU=eng,O=corp``), the string Kafka's
  ``ssl.principal.mapping.rules`` see.
* :class:`PrincipalMapper`: those rules (``RULE:pattern/replacement/[LU]`` and ``DEFAULT``,
  tried in order; Java's ``$1`` back references).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.security.lists import config_list

Get = Callable[[str], Any]
"""A setting by its Kafka name (already resolved for the listener)."""

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
               "none": ssl.CERT_NONE}


class TlsConfigError(ValueError):
    """TLS settings that cannot be used (the message names the setting)."""


def _versions(ctx: ssl.SSLContext, text: str) -> None:
    names = config_list(text)
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown or not names:
        raise TlsConfigError(f"ssl.enabled.protocols: {text!r}: samsa serves "
                             f"{', '.join(_VERSIONS)}")
    chosen = sorted(_VERSIONS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = chosen[0], chosen[-1]


def _pem_only(get: Get) -> None:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if str(get(key) or "PEM").upper() != "PEM":
            raise TlsConfigError(f"{key}: only PEM is supported (convert the store with "
                                 "openssl or keytool to PEM files)")


def _load_keystore(ctx: ssl.SSLContext, get: Get, required: bool) -> None:
    location = get("ssl.keystore.location")
    if not location:
        if required:
            raise TlsConfigError("ssl.keystore.location: a TLS listener needs a PEM file "
                                 "with its private key and certificate chain")
        return
    password = get("ssl.key.password") or None
    try:
        ctx.load_cert_chain(location, password=password)
    except FileNotFoundError:
        raise TlsConfigError(f"ssl.keystore.location: no such file {location}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"ssl.keystore.location: cannot load a private key and "
                             f"certificate from {location} (wrong ssl.key.password?): "
                             f"{exc}") from None


def _load_truststore(ctx: ssl.SSLContext, get: Get) -> bool:
    location = get("ssl.truststore.location")
    inline = get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        if inline:
            ctx.load_verify_locations(cadata=str(inline))
    except FileNotFoundError:
        raise TlsConfigError(f"ssl.truststore.location: no such file {location}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"ssl.truststore: cannot load CA certificates: {exc}") from None
    return bool(location or inline)


def server_context(get: Get) -> ssl.SSLContext:
    """The context of a TLS listener."""
    _pem_only(get)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, str(get("ssl.enabled.protocols")))
    _load_keystore(ctx, get, required=True)
    auth = str(get("ssl.client.auth") or "none").lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth: expected required, requested or none, "
                             f"got {auth!r}")
    trusted = _load_truststore(ctx, get)
    if auth != "none" and not trusted:
        raise TlsConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location (the CAs "
                             "that sign client certificates)")
    ctx.verify_mode = CLIENT_AUTH[auth]
    if get("ssl.cipher.suites"):
        try:
            ctx.set_ciphers(str(get("ssl.cipher.suites")))
        except ssl.SSLError:
            raise TlsConfigError("ssl.cipher.suites: no cipher can be selected") from None
    return ctx


def client_context(get: Get) -> ssl.SSLContext:
    """The context of a client connection (``ssl.endpoint.identification.algorithm`` empty
    turns host name checks off, as in Kafka's clients; default ``https`` checks them)."""
    _pem_only(get)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(ctx, str(get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"))
    if not _load_truststore(ctx, get):
        ctx.load_default_certs()
    _load_keystore(ctx, get, required=False)
    algorithm = get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = (algorithm if algorithm is not None else "https") != ""
    return ctx


# -- the subject of a peer certificate ---------------------------------------------------

#: RFC 2253 keywords Java's X500Principal prints; other attributes print as OID=#hex
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
             "stateOrProvinceName": "ST", "organizationName": "O",
             "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13),
         "title": ("2.5.4.12", 0x0C), "surname": ("2.5.4.4", 0x0C),
         "givenName": ("2.5.4.42", 0x0C), "pseudonym": ("2.5.4.65", 0x0C)}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _der_hex(tag: int, value: str) -> str:
    data = value.encode()
    if len(data) < 0x80:
        length = bytes([len(data)])
    else:
        size = len(data).to_bytes((len(data).bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(size)]) + size
    return "#" + (bytes([tag]) + length + data).hex()


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid, tag = _OIDS.get(name, (name, 0x0C))
    return f"{oid}={_der_hex(tag, value)}"


def subject_dn(peercert: dict[str, Any]) -> str:
    """RFC 2253 string of ``SSLObject.getpeercert()``'s subject (as Java prints it)."""
    rdns = peercert.get("subject", ())
    return ",".join("+".join(_attribute(k, v) for k, v in rdn) for rdn in reversed(rdns))


# -- ssl.principal.mapping.rules ---------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _java_replacement(text: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's replaceAll replacement (``$n`` groups, ``\\x`` literal x) as a function; a
    ``$n`` past the last group is shortened as Kafka does, then taken literally."""
    def expand(m: re.Match[str]) -> str:
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
            elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
                j = i + 1
                while j < len(text) and text[j].isdigit():
                    j += 1
                digits = text[i + 1:j]
                while len(digits) > 1 and int(digits) > groups:
                    digits, j = digits[:-1], j - 1
                if int(digits) > groups:
                    out.append(text[i:j])
                else:
                    out.append(m.group(int(digits)) or "")
                i = j
            else:
                out.append(c)
                i += 1
        return "".join(out)
    return expand


class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: the first rule that applies names the
    principal; none applying is an authentication failure."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer((rules or "DEFAULT").strip()):
            text = m.group(1)
            if not text:
                continue
            parsed = _PARSER.match(text)
            if parsed is None or parsed.end() != len(text) or parsed.group(5):
                raise TlsConfigError(f"ssl.principal.mapping.rules: invalid rule {text!r}")
            if parsed.group(1):
                self.rules.append(_Rule(None))
                continue
            try:
                pattern = re.compile(parsed.group(2))
            except re.error as exc:
                raise TlsConfigError(f"ssl.principal.mapping.rules: bad pattern in {text!r}: "
                                     f"{exc}") from None
            self.rules.append(_Rule(pattern, parsed.group(3), parsed.group(4)))

    def name(self, dn: str) -> str:
        """The principal name of ``dn``; ValueError when no rule applies."""
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise ValueError(f"no ssl.principal.mapping.rules apply to {dn}")
