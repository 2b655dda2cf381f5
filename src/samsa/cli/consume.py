"""``samsa consume TOPIC``: print records, as a group member or from chosen partitions."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from typing import Any

from samsa import TopicPartition
from samsa.cli.connect import add_client_options, check_reachable, client_config
from samsa.cli.errors import CliError
from samsa.cli.output import progress


def add_parser(sub: Any) -> None:
    p = sub.add_parser("consume", help="print records of a topic",
                       description="Print records of a topic, one per line.")
    p.add_argument("topic")
    p.add_argument("--group", metavar="GROUP",
                   help="consume as a member of GROUP (offsets are committed)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed one")
    p.add_argument("--partition", type=int, metavar="N", help="read only partition N")
    p.add_argument("--offset", metavar="N|earliest|latest",
                   help="start offset in --partition (default latest)")
    p.add_argument("--max-messages", type=int, metavar="N", help="exit after N records")
    p.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                   help="exit when no record arrived for SECONDS")
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--separator", default="\t", metavar="SEP",
                   help="between printed fields (default: tab)")
    p.add_argument("--timestamp-format", choices=["ms", "iso"], default="ms")
    add_client_options(p)
    p.set_defaults(run=run)


def parse_offset(text: str | None) -> int | str | None:
    if text is None or text in ("earliest", "latest"):
        return text
    try:
        n = int(text)
    except ValueError:
        raise CliError(f"--offset: expected a number, earliest or latest, got {text!r}", 2) \
            from None
    if n < 0:
        raise CliError(f"--offset: {n} is negative", 2)
    return n


def validate(args: argparse.Namespace) -> int | str | None:
    offset = parse_offset(args.offset)
    if args.group and args.partition is not None:
        raise CliError("--partition cannot be combined with --group", 2)
    if offset is not None and args.partition is None:
        raise CliError("--offset needs --partition", 2)
    if offset is not None and args.from_beginning:
        raise CliError("--offset cannot be combined with --from-beginning", 2)
    if args.max_messages is not None and args.max_messages < 1:
        raise CliError("--max-messages must be positive", 2)
    return offset


def text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "backslashreplace")


def timestamp(ms: int, fmt: str) -> str:
    if fmt == "iso":
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
            timespec="milliseconds")
    return str(ms)


def format_record(r: Any, args: argparse.Namespace) -> str:
    """One record as printed: kafka-console-consumer's field order and prefixes."""
    if args.output == "json":
        return json.dumps({
            "topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp,
            "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
            "key": None if r.key is None else text(r.key),
            "value": None if r.value is None else text(r.value),
            "headers": [[k, None if v is None else text(v)] for k, v in r.headers]})
    fields = []
    if args.print_timestamp:
        kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
        fields.append(f"{kind}:{timestamp(r.timestamp, args.timestamp_format)}")
    if args.print_partition:
        fields.append(f"Partition:{r.partition}")
    if args.print_offset:
        fields.append(f"Offset:{r.offset}")
    if args.print_headers:
        fields.append(",".join(f"{k}:{text(v)}" for k, v in r.headers) or "NO_HEADERS")
    if args.print_key:
        fields.append(text(r.key))
    fields.append(text(r.value))
    return str(args.separator).join(fields)


def open_consumer(args: argparse.Namespace, offset: int | str | None) -> Any:
    from samsa.client import Consumer

    check_reachable(args.bootstrap_server, args.timeout)
    consumer = Consumer(**client_config(args), client_id="samsa-cli-consumer",
                        group_id=args.group,
                        auto_offset_reset="earliest" if args.from_beginning else "latest",
                        enable_auto_commit=args.group is not None)
    try:
        if args.group:
            consumer.subscribe([args.topic])
            return consumer
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise CliError(f"topic {args.topic} does not exist")
        if args.partition is not None:
            if args.partition not in partitions:
                raise CliError(f"topic {args.topic} has no partition {args.partition}")
            partitions = {args.partition}
        tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        if isinstance(offset, int):
            consumer.seek(tps[0], offset)
        elif offset == "earliest" or args.from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
    except BaseException:
        consumer.close(autocommit=False)
        raise
    return consumer


def run(args: argparse.Namespace) -> int:
    offset = validate(args)
    consumer = open_consumer(args, offset)
    count = 0
    limit = args.max_messages
    last = time.monotonic()
    try:
        with progress(f"consuming {args.topic}", limit,
                      enabled=limit is not None and args.output != "json") as advance:
            while limit is None or count < limit:
                wanted = None if limit is None else limit - count
                records = consumer.poll(200, max_records=wanted)
                for r in records:
                    sys.stdout.write(format_record(r, args) + "\n")
                count += len(records)
                if records:
                    sys.stdout.flush()
                    advance(len(records))
                    last = time.monotonic()
                elif args.idle_timeout is not None and \
                        time.monotonic() - last >= args.idle_timeout:
                    break
    finally:
        consumer.close()
    print(f"Consumed {count} record(s).", file=sys.stderr)
    return 0
