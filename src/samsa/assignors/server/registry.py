"""``group.consumer.assignors``: names (or plug-in class paths) to assignor instances."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from samsa.assignors.server.interface import ServerAssignor
from samsa.assignors.server.range_assignor import RangeAssignor
from samsa.assignors.server.uniform import UniformAssignor

__all__ = ["DEFAULT_SERVER_ASSIGNORS", "resolve_server_assignor", "resolve_server_assignors"]

#: Kafka's default for ``group.consumer.assignors``; the first is the group's default.
DEFAULT_SERVER_ASSIGNORS = ("uniform", "range")

_BUILTIN: dict[str, type[ServerAssignor]] = {"uniform": UniformAssignor, "range": RangeAssignor}

#: Kafka's class names, so a value copied from a Kafka configuration works.
_JAVA_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def resolve_server_assignor(item: str | type[ServerAssignor] | ServerAssignor) -> ServerAssignor:
    """One entry: a built-in name, Kafka's class name, a class path (``module:Class`` or
    ``module.Class``) of a :class:`ServerAssignor` subclass, a subclass or an instance."""
    if isinstance(item, ServerAssignor):
        return item
    if isinstance(item, type) and issubclass(item, ServerAssignor):
        return item()
    if not isinstance(item, str):
        raise TypeError(f"not a server assignor: {item!r}")
    name = item.strip()
    builtin = _BUILTIN.get(_JAVA_NAMES.get(name, name))
    if builtin is not None:
        return builtin()
    module_name, sep, attr = name.rpartition(":") if ":" in name else name.rpartition(".")
    if not sep or not module_name or not attr:
        raise ValueError(
            f"unknown server assignor {name!r} in group.consumer.assignors: expected one of "
            f"{', '.join(_BUILTIN)} or a class path 'module:Class'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"cannot load server assignor {name!r}: {e}") from e
    obj = getattr(module, attr, None)
    if obj is None:
        raise ValueError(f"cannot load server assignor {name!r}: {module_name} has no {attr}")
    if isinstance(obj, ServerAssignor):
        return obj
    if isinstance(obj, type) and issubclass(obj, ServerAssignor):
        return obj()
    raise ValueError(f"{name!r} is not a ServerAssignor subclass")


def resolve_server_assignors(
    names: Iterable[str | type[ServerAssignor] | ServerAssignor] | str,
) -> list[ServerAssignor]:
    """The configured assignors, in order (the first is the default). Accepts a list or
    Kafka's comma-separated string. Each assignor needs a distinct non-empty ``name``."""
    items = names.split(",") if isinstance(names, str) else list(names)
    items = [i for i in items if not (isinstance(i, str) and not i.strip())]
    if not items:
        raise ValueError("group.consumer.assignors names no assignor")
    result = [resolve_server_assignor(i) for i in items]
    seen: set[str] = set()
    for a in result:
        name = getattr(a, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"server assignor {type(a).__name__} has no name")
        if name in seen:
            raise ValueError(f"server assignor {name!r} is listed twice")
        seen.add(name)
    return result
