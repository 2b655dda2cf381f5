"""``samsa console``: the web console against any Kafka-compatible cluster.

It serves the same page and JSON API as a samsa broker's HTTP port, from the Kafka
protocol alone (:class:`~samsa.console.remote_source.RemoteSource`): the panels only samsa
brokers can fill (rebalance history, liveness clocks, coordinator health) are hidden. With
``--command-config`` (TLS, SASL, as Kafka's tools) it acts with those credentials, so the
cluster's ACLs decide what it shows and may do.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from samsa.cli.connect import (
    DEFAULT_BOOTSTRAP,
    add_command_config,
    check_reachable,
    security_config,
)
from samsa.cli.errors import CliError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("console", help="serve the web console for a cluster",
                       description="Serve the web console (and its JSON API) for any "
                                   "Kafka-compatible cluster.")
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help="broker to connect to (default %(default)s)")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="where the console listens (port 0 picks a free one; default "
                        "%(default)s)")
    p.add_argument("--enable-actions", action="store_true",
                   help="allow changing actions (offset resets); previews are always allowed")
    add_command_config(p)
    p.add_argument("--principal", metavar="TYPE:NAME",
                   help="the principal the console acts as, for the audit log (default: "
                        "User:<SASL user> of --command-config, else User:ANONYMOUS)")
    p.add_argument("--audit-log", type=Path, default=Path("samsa-console-audit.log"),
                   metavar="FILE", help="where actions are logged (default %(default)s)")
    p.add_argument("--interval", type=float, default=5.0, metavar="SECONDS",
                   help="lag sampling and live update period (default %(default)s)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for the cluster (default %(default)s)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from samsa.cli.serve import parse_listen
    from samsa.console.remote_source import RemoteSource
    from samsa.console.server import HttpServer
    from samsa.console.source import ConsoleOptions
    from samsa.security.principal import KafkaPrincipal

    security = security_config(args)
    user = security.get("sasl_plain_username")
    principal = args.principal or (f"User:{user}" if user else "User:ANONYMOUS")
    try:
        host, port = parse_listen(args.listen)
        KafkaPrincipal.parse(principal)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    check_reachable(args.bootstrap_server, args.timeout)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = ConsoleOptions(actions_enabled=args.enable_actions, principal=principal,
                             sample_interval_ms=int(args.interval * 1000),
                             audit_path=args.audit_log, client_config=security)
    source = RemoteSource(args.bootstrap_server, options, int(args.timeout * 1000))

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await HttpServer(host, port, source).run(stop)

    try:
        asyncio.run(serve())
    except OSError as exc:
        print(f"samsa console: {exc}", file=sys.stderr)
        return 1
    return 0
