"""Build kio entities of any API version from plain mappings.

Handlers describe a response once, as nested mappings with the union of the fields that
the versions they serve know about; :func:`build` maps it onto the exact kio dataclasses of
the requested version. Fields a version lacks are dropped; fields it requires but the
mapping leaves out get Kafka's zero value (0, empty string, empty array, null where
nullable). Milliseconds become ``timedelta``, ints become ``ErrorCode``. A key that no
version of the entity knows (a misspelled field) raises :class:`UnknownField`.

Handlers that want mypy to check their answers build the kio entity of one version instead
(typically the newest they serve) and :func:`convert` turns it into the requested version by
the same rules.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import pkgutil
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from uuid import UUID

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

E = TypeVar("E")

_ZERO_UUID = UUID(int=0)

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
"""``throttle_time`` of every answer: samsa has no quotas."""


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str | None  # None for nested entities
    nullable: bool
    is_tuple: bool
    entity: type[Any] | None
    required: bool


def _unwrap(tp: Any) -> tuple[Any, bool, bool]:
    """Return (inner type, nullable, is_tuple) of a field annotation."""
    nullable = False
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        tp = args[0]
        origin = typing.get_origin(tp)
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        inner_origin = typing.get_origin(inner)
        if inner_origin in (typing.Union, types.UnionType):
            inner = next(a for a in typing.get_args(inner) if a is not type(None))
        return inner, nullable, True
    return tp, nullable, False


_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}
_NAMES: dict[type[Any], frozenset[str]] = {}
_KNOWN: dict[type[Any], frozenset[str]] = {}
_VERSIONED = re.compile(r"^(kio\.schema\.\w+)\.v\d+\.(\w+)$")


class UnknownField(KeyError):
    """A mapping given to :func:`build` names a field no version of the entity has."""


def _known_names(cls: type[Any]) -> frozenset[str]:
    """Field names of ``cls`` in any version of its API (kio keeps one module a version)."""
    known = _KNOWN.get(cls)
    if known is not None:
        return known
    names = set(_NAMES[cls])
    m = _VERSIONED.match(cls.__module__)
    if m is not None:
        family, kind = m.groups()
        package = importlib.import_module(family)
        for info in pkgutil.iter_modules(package.__path__):
            if not re.fullmatch(r"v\d+", info.name):
                continue
            try:
                module = importlib.import_module(f"{family}.{info.name}.{kind}")
            except ImportError:
                continue
            other = getattr(module, cls.__name__, None)
            if isinstance(other, type) and dataclasses.is_dataclass(other):
                names.update(f.name for f in dataclasses.fields(other))
    _KNOWN[cls] = result = frozenset(names)
    return result


def _plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    cached = _PLANS.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        inner, nullable, is_tuple = _unwrap(hints[f.name])
        entity: type[Any] | None = (
            inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None
        )
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plans.append(
            _FieldPlan(f.name, f.metadata.get("kafka_type"), nullable, is_tuple, entity, required)
        )
    _PLANS[cls] = result = tuple(plans)
    _NAMES[cls] = frozenset(p.name for p in plans)
    return result


def _zero(p: _FieldPlan) -> Any:
    if p.nullable:
        return None
    if p.is_tuple:
        return ()
    match p.kafka_type:
        case "string":
            return ""
        case "bytes" | "records":
            return b""
        case "bool":
            return False
        case "timedelta_i32" | "timedelta_i64":
            return datetime.timedelta(0)
        case "error_code":
            return ErrorCode.none
        case "uuid":
            return _ZERO_UUID
        case "float64":
            return 0.0
        case "datetime_i64":
            return datetime.datetime.fromtimestamp(0, datetime.UTC)
        case _:
            return 0


def _scalar(kafka_type: str | None, value: Any) -> Any:
    match kafka_type:
        case "timedelta_i32" | "timedelta_i64" if isinstance(value, int):
            return datetime.timedelta(milliseconds=value)
        case "error_code" if not isinstance(value, ErrorCode):
            return ErrorCode(int(value))
        case "datetime_i64" if isinstance(value, int):
            return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
        case "records" | "bytes" if isinstance(value, bytearray | memoryview):
            return bytes(value)
    return value


def _convert(p: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None
    if p.entity is not None:
        if p.is_tuple:
            return tuple(_entity(p.entity, v) for v in value)
        return _entity(p.entity, value)
    if p.is_tuple:
        return tuple(_scalar(p.kafka_type, v) for v in value)
    return _scalar(p.kafka_type, value)


def _entity(cls: type[E], value: Any) -> E:
    if isinstance(value, cls):
        return value
    if hasattr(type(value), "__dataclass_fields__"):
        return convert(value, cls)
    return build(cls, value)


def build(cls: type[E], data: Mapping[str, Any]) -> E:
    """Instantiate kio entity ``cls`` from ``data`` (see module docstring)."""
    kwargs: dict[str, Any] = {}
    plan = _plan(cls)
    extra = data.keys() - _NAMES[cls]
    if extra and (unknown := extra - _known_names(cls)):
        raise UnknownField(f"{cls.__module__}.{cls.__name__} has no field {sorted(unknown)} "
                           "in any version")
    for p in plan:
        if p.name in data:
            kwargs[p.name] = _convert(p, data[p.name])
        elif p.required:
            kwargs[p.name] = _zero(p)
    return cls(**kwargs)


def convert(entity: Any, cls: type[E]) -> E:
    """``entity``, a kio entity of one version of an API, as ``cls``, the same entity of
    another version (nested entities alike): fields ``cls`` lacks are dropped, fields it
    adds get their zero values, as in :func:`build`. An entity of ``cls`` is returned as is.
    """
    source = type(entity)
    if source is cls:
        return entity  # type: ignore[no-any-return]
    converter = _CONVERTERS.get((source, cls))
    if converter is None:
        converter = _CONVERTERS[(source, cls)] = _converter(source, cls)
    return converter(entity)  # type: ignore[no-any-return]


_CONVERTERS: dict[tuple[type[Any], type[Any]], Callable[[Any], Any]] = {}


def _converter(source: type[Any], cls: type[Any]) -> Callable[[Any], Any]:
    """The conversion of ``source`` entities to ``cls``, planned once per pair (it runs on
    every answer of an older version, e.g. each Heartbeat v3)."""
    _plan(source)
    plan = _plan(cls)
    names = _NAMES[source]
    extra = names - _NAMES[cls]
    if extra and (unknown := extra - _known_names(cls)):
        raise UnknownField(f"{cls.__module__}.{cls.__name__} has no field {sorted(unknown)} "
                           "in any version")
    zeros = {p.name: _zero(p) for p in plan if p.required and p.name not in names}
    copied = tuple((p.name, p.entity, p.is_tuple) for p in plan if p.name in names)

    def run(entity: Any) -> Any:
        kwargs = dict(zeros)
        for name, nested, is_tuple in copied:
            value = getattr(entity, name)
            if nested is not None and value is not None:
                value = tuple(_entity(nested, v) for v in value) if is_tuple else \
                    _entity(nested, value)
            kwargs[name] = value
        return cls(**kwargs)

    return run


def millis(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (or a plain int)."""
    if isinstance(value, datetime.timedelta):
        return value.days * 86_400_000 + value.seconds * 1000 + value.microseconds // 1000
    return int(value)
