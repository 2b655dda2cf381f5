"""The authorizer: Kafka's ``StandardAuthorizer`` decisions over an index of ACLs.

An action (principal, client host, operation, resource type and name) is decided as Kafka
decides it:

1. a super user (``super.users``) may do anything;
2. the ACLs that cover the resource are the LITERAL ones naming it, the LITERAL ``*`` and the
   PREFIXED ones whose name starts it. Of those whose principal is the caller's or
   ``User:*`` and whose host matches the caller's address (``*``, the address, or a CIDR
   range containing it), a DENY of the operation (or of ALL) denies, whatever else
   allows; otherwise an ALLOW of it (READ, WRITE, DELETE and ALTER also allow DESCRIBE,
   ALTER_CONFIGS also DESCRIBE_CONFIGS) allows;
3. if no ACL at all covers the resource (for any principal), ``allow.everyone.if.no.acl.found``
   decides; otherwise the action is denied.

:class:`AclIndex` keeps the ACLs by resource type, then pattern name, then principal, and
the distinct lengths of PREFIXED names, so a decision reads a few dictionary entries per
prefix length of the name, never every ACL; decisions are remembered until the ACLs change
(clients repeat the same few actions on every request). ACLs persist in an :class:`AclStore` (a file
in the data directory, or PostgreSQL for a cluster: :mod:`samsa.storage.pg.acls`); every
node keeps the whole set in memory and reloads it when the store's version moved.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from samsa.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
    host_matcher,
)

log = logging.getLogger("samsa.authorizer")

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY

#: ``authorizer.class.name`` values that turn the authorizer on (Kafka's KRaft authorizer
#: and its ZooKeeper-era predecessor: same ACL semantics).
AUTHORIZER_CLASSES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
})

Bucket = dict[str, list[AclBinding]]
"""The ACLs of one resource pattern, by principal."""


class AclIndex:
    """Every ACL, indexed for decisions (see the module docstring)."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._all: set[AclBinding] = set()
        self._literal: dict[ResourceType, dict[str, Bucket]] = {}
        self._prefixed: dict[ResourceType, dict[str, Bucket]] = {}
        self._lengths: dict[ResourceType, dict[int, int]] = {}
        """Resource type -> length of PREFIXED names -> how many such patterns."""
        self._sorted_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._by_principal: dict[tuple[ResourceType, str], set[AclBinding]] = {}
        for b in bindings:
            self.add(b)

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(self._all)

    def __contains__(self, b: object) -> bool:
        return b in self._all

    def add(self, b: AclBinding) -> bool:
        """Index ``b``; False if it was there already."""
        if b in self._all:
            return False
        self._all.add(b)
        host_matcher(b.host)  # compiled (and cached) once, not on the request path
        patterns = self._literal if b.pattern_type == PatternType.LITERAL else self._prefixed
        by_name = patterns.setdefault(b.resource_type, {})
        bucket = by_name.get(b.name)
        if bucket is None:
            bucket = by_name[b.name] = {}
            if b.pattern_type == PatternType.PREFIXED:
                self._count_length(b.resource_type, len(b.name), +1)
        bucket.setdefault(b.principal, []).append(b)
        self._by_principal.setdefault((b.resource_type, b.principal), set()).add(b)
        return True

    def remove(self, b: AclBinding) -> bool:
        """Forget ``b``; False if it was not there."""
        if b not in self._all:
            return False
        self._all.discard(b)
        patterns = self._literal if b.pattern_type == PatternType.LITERAL else self._prefixed
        by_name = patterns[b.resource_type]
        bucket = by_name[b.name]
        entries = bucket[b.principal]
        entries.remove(b)
        if not entries:
            del bucket[b.principal]
        if not bucket:
            del by_name[b.name]
            if b.pattern_type == PatternType.PREFIXED:
                self._count_length(b.resource_type, len(b.name), -1)
        owned = self._by_principal[(b.resource_type, b.principal)]
        owned.discard(b)
        if not owned:
            del self._by_principal[(b.resource_type, b.principal)]
        return True

    def _count_length(self, rtype: ResourceType, length: int, delta: int) -> None:
        counts = self._lengths.setdefault(rtype, {})
        counts[length] = counts.get(length, 0) + delta
        if counts[length] <= 0:
            del counts[length]
        self._sorted_lengths[rtype] = tuple(sorted(counts))

    def covering(self, rtype: ResourceType, name: str) -> Iterator[Bucket]:
        """The buckets of every pattern that covers resource ``name``: the LITERAL one,
        the LITERAL ``*`` and each PREFIXED one whose name starts ``name``."""
        literal = self._literal.get(rtype)
        if literal:
            bucket = literal.get(name)
            if bucket:
                yield bucket
            if name != WILDCARD:
                bucket = literal.get(WILDCARD)
                if bucket:
                    yield bucket
        prefixed = self._prefixed.get(rtype)
        if prefixed:
            size = len(name)
            for length in self._sorted_lengths[rtype]:
                if length > size:
                    break
                bucket = prefixed.get(name[:length])
                if bucket:
                    yield bucket

    def of_principal(self, rtype: ResourceType, principal: str) -> set[AclBinding]:
        return self._by_principal.get((rtype, principal), set())


