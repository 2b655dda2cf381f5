"""``group.consumer.assignors``: names, Kafka class names and plug-in class paths."""

from __future__ import annotations

import pytest

from samsa.assignors.server import (
    DEFAULT_SERVER_ASSIGNORS,
    RangeAssignor,
    ServerAssignor,
    UniformAssignor,
    resolve_server_assignor,
    resolve_server_assignors,
)

from .checks import group, topics
from .plugin import Everything


def test_default_is_uniform_then_range() -> None:
    assert DEFAULT_SERVER_ASSIGNORS == ("uniform", "range")
    found = resolve_server_assignors(list(DEFAULT_SERVER_ASSIGNORS))
    assert [type(a) for a in found] == [UniformAssignor, RangeAssignor]
    assert [a.name for a in found] == ["uniform", "range"]


def test_kafka_comma_separated_value_and_java_class_names() -> None:
    found = resolve_server_assignors(
        "range, org.apache.kafka.coordinator.group.assignor.UniformAssignor")
    assert [a.name for a in found] == ["range", "uniform"]


@pytest.mark.parametrize("path", ["tests.assignors.server.plugin:Everything",
                                  "tests.assignors.server.plugin.Everything"])
def test_plugin_by_class_path(path: str) -> None:
    (found,) = resolve_server_assignors([path])
    assert isinstance(found, Everything)
    assert found.assign(group({"a": [0], "b": [0]}), topics(2)) == {
        "a": {next(iter(topics(2))): frozenset({0, 1})}, "b": {}}


def test_classes_and_instances_pass_through() -> None:
    mine = Everything()
    assert resolve_server_assignor(mine) is mine
    assert isinstance(resolve_server_assignor(Everything), Everything)
    with pytest.raises(TypeError):
        resolve_server_assignor(42)  # type: ignore[arg-type]


def test_unknown_name_says_what_is_known() -> None:
    with pytest.raises(ValueError, match=r"unknown server assignor 'sticky'.*uniform, range"):
        resolve_server_assignors(["uniform", "sticky"])


@pytest.mark.parametrize("path, message", [
    ("tests.assignors.server.nosuchmodule:X", "cannot load"),
    ("tests.assignors.server.plugin:Missing", "has no Missing"),
    ("tests.assignors.server.plugin:NOT_AN_ASSIGNOR", "not a ServerAssignor"),
])
def test_bad_class_paths(path: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_server_assignors([path])


def test_empty_and_duplicate_lists_are_refused() -> None:
    with pytest.raises(ValueError, match="no assignor"):
        resolve_server_assignors([])
    with pytest.raises(ValueError, match="no assignor"):
        resolve_server_assignors(" , ")
    with pytest.raises(ValueError, match="listed twice"):
        resolve_server_assignors(["uniform", "uniform"])


def test_plugins_satisfy_the_interface() -> None:
    assert issubclass(Everything, ServerAssignor)
