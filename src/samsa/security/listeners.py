"""Listeners, as Kafka's ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``, and per-listener settings.

A listener is a name, an address and a security protocol::

    listeners=SASL_SSL://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL   (the default maps
                                                        each protocol name to itself)
    advertised.listeners=SASL_SSL://broker1.example:9094,PLAINTEXT://127.0.0.1:9092

A name that is not one of the four protocols (``INTERNAL://...``) must be mapped to one.
A setting may be given for one listener (and one SASL mechanism) as Kafka does:
``listener.name.<listener lowercase>.<mechanism lowercase>.<key>`` wins over
``listener.name.<listener>.<key>``, which wins over ``<key>`` (:func:`listener_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from samsa.security.lists import config_list

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)


class ListenerError(ValueError):
    """A listener setting that cannot be used (the message names the setting)."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One address the broker accepts connections on."""

    name: str
    host: str
    port: int
    protocol: str

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}."""
    out: dict[str, str] = {}
    for item in config_list(text):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                                f"with PROTOCOL one of {', '.join(PROTOCOLS)}")
        if name in out:
            raise ListenerError(f"listener.security.protocol.map: {name} is mapped twice")
        out[name] = protocol
    return out


def _endpoints(setting: str, text: str) -> list[tuple[str, str, int]]:
    """``NAME://HOST:PORT,...`` -> [(NAME, host, port)] (``[v6]`` hosts unbracketed)."""
    out: list[tuple[str, str, int]] = []
    for item in config_list(text):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not port.isdigit() or int(port) > 65535:
            raise ListenerError(f"{setting}: expected NAME://HOST:PORT, got {item!r}")
        out.append((name.strip().upper(), host.strip("[]"), int(port)))
    names = [n for n, _, _ in out]
    for name in names:
        if names.count(name) > 1:
            raise ListenerError(f"{setting}: listener {name} is given twice")
    return out


def parse_listeners(text: str, protocol_map: str = DEFAULT_PROTOCOL_MAP) -> list[Listener]:
    """The ``listeners`` setting, each listener with its security protocol."""
    protocols = parse_protocol_map(protocol_map)
    out = []
    for name, host, port in _endpoints("listeners", text):
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerError(f"listeners: {name} has no security protocol in "
                                "listener.security.protocol.map")
        out.append(Listener(name, host, port, protocol))
    if not out:
        raise ListenerError("listeners: no listener given")
    return out


def parse_advertised(text: str, listeners: list[Listener]) -> dict[str, tuple[str, int]]:
    """``advertised.listeners`` -> {listener name: (host, port)}; each must be a listener
    (one left out advertises the address it is bound to)."""
    known = {lst.name for lst in listeners}
    out = {}
    for name, host, port in _endpoints("advertised.listeners", text):
        if name not in known:
            raise ListenerError(f"advertised.listeners: {name} is not in listeners")
        out[name] = (host, port)
    return out


def listener_value(values: Mapping[str, Any], defaults: Mapping[str, Any], listener: str,
                   key: str, mechanism: str | None = None) -> Any:
    """A setting for one listener (and SASL mechanism), Kafka's prefixes first."""
    prefix = f"listener.name.{listener.lower()}."
    names = [f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []
    names += [prefix + key, key]
    for name in names:
        if name in values:
            return values[name]
    return defaults.get(key)


def split_prefixed(name: str, known: set[str]) -> tuple[str, str | None, str] | None:
    """``listener.name.<l>[.<mechanism>].<key>`` -> (listener, mechanism or None, key) when
    ``key`` is a known setting; None for any other name."""
    if not name.startswith("listener.name."):
        return None
    rest = name[len("listener.name."):]
    listener, dot, tail = rest.partition(".")
    if not dot or not listener:
        return None
    if tail in known:
        return listener, None, tail
    mechanism, dot, key = tail.partition(".")
    if dot and key in known and mechanism:
        return listener, mechanism, key
    return None
