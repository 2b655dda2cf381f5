"""AlterConfigs and IncrementalAlterConfigs: checks, operations and applying them.

Follows Kafka's ConfigAdminManager (request checks) and ConfigurationControlManager
(operations, validation, persistence). Each resource succeeds or fails as a whole; its error
is the one Kafka answers: INVALID_REQUEST for malformed requests and for bad broker settings
(KAFKA-13609), INVALID_CONFIG for bad topic and group configs, INVALID_TOPIC_EXCEPTION and
UNKNOWN_TOPIC_OR_PARTITION for topic names; the caller's authorization is checked after
the request's own checks. samsa has no alter-config policy plug-in, so
POLICY_VIOLATION is never answered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig, ConfigError
from samsa.broker.dynamic_config import BROKER_LIST_SETTINGS, text
from samsa.broker.topics import TopicError, validate_topic_name
from samsa.log.config import LIST_CONFIGS, LogConfig

if TYPE_CHECKING:
    from samsa.broker.context import Services

TOPIC, BROKER, GROUP = 2, 4, 32
"""ConfigResource types served."""
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
E = ErrorCode
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


class AlterFailed(Exception):
    """A resource's change refused with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Op:
    """One incremental operation on a config key."""

    name: str
    op: int
    value: str | None


Change = Callable[[dict[str, str]], dict[str, str]]
"""Turns a resource's current dynamic configs into the new ones."""


Refusal = Callable[[int, str], "tuple[ErrorCode, str] | None"]
"""The authorization of a resource: None, or the error and message refusing it."""


async def alter_all(broker: Services, resources: Sequence[Any], validate_only: bool,
              incremental: bool, refuse: Refusal = lambda rtype, name: None
              ) -> list[dict[str, Any]]:
    """Apply every resource of an (Incremental)AlterConfigs request; one result each.
    ``refuse`` authorizes each resource (after the request's own checks, as in Kafka)."""
    seen: dict[tuple[int, str], int] = {}
    for r in resources:
        key = (int(r.resource_type), r.resource_name)
        seen[key] = seen.get(key, 0) + 1
    results = []
    for r in resources:
        rtype, name = int(r.resource_type), r.resource_name
        try:
            if seen[(rtype, name)] > 1:
                raise AlterFailed(E.invalid_request, "Each resource must appear at most once.")
            refused = refuse(rtype, name)
            if refused is not None:
                raise AlterFailed(*refused)
            ops = [Op(c.name, int(getattr(c, "config_operation", SET)), c.value)
                   for c in r.configs]
            change = _incremental(rtype, ops) if incremental else _replace_all(ops)
            await alter(broker, rtype, name, change, validate_only)
            code, message = ErrorCode.none, None
        except AlterFailed as exc:
            code, message = exc.code, exc.message
        results.append({"error_code": code, "error_message": message,
                        "resource_type": rtype, "resource_name": name})
    return results


async def alter(broker: Services, rtype: int, name: str, change: Change,
                validate_only: bool) -> None:
    """Change one resource's dynamic configs; raises :class:`AlterFailed`."""
    if rtype == TOPIC:
        if not name:
            raise AlterFailed(E.invalid_request, "Default topic resources are not allowed.")
        reason = validate_topic_name(name)
        if reason:
            raise AlterFailed(E.invalid_topic_exception, reason)
        await broker.topics.resolve([name])  # another node may have just created one
        topic = broker.topics.get(name)
        new = change(dict(topic.overrides) if topic else {})
        try:
            await broker.topics.alter(name, new, validate_only=validate_only)
        except TopicError as exc:
            raise AlterFailed(exc.error_code, exc.message) from None
    elif rtype == BROKER:
        _check_broker_name(name, broker.config.node_id)
        dynamic = broker.topics.dynamic
        async with dynamic.changing:
            new = change(dynamic.broker(name))
            try:
                effective = dynamic.check_broker(name, new)
                broker.topics.check_broker_defaults(effective)
                broker.topics.log_config({}, "", dynamic.check_broker(name, new, alone=True))
            except (ConfigError, ValueError) as exc:
                raise AlterFailed(E.invalid_request, str(exc)) from None
            if not validate_only:
                await dynamic.set_broker(name, new)
                broker.topics.reconfigure_all()
    elif rtype == GROUP:
        if not name:
            raise AlterFailed(E.invalid_request, "Group name must not be empty")
        dynamic = broker.topics.dynamic
        async with dynamic.changing:
            new = change(dynamic.group(name))
            try:
                dynamic.check_group(new)
            except ConfigError as exc:
                raise AlterFailed(E.invalid_config, str(exc)) from None
            if not validate_only:
                await dynamic.set_group(name, new)
    else:
        raise AlterFailed(E.invalid_request, f"Unknown resource type {rtype}")


def _check_broker_name(name: str, node_id: int) -> None:
    if not name:
        return  # the cluster-wide defaults
    try:
        number = int(name)
    except ValueError:
        raise AlterFailed(E.invalid_request, f"Node id must be an integer, but it is: {name}"
                          ) from None
    if number != node_id:
        raise AlterFailed(E.invalid_request,
                          f"Unexpected broker id, expected {node_id}, but received {name}")


def _check_ops(ops: Sequence[Op], null_ok: Callable[[Op], bool]) -> None:
    names = [o.name for o in ops]
    if len(set(names)) != len(names):
        raise AlterFailed(E.invalid_request, "Error due to duplicate config keys")
    nulls = [o.name for o in ops if o.value is None and not null_ok(o)]
    if nulls:
        raise AlterFailed(E.invalid_request, "Null value not supported for : " + ", ".join(nulls))


def _replace_all(ops: Sequence[Op]) -> Change:
    """Legacy AlterConfigs: the given configs replace all of the resource's."""
    _check_ops(ops, lambda o: False)
    return lambda current: {o.name: str(o.value) for o in ops}


def _incremental(rtype: int, ops: Sequence[Op]) -> Change:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT per key."""
    _check_ops(ops, lambda o: o.op == DELETE)
    for o in ops:
        if o.op not in (SET, DELETE, APPEND, SUBTRACT):
            raise AlterFailed(E.invalid_request, f"Unknown operations type {o.op}")

    def change(current: dict[str, str]) -> dict[str, str]:
        new = dict(current)
        for o in ops:
            if o.op == SET:
                new[o.name] = str(o.value)
            elif o.op == DELETE:
                new.pop(o.name, None)
            else:
                new[o.name] = _list_op(rtype, o, new.get(o.name))
        return new

    return change


def _list_op(rtype: int, o: Op, current: str | None) -> str:
    default = _list_defaults(rtype).get(o.name)
    if default is None:
        raise AlterFailed(E.invalid_config, f"Can't {_OP_NAMES[o.op]} to key {o.name} because "
                          "its type is not LIST.")
    base = current if current is not None else default
    parts = [p for p in base.split(",") if p]
    for item in str(o.value).split(","):
        if o.op == APPEND and item not in parts:
            parts.append(item)
        elif o.op == SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts)


def _list_defaults(rtype: int) -> Mapping[str, str]:
    """LIST-typed keys of a resource type and their Kafka defaults."""
    if rtype == TOPIC:
        defaults = LogConfig().to_mapping()
        return {k: defaults[k] for k in LIST_CONFIGS}
    if rtype == BROKER:
        return {k: str(text(BrokerConfig()[k]) or "") for k in BROKER_LIST_SETTINGS}
    return {}
