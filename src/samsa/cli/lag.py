"""``samsa groups lag GROUP [--watch]``: lag per partition in records and seconds, with
Burrow-style verdicts over the samples taken while watching (any Kafka-compatible cluster).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from samsa.cli.connect import add_client_options, open_admin, security_config
from samsa.cli.errors import CliError
from samsa.cli.output import Output, console

COLUMNS = [("topic", "TOPIC"), ("partition", "PARTITION"), ("committed", "CURRENT-OFFSET"),
           ("log_end", "LOG-END-OFFSET"), ("lag_records", "LAG"), ("lag_seconds", "LAG-SECONDS"),
           ("phantom_records", "PHANTOM"), ("verdict", "VERDICT")]


def add_parser(cmds: Any) -> None:
    c = cmds.add_parser("lag", help="lag in records and seconds, with verdicts",
                        description="Lag per partition in records and in seconds (the age of "
                                    "the first unconsumed record), phantom lag, and "
                                    "Burrow-style verdicts (OK, WARN, STALL, STOP, REWIND).")
    c.add_argument("group")
    c.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    c.add_argument("--interval", type=float, default=2.0, metavar="SECONDS")
    c.add_argument("--iterations", type=int, default=0, metavar="N",
                   help="with --watch: stop after N refreshes")
    add_client_options(c)
    c.set_defaults(run=run)


def _rows(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**p, "lag_seconds": None if p["lag_seconds"] is None else round(p["lag_seconds"], 3)}
            for p in snapshot["partitions"]]


def render(snapshot: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"GROUP {snapshot['group_id']}  LAG {snapshot['lag_records']} records, "
                f"{snapshot['lag_seconds']:.1f} s  VERDICT {snapshot['verdict']}  "
                f"{time.strftime('%H:%M:%S')}", style="bold")
    table = Table(box=None, pad_edge=False)
    for _, title in COLUMNS:
        table.add_column(title, no_wrap=True)
    for row in _rows(snapshot):
        table.add_row(*(Text("-" if row[k] is None else str(row[k])) for k, _ in COLUMNS))
    return Group(head, table)


def run(args: argparse.Namespace) -> int:
    from samsa.console.lag import LagTracker
    from samsa.console.remote_source import TimestampFetcher, lag_samples
    from samsa.console.source import now_ms
    from samsa.console.views import lag_json

    out = Output(args.output)
    tracker = LagTracker(min_stop_ms=max(int(args.interval * 10_000), 1000))
    live = None
    if args.watch and not out.json and sys.stdout.isatty():
        from rich.live import Live

        live = Live(console=console(), auto_refresh=False)
        live.start()
    with open_admin(args) as admin:
        fetcher = TimestampFetcher(args.bootstrap_server, int(args.timeout * 1000),
                                   security_config(args))
        try:
            n = 0
            while True:
                committed = admin.list_consumer_group_offsets(args.group)
                if not committed and n == 0:
                    raise CliError(f"group {args.group} has no committed offsets")
                now = now_ms()
                for sample in lag_samples(admin, fetcher, {args.group: committed})[args.group]:
                    tracker.observe(args.group, sample, now)
                snapshot = lag_json(args.group, tracker, now)
                n += 1
                if out.json:
                    snapshot = {**snapshot, "partitions": [
                        {k: v for k, v in p.items() if k != "series"}
                        for p in snapshot["partitions"]]}
                    if args.watch:
                        print(json.dumps(snapshot), flush=True)
                    else:
                        out.data(snapshot)
                elif live is not None:
                    live.update(render(snapshot), refresh=True)
                else:
                    console().print(render(snapshot))
                if not args.watch or (args.iterations and n >= args.iterations):
                    return 0
                time.sleep(args.interval)
        finally:
            fetcher.close()
            if live is not None:
                live.stop()
