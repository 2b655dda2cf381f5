"""Kafka's ACL model: resource types, pattern types, operations, bindings and filters.

The codes are Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``). An :class:`AclBinding` is one ACL, flattened (Kafka's
``ResourcePattern`` plus ``AccessControlEntry``); an :class:`AclBindingFilter` selects
bindings for DescribeAcls and DeleteAcls with Kafka's ``ResourcePatternFilter`` and
``AccessControlEntryFilter`` rules (``MATCH`` selects every pattern that would apply to the
named resource). Host patterns are ``*``, an exact address, or (KIP-1276) a CIDR range.
Everything here is pure; :mod:`samsa.security.authorizer` indexes bindings and decides.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from samsa.security.lists import config_list
from samsa.security.principal import KafkaPrincipal

CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource."""
WILDCARD = "*"
"""A literal resource name or host that matches every name or host."""
WILDCARD_PRINCIPAL = "User:*"
"""A principal that matches every principal."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation

#: An ALLOW of any of these grants DESCRIBE (Kafka's implicit DESCRIBE).
IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
#: An ALLOW of any of these grants DESCRIBE_CONFIGS.
IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})

#: The operations each resource type knows (Kafka's ``AclEntry.supportedOperations``), the
#: bits of an "authorized operations" answer.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS,
                         Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}

_CONCRETE_TYPES = frozenset(SUPPORTED_OPERATIONS)


class InvalidAcl(ValueError):
    """A binding or filter that cannot be used (answered INVALID_REQUEST)."""


def _enum(kind: type[enum.IntEnum], code: int) -> enum.IntEnum:
    """``kind(code)``, UNKNOWN for a code this broker does not know (as Kafka's fromCode)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def resource_type(code: int) -> ResourceType:
    return ResourceType(_enum(ResourceType, code))


def pattern_type(code: int) -> PatternType:
    return PatternType(_enum(PatternType, code))


def operation(code: int) -> AclOperation:
    return AclOperation(_enum(AclOperation, code))


def permission(code: int) -> AclPermissionType:
    return AclPermissionType(_enum(AclPermissionType, code))


# ---------------------------------------------------------------------------- hosts


@lru_cache(maxsize=4096)
def address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address (a leading ``/``, as in ``client_host``, is ignored);
    None if it is not one."""
    try:
        return ipaddress.ip_address(host.removeprefix("/"))
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def host_matcher(pattern: str) -> HostMatcher:
    """The compiled form of an ACL's host: ``*``, a CIDR range or one host."""
    if pattern == WILDCARD:
        return HostMatcher(pattern, None, None)
    if "/" in pattern:
        try:
            return HostMatcher(pattern, ipaddress.ip_network(pattern, strict=False), None)
        except ValueError:
            raise InvalidAcl(f"Invalid host {pattern!r}: not an IP address or CIDR range "
                             "(e.g. 10.0.0.0/8)") from None
    ip = address(pattern)
    return HostMatcher(pattern, None, str(ip) if ip is not None else pattern)


@dataclass(frozen=True, slots=True)
class HostMatcher:
    """Whether a client address matches an ACL's host pattern (KIP-1276)."""

    pattern: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    exact: str | None
    """The one host it names, normalized if it is an address (``::1`` = ``0:0::1``)."""

    def matches(self, host: str) -> bool:
        """``host`` is the client's address (``127.0.0.1``; a leading ``/`` is ignored)."""
        if self.exact is not None:
            ip = address(host)
            return self.exact == (str(ip) if ip is not None else host.removeprefix("/"))
        if self.network is None:
            return True
        ip = address(host)
        return ip is not None and ip.version == self.network.version and ip in self.network


# ---------------------------------------------------------------------------- bindings


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's ``AclBinding``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        """Kafka's checks of a new ACL (``AclControlManager.validateNewAcl`` and the
        broker's CLUSTER name check); raises :class:`InvalidAcl`."""
        if self.resource_type not in _CONCRETE_TYPES:
            raise InvalidAcl(f"Invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid pattern type {self.pattern_type.name}")
        if self.operation in (Op.UNKNOWN, Op.ANY):
            raise InvalidAcl(f"Invalid operation type {self.operation.name}")
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAcl(f"Invalid permission type {self.permission.name}")
        if not self.name:
            raise InvalidAcl("Resource name should not be empty")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        try:
            KafkaPrincipal.parse(self.principal)
        except ValueError:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}` (expected "
                             "<type>:<name>, e.g. User:alice)") from None
        host_matcher(self.host)  # raises InvalidAcl for a bad CIDR range

    def decides(self, op: AclOperation) -> AclPermissionType | None:
        """What this ACL says about ``op`` on a resource it covers (principal and host
        already matched): ALLOW, DENY, or None. An ALLOW of READ, WRITE, DELETE or ALTER
        also allows DESCRIBE, of ALTER_CONFIGS also DESCRIBE_CONFIGS; a DENY only denies
        its own operation (or every one, for ALL)."""
        mine = self.operation
        if mine != Op.ALL and mine != op:
            if self.permission != AclPermissionType.ALLOW:
                return None
            if op == Op.DESCRIBE:
                if mine not in IMPLIES_DESCRIBE:
                    return None
            elif op != Op.DESCRIBE_CONFIGS or mine not in IMPLIES_DESCRIBE_CONFIGS:
                return None
        return self.permission

    def to_dict(self) -> dict[str, str]:
        """Names of every field (Kafka's spelling), for files and JSON output."""
        return {"resource_type": self.resource_type.name, "name": self.name,
                "pattern_type": self.pattern_type.name, "principal": self.principal,
                "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> AclBinding:
        return cls(ResourceType[d["resource_type"]], d["name"], PatternType[d["pattern_type"]],
                   d["principal"], d["host"], AclOperation[d["operation"]],
                   AclPermissionType[d["permission"]])

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation="
                f"{self.operation.name}, permission={self.permission.name}) on "
                f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings (DescribeAcls, DeleteAcls); None and ANY match anything.

    Resource names follow Kafka's ``ResourcePatternFilter``: with pattern type ANY or an
    exact type the name must be equal; with MATCH, a LITERAL binding matches its own name
    and ``*``, a PREFIXED one every name it prefixes. Principal and host compare as strings.
    """

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = Op.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        """Kafka's ``validateFilter``: no UNKNOWN element; raises :class:`InvalidAcl`."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise InvalidAcl("Unknown patternFilter.")
        if self.operation == Op.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            raise InvalidAcl("Unknown entryFilter.")

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and \
                self.pattern_type != b.pattern_type:
            return False
        if self.name is not None and not self._name_matches(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != Op.ANY and self.operation != b.operation:
            return False
        return self.permission in (AclPermissionType.ANY, b.permission)

    def _name_matches(self, b: AclBinding) -> bool:
        assert self.name is not None
        if self.pattern_type != PatternType.MATCH:
            return self.name == b.name
        if b.pattern_type == PatternType.LITERAL:
            return self.name == b.name or b.name == WILDCARD
        return self.name.startswith(b.name)


ANY_ACL = AclBindingFilter()
"""The filter every binding matches."""


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:ops``)."""
    return frozenset(str(KafkaPrincipal.parse(item)) for item in config_list(text, ";"))
