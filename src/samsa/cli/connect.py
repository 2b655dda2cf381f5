"""Client options shared by every command, and connecting to the broker.

``--command-config FILE`` is a properties file of client settings, as Kafka's tools take:
``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.location``,
``ssl.keystore.location`` (PEM) ... (:func:`samsa.client.security.from_properties`).
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path
from typing import Any

from samsa.cli.errors import CliError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help="broker to connect to (default %(default)s)")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table",
                   help="table for people, json for scripts (default %(default)s)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for the broker (default %(default)s)")
    add_command_config(p)


def add_command_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--command-config", type=Path, metavar="FILE",
                   help="client properties (TLS, SASL) as Kafka's tools take them: "
                        "security.protocol, sasl.mechanism, sasl.jaas.config, "
                        "ssl.truststore.location, ...")


def parse_servers(text: str) -> list[tuple[str, int]]:
    """``host:port[,host:port]`` -> addresses; a :class:`CliError` on bad input."""
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CliError(f"--bootstrap-server: expected HOST:PORT, got {item.strip()!r}", 2)
        out.append((host.strip("[]"), int(port)))
    return out


def check_reachable(bootstrap: str, timeout: float) -> None:
    """Fail fast, with one clear line, when no bootstrap server accepts a connection."""
    errors = []
    for host, port in parse_servers(bootstrap):
        try:
            socket.create_connection((host, port), timeout=min(timeout, 5.0)).close()
            return
        except OSError as exc:
            errors.append(exc.strerror or str(exc) or type(exc).__name__)
    raise CliError(f"cannot reach a broker at {bootstrap}: {errors[-1]}")


def security_config(args: argparse.Namespace) -> dict[str, Any]:
    """TLS and SASL settings from ``--command-config`` (none without it)."""
    from samsa.broker.config import ConfigError, read_properties
    from samsa.client.security import client_security, from_properties

    path = getattr(args, "command_config", None)
    if path is None:
        return {}
    try:
        settings = from_properties(read_properties(path))
        client_security(settings)  # a clear error now rather than at the first connection
    except (ConfigError, ValueError, OSError) as exc:
        raise CliError(f"--command-config {path}: {exc}", 2) from None
    return settings


def client_config(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments common to samsa's Consumer, Producer and Admin."""
    return {"bootstrap_servers": args.bootstrap_server,
            "request_timeout_ms": int(args.timeout * 1000), **security_config(args)}


def open_admin(args: argparse.Namespace) -> Any:
    """A connected :class:`samsa.Admin` (checked reachable first)."""
    from samsa.client import Admin

    check_reachable(args.bootstrap_server, args.timeout)
    return Admin(args.bootstrap_server, client_id="samsa-cli",
                 request_timeout_ms=int(args.timeout * 1000), **security_config(args))
