"""``samsa serve``: run a broker until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from samsa.broker.allocator import keep_large_buffers
from samsa.broker.config import BrokerConfig, ConfigError, parse_assignments, read_properties
from samsa.broker.gc_policy import install as freeze_gc_survivors
from samsa.broker.storage import Engine


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="run a broker", description="Run a samsa broker node.")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="the address of a PLAINTEXT listener (port 0 picks a free port; "
                        "default 127.0.0.1:9092); for TLS and SASL use the listeners setting "
                        "(see docs/security.md)")
    p.add_argument("--data-dir", default="./data", type=Path, metavar="DIR",
                   help="where logs and metadata live (default %(default)s)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a Kafka broker setting, e.g. num.partitions=3 (repeatable)")
    p.add_argument("--config-file", type=Path, metavar="FILE",
                   help="a server.properties-style file of settings (--config wins)")
    p.add_argument("--storage", metavar="URL",
                   help="run as a cluster node over PostgreSQL, e.g. "
                        "postgresql://USER@HOST:PORT/DB (every node of the cluster names the "
                        "same database; default: local segment files in --data-dir)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="the HTTP port: Prometheus metrics at http://LISTEN-HOST:PORT/metrics, "
                        "the web console at /console/ and its JSON API at /api/v1 "
                        "(0 picks a free port)")
    p.set_defaults(run=run)


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"--listen: expected HOST:PORT, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"--listen: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"--listen: port {number} is out of range")
    return host.strip("[]"), number


def load_config(args: argparse.Namespace) -> BrokerConfig:
    overrides: dict[str, str] = {}
    if args.config_file is not None:
        overrides.update(read_properties(args.config_file))
    overrides.update(parse_assignments(args.config))
    if args.listen is not None and overrides.get("listeners"):
        raise ConfigError("give --listen or the listeners setting, not both")
    host, port = parse_listen(args.listen or "127.0.0.1:9092")
    return BrokerConfig.create(host=host, port=port, data_dir=args.data_dir, overrides=overrides)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args)
        if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
            raise ConfigError(f"--metrics-port: {args.metrics_port} is out of range")
    except ConfigError as exc:
        print(f"samsa serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    keep_large_buffers()
    freeze_gc_survivors()  # short full collections: no long event-loop stalls
    try:
        import uvloop

        loop_factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is optional off Linux
        loop_factory = None
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(_serve(config, args.metrics_port, args.storage))
    except OSError as exc:
        print(f"samsa serve: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve(config: BrokerConfig, metrics_port: int | None = None,
                 storage: str | None = None) -> None:
    from samsa.broker.server import Broker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    broker = Broker(config, open_engine(config, storage))
    http = None
    if metrics_port is not None:
        http = asyncio.create_task(http_server(broker, metrics_port).run(stop, broker.started))
    await broker.serve_forever(stop)
    if http is not None:
        await http


def open_engine(config: BrokerConfig, storage: str | None) -> Engine:
    """The storage engine ``--storage`` names: a cluster node over PostgreSQL, or (none
    given) local segment files in ``--data-dir``."""
    if storage:
        from samsa.cluster.engine import ClusterEngine

        return ClusterEngine(config, storage)
    from samsa.storage.local import LocalEngine

    return LocalEngine(config)


def http_server(broker: Any, port: int) -> Any:
    """The broker's HTTP port: metrics, the console and its API."""
    from samsa.cluster.metrics import ClusterCollector
    from samsa.console.broker_source import BrokerSource
    from samsa.console.server import HttpServer
    from samsa.console.source import ConsoleOptions

    config = broker.config
    registry = broker.metrics.registry()
    broker.metrics.broker = broker
    registry.register(ClusterCollector(broker.leadership))
    options = ConsoleOptions(
        actions_enabled=bool(config["console.actions.enable"]),
        principal=str(config["console.principal"]),
        sample_interval_ms=int(config["console.lag.sample.interval.ms"]),
        audit_path=config.data_dir / "console-audit.log")
    return HttpServer(config.host, port, BrokerSource(broker, options), registry)
