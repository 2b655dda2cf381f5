"""Partition helpers shared by the ``samsa groups`` commands (describe, delete-offsets,
reset-offsets, plan): ``TOPIC[:P,...]`` specs and the one-line assignment format."""

from __future__ import annotations

from typing import Any

from samsa import TopicPartition
from samsa.cli.errors import CliError


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``TOPIC`` or ``TOPIC:P,P`` -> (topic, partitions or None)."""
    topic, sep, rest = spec.partition(":")
    if not topic:
        raise CliError(f"--topic: expected TOPIC or TOPIC:P,P, got {spec!r}", 2)
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in rest.split(",") if p.strip()})
    except ValueError:
        raise CliError(f"--topic: bad partition list in {spec!r}", 2) from None


def resolve_partitions(admin: Any, specs: list[str]) -> list[TopicPartition]:
    """The partitions ``TOPIC[:P,...]`` specs name (checked against the broker)."""
    out: set[TopicPartition] = set()
    counts = admin.list_topics()
    for spec in specs:
        topic, parts = parse_topic_spec(spec)
        if topic not in counts:
            raise CliError(f"topic {topic} does not exist")
        existing = set(range(counts[topic]))
        missing = sorted(set(parts or ()) - existing)
        if missing:
            raise CliError(f"topic {topic} has no partition {missing[0]}")
        out.update(TopicPartition(topic, p) for p in (parts if parts is not None else existing))
    return sorted(out)


def format_assignment(pairs: list[list[Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, part in pairs:
        by_topic.setdefault(topic, []).append(part)
    return " ".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items()))
