"""Read a samsa broker's Prometheus endpoint (generation and leader are not in
DescribeGroups, a share partition's in-flight records are in no Kafka API; the broker's
metrics have them)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

from samsa.cli.errors import CliError


def samples(url: str, timeout: float = 5.0) -> Iterator[Any]:
    """Every sample of a samsa broker's metrics endpoint (``host:port`` or a URL; a
    :class:`CliError` when it cannot be read)."""
    from prometheus_client.parser import text_string_to_metric_families

    if not url.startswith(("http://", "https://")):
        url = f"http://{url}"
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read().decode()
    except (OSError, ValueError) as exc:
        raise CliError(f"--metrics-url: cannot read {url}: {exc}") from None
    for family in text_string_to_metric_families(body):
        yield from family.samples


def group_internals(url: str, group_id: str, timeout: float = 5.0) -> dict[str, Any]:
    """``{"generation": int | None, "leader": str | None}`` of a group from ``url``."""
    out: dict[str, Any] = {"generation": None, "leader": None}
    for sample in samples(url, timeout):
        if sample.labels.get("group") != group_id:
            continue
        if sample.name == "samsa_group_generation":
            out["generation"] = int(sample.value)
        elif sample.name == "samsa_group_info":
            out["leader"] = sample.labels.get("leader") or None
    return out
