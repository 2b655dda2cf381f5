"""Kafka's LIST settings (``ConfigDef.Type.LIST``): items separated by commas (semicolons in
``super.users``), spaces around items and empty items ignored."""

from __future__ import annotations


def config_list(text: str | None, sep: str = ",") -> list[str]:
    """``" a, b,,c "`` -> ``["a", "b", "c"]``; None or blank -> ``[]``."""
    return [item.strip() for item in (text or "").split(sep) if item.strip()]