class AclStore(Protocol):
    """Where ACLs persist. ``version`` numbers the stored set; a change returns the new one
    (a jump of more than one means another node changed it too: reload)."""

    async def load(self) -> tuple[int, list[AclBinding]]: ...

    async def add(self, acls: Sequence[AclBinding]) -> int: ...

    async def remove(self, acls: Sequence[AclBinding]) -> int: ...


class FileAclStore:
    """ACLs in ``acls.json`` of the data directory, replaced atomically on every change.

    Also used offline (``samsa acls ... --data-dir``) while the broker is stopped."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "acls.json"
        self.version = 0

    def read(self) -> list[AclBinding]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise OSError(f"cannot read ACLs from {self.path}: {exc}") from exc
        return [AclBinding.from_dict(d) for d in data.get("acls", [])]

    def write(self, acls: Iterable[AclBinding]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        body = {"version": 1, "acls": [b.to_dict() for b in sorted(acls)]}
        with open(tmp, "w") as f:
            json.dump(body, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    async def load(self) -> tuple[int, list[AclBinding]]:
        return self.version, self.read()

    async def add(self, acls: Sequence[AclBinding]) -> int:
        current = set(self.read())
        self.write(current | set(acls))
        self.version += 1
        return self.version

    async def remove(self, acls: Sequence[AclBinding]) -> int:
        current = set(self.read())
        self.write(current - set(acls))
        self.version += 1
        return self.version


class DenialLog:
    """Denials logged as Kafka's authorizer logger words them, rate-limited: a denial of the
    same principal, operation and resource is logged once per ``interval`` seconds, and at
    most ``limit`` lines are written per interval (the rest are counted in one line)."""

    def __init__(self, interval: float = 10.0, limit: int = 50,
                 clock: Callable[[], float] = time.monotonic,
                 logger: logging.Logger = log) -> None:
        self.interval = interval
        self.limit = limit
        self.clock = clock
        self.logger = logger
        self._last: dict[tuple[str, int, int, str], float] = {}
        self._window = -1.0
        self._lines = 0
        self._suppressed = 0

    def denied(self, principal: str, host: str, op: AclOperation, rtype: ResourceType,
               name: str, api: str) -> bool:
        """Log one denial unless rate-limited; True if a line was written."""
        now = self.clock()
        if now - self._window >= self.interval:
            if self._suppressed:
                self.logger.info("%d more authorization denials were not logged in the last "
                                 "%.0f s", self._suppressed, self.interval)
            self._window, self._lines, self._suppressed = now, 0, 0
            if len(self._last) > 10_000:
                self._last = {k: t for k, t in self._last.items() if now - t < self.interval}
        key = (principal, int(op), int(rtype), name)
        last = self._last.get(key)
        if (last is not None and now - last < self.interval) or self._lines >= self.limit:
            self._suppressed += 1
            return False
        self._last[key] = now
        self._lines += 1
        self.logger.info("Principal = %s is Denied operation = %s from host = %s on resource "
                         "= %s:LITERAL:%s for request = %s", principal, op.name,
                         host.removeprefix("/"), rtype.name.title().replace("_", ""), name, api)
        return True


class Authorizer:
    """Decides actions against the ACLs and keeps them (create, describe, delete)."""

    def __init__(self, store: AclStore, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acls: bool = False) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acls = allow_if_no_acls
        self._index = AclIndex()
        self._decisions: dict[tuple[str, str, int, int, str], bool] = {}
        self.version = -1
        self.denials = DenialLog()

    DECISIONS = 20_000
    """Decisions remembered at most (all are forgotten when full, and on every change)."""

    @property
    def index(self) -> AclIndex:
        """The ACLs, indexed (read it; change ACLs with :meth:`create` and :meth:`delete`,
        which forget the remembered decisions)."""
        return self._index

    @index.setter
    def index(self, index: AclIndex) -> None:
        self._index = index
        self._decisions.clear()

    # -- decisions ------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, op: AclOperation, rtype: ResourceType,
                  name: str) -> bool:
        """May ``principal`` connected from ``host`` do ``op`` on resource ``name``?"""
        if principal in self.super_users:
            return True
        key = (principal, host, op, rtype, name)
        known = self._decisions.get(key)
        if known is None:
            known = self._decide(principal, host, op, rtype, name)
            if len(self._decisions) >= self.DECISIONS:
                self._decisions.clear()
            self._decisions[key] = known
        return known

    def _decide(self, principal: str, host: str, op: AclOperation, rtype: ResourceType,
                name: str) -> bool:
        covered = allowed = False
        for bucket in self._index.covering(rtype, name):
            covered = True
            for who in (principal, WILDCARD_PRINCIPAL):
                for acl in bucket.get(who, ()):
                    verdict = acl.decides(op)
                    if verdict is None or not host_matcher(acl.host).matches(host):
                        continue
                    if verdict == DENY:
                        return False
                    allowed = True
        if allowed:
            return True
        return not covered and self.allow_if_no_acls

    def authorize_any(self, principal: str, host: str, op: AclOperation,
                      rtype: ResourceType) -> bool:
        """May ``principal`` do ``op`` on some resource of the type? (Kafka's
        ``authorizeByResourceType``: an ALLOW of the operation, or ALL, on a pattern that no
        DENY covers; InitProducerId grants idempotence to who may write some topic.)"""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True  # super users, and nobody restricted by ACLs
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allows: list[AclBinding] = []
        for who in (principal, WILDCARD_PRINCIPAL):
            for acl in self.index.of_principal(rtype, who):
                if acl.operation not in (op, AclOperation.ALL) or \
                        not host_matcher(acl.host).matches(host):
                    continue
                if acl.permission == DENY:
                    if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                        return False
                    (deny_literal if acl.pattern_type == PatternType.LITERAL
                     else deny_prefix).add(acl.name)
                elif acl.permission == ALLOW:
                    if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                        return True
                    allows.append(acl)
        for acl in allows:
            if acl.pattern_type == PatternType.LITERAL and acl.name in deny_literal:
                continue
            if any(acl.name[:n] in deny_prefix for n in range(1, len(acl.name) + 1)):
                continue
            return True
        return False

    def operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """The 32-bit field of the operations on the resource the principal may do."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(rtype, ()):
            if self.authorize(principal, host, op, rtype, name):
                bits |= 1 << int(op)
        return bits

    # -- the ACLs ---------------------------------------------------------------------------
    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        """Every ACL ``flt`` matches, sorted."""
        return sorted(b for b in self.index if flt.matches(b))

    async def load(self) -> None:
        """Read every ACL from the store (at start, and when another node changed them)."""
        version, acls = await self.store.load()
        self.index = AclIndex(acls)
        self.version = version
        log.info("loaded %d ACLs (version %d)", len(self.index), version)

    async def sync(self, version: int) -> None:
        """Reload if the stored set's version is not the one loaded (cluster nodes)."""
        if version != self.version:
            await self.load()

    async def create(self, acls: Sequence[AclBinding]) -> list[str | None]:
        """Add ACLs (an existing one is a success, as in Kafka); one error message or None
        per ACL, in order."""
        errors: list[str | None] = []
        new: list[AclBinding] = []
        for b in acls:
            try:
                b.validate()
            except InvalidAcl as exc:
                errors.append(str(exc))
                continue
            errors.append(None)
            if b not in self.index and b not in new:
                new.append(b)
        if new:
            self._changed(await self.store.add(new), new, ())
        return errors

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every ACL each filter matches; the ACLs removed, per filter."""
        matched = [self.describe(f) for f in filters]
        gone = sorted({b for found in matched for b in found})
        if gone:
            self._changed(await self.store.remove(gone), (), gone)
        return matched

    def _changed(self, version: int, added: Iterable[AclBinding],
                 removed: Iterable[AclBinding]) -> None:
        self._decisions.clear()
        for b in added:
            self.index.add(b)
        for b in removed:
            self.index.remove(b)
        if version == self.version + 1:
            self.version = version
        else:
            self.version = -1  # someone else changed the store meanwhile: the next sync reloads
