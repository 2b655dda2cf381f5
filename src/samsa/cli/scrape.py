"""Read a samsa broker's Prometheus endpoint (generation and leader are not in
DescribeGroups; the broker's metrics have them)."""

from __future__ import annotations

import urllib.request
from typing import Any

from samsa.cli.errors import CliError


def group_internals(url: str, group_id: str, timeout: float = 5.0) -> dict[str, Any]:
    """``{"generation": int | None, "leader": str | None}`` of a group from ``url``."""
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
    out: dict[str, Any] = {"generation": None, "leader": None}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.labels.get("group") != group_id:
                continue
            if sample.name == "samsa_group_generation":
                out["generation"] = int(sample.value)
            elif sample.name == "samsa_group_info":
                out["leader"] = sample.labels.get("leader") or None
    return out
