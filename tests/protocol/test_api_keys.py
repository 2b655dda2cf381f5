"""ApiKey: each member's value and title are Kafka's (checked against kio's schemas)."""

from __future__ import annotations

from typing import Any

from kio.index import UnknownEntity, load_request_schema

from samsa.broker.handlers import registry
from samsa.broker.metrics import API_NAMES
from samsa.protocol.api_keys import ApiKey


def _oldest_request(key: ApiKey) -> Any:
    for version in range(20):
        try:
            return load_request_schema(key, version)
        except UnknownEntity:
            continue
    raise AssertionError(f"kio knows no version of {key!r}")


def test_titles_are_kafkas_request_names() -> None:
    for key in ApiKey:
        assert _oldest_request(key).__name__ == f"{key.title}Request", key


def test_every_served_api_has_a_member_and_a_metric_label() -> None:
    for key in registry():
        assert ApiKey(key).title == API_NAMES[key]
