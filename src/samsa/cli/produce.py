"""``samsa produce TOPIC``: one record per input line (stdin or ``--file``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from samsa.cli.connect import add_client_options, check_reachable, client_config
from samsa.cli.errors import CliError
from samsa.cli.output import Output, progress

COMPRESSION = ["none", "gzip", "snappy", "lz4", "zstd"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("produce", help="send lines as records to a topic",
                       description="Send each input line as one record.")
    p.add_argument("topic")
    p.add_argument("--file", type=Path, metavar="PATH", help="read lines from PATH, not stdin")
    p.add_argument("--key-separator", metavar="SEP",
                   help="each line is KEY<SEP>VALUE (lines without SEP are an error)")
    p.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header added to every record (repeatable)")
    p.add_argument("--headers-separator", metavar="SEP",
                   help="each line starts with headers K=V,K=V then SEP")
    p.add_argument("--partition", type=int, metavar="N", help="send every record to partition N")
    p.add_argument("--compression", choices=COMPRESSION, default="none")
    p.add_argument("--acks", choices=["all", "1", "0"], default="all")
    add_client_options(p)
    p.set_defaults(run=run)


def parse_header(text: str, where: str) -> tuple[str, bytes]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CliError(f"{where}: expected header KEY=VALUE, got {text!r}", 2)
    return key, value.encode()


def parse_line(line: str, number: int, args: argparse.Namespace,
               static: list[tuple[str, bytes]]) -> tuple[bytes | None, bytes, list[Any]]:
    """(key, value, headers) of one input line."""
    headers: list[Any] = list(static)
    if args.headers_separator:
        head, sep, line = line.partition(args.headers_separator)
        if not sep:
            raise CliError(f"line {number}: no headers separator {args.headers_separator!r}")
        headers += [parse_header(h, f"line {number}") for h in head.split(",") if h]
    key: bytes | None = None
    if args.key_separator:
        k, sep, line = line.partition(args.key_separator)
        if not sep:
            raise CliError(f"line {number}: no key separator {args.key_separator!r}")
        key = k.encode()
    return key, line.encode(), headers


def read_lines(args: argparse.Namespace) -> tuple[Iterable[str], int | None]:
    if args.file is None:
        return (ln.rstrip("\r\n") for ln in sys.stdin), None
    try:
        lines = args.file.read_text().splitlines()
    except OSError as exc:
        raise CliError(f"--file: {exc.strerror or exc}: {args.file}") from None
    return lines, len(lines)


def run(args: argparse.Namespace) -> int:
    from samsa.client import Producer

    static = [parse_header(h, "--header") for h in args.header]
    lines, total = read_lines(args)
    check_reachable(args.bootstrap_server, args.timeout)
    producer = Producer(**client_config(args), client_id="samsa-cli-producer",
                        acks=-1 if args.acks == "all" else int(args.acks),
                        compression_type=None if args.compression == "none" else args.compression,
                        enable_idempotence=args.acks == "all",
                        max_block_ms=int(args.timeout * 1000),
                        delivery_timeout_ms=max(int(args.timeout * 1000), 30000))
    futures = []
    try:
        with progress(f"producing to {args.topic}", total, args.output != "json") as advance:
            for number, line in enumerate(lines, 1):
                key, value, headers = parse_line(line, number, args, static)
                futures.append(producer.send(args.topic, value, key, partition=args.partition,
                                             headers=headers))
                advance()
        producer.flush(args.timeout)
    finally:
        producer.close(args.timeout)
    return report(args, futures)


def report(args: argparse.Namespace, futures: list[Any]) -> int:
    per_partition: dict[int, dict[str, int]] = {}
    failures = []
    for fut in futures:
        if not fut.done() or fut.failed():
            failures.append(fut.exception() if fut.done() else "not delivered in time")
            continue
        md = fut.value
        entry = per_partition.setdefault(md.partition, {"first_offset": md.offset,
                                                        "last_offset": md.offset, "records": 0})
        entry["first_offset"] = min(entry["first_offset"], md.offset)
        entry["last_offset"] = max(entry["last_offset"], md.offset)
        entry["records"] += 1
    delivered = len(futures) - len(failures)
    out = Output(args.output)
    if out.json:
        out.data({"topic": args.topic, "records": delivered, "failed": len(failures),
                  "partitions": {str(p): e for p, e in sorted(per_partition.items())}})
    else:
        print(f"Produced {delivered} record(s) to {args.topic}.", file=sys.stderr)
    if failures:
        raise CliError(f"{len(failures)} record(s) were not delivered: {failures[0]}")
    return 0
