"""ACL matching and decisions (pure): Kafka's StandardAuthorizer rules, host patterns with
CIDR ranges (KIP-1276), filters, validation, and the index against a plain scan."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
    host_matcher,
    parse_super_users,
)
from samsa.security.authorizer import AclIndex, Authorizer, DenialLog, FileAclStore

Op = AclOperation
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = "User:alice", "User:bob"


def acl(name: str, op: Op = Op.READ, perm: AclPermissionType = ALLOW, *,
        rtype: ResourceType = T, pattern: PatternType = LIT, principal: str = ALICE,
        host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


class MemoryStore:
    def __init__(self) -> None:
        self.acls: set[AclBinding] = set()
        self.version = 0

    async def load(self) -> tuple[int, list[AclBinding]]:
        return self.version, list(self.acls)

    async def add(self, acls: list[AclBinding]) -> int:
        self.acls |= set(acls)
        self.version += 1
        return self.version

    async def remove(self, acls: list[AclBinding]) -> int:
        self.acls -= set(acls)
        self.version += 1
        return self.version


def authorizer(*acls: AclBinding, supers: str = "", allow_if_none: bool = False) -> Authorizer:
    a = Authorizer(MemoryStore(), parse_super_users(supers), allow_if_none)
    errors = asyncio.run(a.create(list(acls)))
    assert errors == [None] * len(acls)
    return a


def allowed(a: Authorizer, op: Op, name: str = "orders", rtype: ResourceType = T,
            principal: str = ALICE, host: str = "/10.1.2.3") -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_literal_prefixed_and_wildcard_patterns_cover_their_names() -> None:
    a = authorizer(acl("orders"), acl("pay", pattern=PRE), acl("*", Op.WRITE))
    assert allowed(a, Op.READ, "orders")
    assert not allowed(a, Op.READ, "orders2")  # a literal name is not a prefix
    assert allowed(a, Op.READ, "payments") and allowed(a, Op.READ, "pay")
    assert not allowed(a, Op.READ, "pa")
    assert allowed(a, Op.WRITE, "anything") and allowed(a, Op.WRITE, "*")
    assert not allowed(a, Op.READ, "orders", rtype=G)  # another resource type


def test_deny_wins_over_allow_whatever_the_pattern() -> None:
    a = authorizer(acl("pay", Op.ALL, pattern=PRE), acl("payroll", Op.READ, DENY),
                   acl("*", Op.WRITE, DENY, principal="User:*"))
    assert allowed(a, Op.READ, "payments")
    assert not allowed(a, Op.READ, "payroll")
    assert allowed(a, Op.DESCRIBE, "payroll")  # a DENY of READ denies only READ
    assert not allowed(a, Op.WRITE, "payments")  # DENY * for everyone beats ALLOW ALL


def test_implicit_describe_and_describe_configs_come_from_allows_only() -> None:
    a = authorizer(*(acl(f"t{op.name}", op) for op in
                     (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.CREATE, Op.ALTER_CONFIGS)))
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed(a, Op.DESCRIBE, f"t{op.name}"), op
    assert not allowed(a, Op.DESCRIBE, "tCREATE")
    assert allowed(a, Op.DESCRIBE_CONFIGS, "tALTER_CONFIGS")
    assert not allowed(a, Op.DESCRIBE, "tALTER_CONFIGS")
    assert not allowed(a, Op.READ, "tWRITE")  # nothing implies anything but DESCRIBE(_CONFIGS)
    denied = authorizer(acl("t", Op.ALL), acl("t", Op.WRITE, DENY))
    assert allowed(denied, Op.DESCRIBE, "t")  # a DENY of WRITE does not deny DESCRIBE


def test_principals_wildcard_principal_and_super_users() -> None:
    a = authorizer(acl("t"), acl("shared", principal="User:*"), supers="User:root;User:ops")
    assert allowed(a, Op.READ, "t") and not allowed(a, Op.READ, "t", principal=BOB)
    assert allowed(a, Op.READ, "shared", principal=BOB)
    assert allowed(a, Op.ALTER, CLUSTER_NAME, C, principal="User:ops")
    root = authorizer(acl("*", Op.ALL, DENY, principal="User:*"), supers="User:root")
    assert allowed(root, Op.WRITE, "t", principal="User:root")  # super users skip DENYs


def test_allow_everyone_if_no_acl_found_only_where_no_acl_covers_the_resource() -> None:
    a = authorizer(acl("guarded", principal=BOB), allow_if_none=True)
    assert allowed(a, Op.WRITE, "open")  # no ACL at all: allowed
    assert not allowed(a, Op.READ, "guarded")  # an ACL of someone else covers it
    closed = authorizer(acl("guarded", principal=BOB), allow_if_none=False)
    assert not allowed(closed, Op.WRITE, "open")


@pytest.mark.parametrize(("pattern", "host", "expected"), [
    ("*", "/10.1.2.3", True),
    ("10.1.2.3", "/10.1.2.3", True),
    ("10.1.2.4", "/10.1.2.3", False),
    ("10.0.0.0/8", "/10.1.2.3", True),
    ("10.1.2.0/24", "/10.1.3.1", False),
    ("10.1.2.3/32", "/10.1.2.3", True),
    ("0.0.0.0/0", "/192.168.7.7", True),
    ("2001:db8::/32", "/2001:db8:0:1::5", True),
    ("2001:db8::/32", "/2001:db9::5", False),
    ("::1", "/0:0:0:0:0:0:0:1", True),  # the same address, written differently
    ("10.0.0.0/8", "/::ffff:10.1.2.3", False),  # families never mix
    ("::/0", "/10.1.2.3", False),
    ("broker.example", "/10.1.2.3", False),  # a name never matches an address
])
def test_host_patterns(pattern: str, host: str, expected: bool) -> None:
    assert host_matcher(pattern).matches(host) is expected
    a = authorizer(acl("t", host=pattern))
    assert allowed(a, Op.READ, "t", host=host) is expected


def test_a_cidr_deny_carves_a_range_out_of_an_allow() -> None:
    a = authorizer(acl("t", host="10.0.0.0/8"), acl("t", Op.READ, DENY,
                                                   host="10.9.0.0/16"))
    assert allowed(a, Op.READ, "t", host="/10.1.0.1")
    assert not allowed(a, Op.READ, "t", host="/10.9.200.1")
    assert not allowed(a, Op.READ, "t", host="/11.0.0.1")


@pytest.mark.parametrize(("binding", "message"), [
    (acl("t", host="10.0.0.0/33"), "Invalid host"),
    (acl("t", host="10.0.0.x/8"), "Invalid host"),
    (acl(""), "Resource name should not be empty"),
    (acl("my-cluster", Op.ALTER, rtype=C), "only valid name for the CLUSTER resource"),
    (acl("t", principal="alice"), "Could not parse principal"),
    (acl("t", Op.ANY), "Invalid operation type ANY"),
    (acl("t", Op.UNKNOWN), "Invalid operation type UNKNOWN"),
    (acl("t", perm=AclPermissionType.ANY), "Invalid permission type ANY"),
    (acl("t", pattern=PatternType.MATCH), "Invalid pattern type MATCH"),
    (acl("t", pattern=PatternType.ANY), "Invalid pattern type ANY"),
    (acl("t", rtype=ResourceType.ANY), "Invalid resource type ANY"),
])
def test_invalid_acls_are_refused_with_a_reason(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAcl, match=message):
        binding.validate()
    a = authorizer()
    (error,) = asyncio.run(a.create([binding]))
    assert error is not None and message in error
    assert len(a.index) == 0


def test_filters_any_exact_and_match() -> None:
    acls = [acl("orders"), acl("*"), acl("ord", pattern=PRE), acl("pay", pattern=PRE),
            acl("orders", Op.WRITE, DENY, principal=BOB, host="10.0.0.0/8"),
            acl("orders", rtype=G)]
    a = authorizer(*acls)
    assert a.describe(AclBindingFilter()) == sorted(acls)
    exact = AclBindingFilter(T, "orders", LIT)
    assert set(a.describe(exact)) == {acls[0], acls[4]}
    match = AclBindingFilter(T, "orders", PatternType.MATCH)
    assert set(a.describe(match)) == {acls[0], acls[1], acls[2], acls[4]}
    any_pattern = AclBindingFilter(ResourceType.ANY, "orders", PatternType.ANY)
    assert set(a.describe(any_pattern)) == {acls[0], acls[4], acls[5]}
    entry = AclBindingFilter(principal=BOB, host="10.0.0.0/8", operation=Op.WRITE,
                             permission=DENY)
    assert a.describe(entry) == [acls[4]]
    assert a.describe(AclBindingFilter(host="10.1.2.3")) == []  # hosts compare as strings
    prefixed = AclBindingFilter(T, None, PRE)
    assert set(a.describe(prefixed)) == {acls[2], acls[3]}


def test_filters_with_unknown_elements_are_refused() -> None:
    for flt, message in ((AclBindingFilter(ResourceType.UNKNOWN), "patternFilter"),
                         (AclBindingFilter(pattern_type=PatternType.UNKNOWN), "patternFilter"),
                         (AclBindingFilter(operation=Op.UNKNOWN), "entryFilter"),
                         (AclBindingFilter(permission=AclPermissionType.UNKNOWN), "entryFilter")):
        with pytest.raises(InvalidAcl, match=message):
            flt.validate()


def test_create_is_idempotent_and_delete_returns_what_each_filter_matched() -> None:
    store = MemoryStore()
    a = Authorizer(store)
    one, two = acl("a"), acl("b", pattern=PRE)
    assert asyncio.run(a.create([one, one, two])) == [None, None, None]
    assert asyncio.run(a.create([one])) == [None]
    assert store.acls == {one, two} and store.version == 1  # nothing new: no write
    removed = asyncio.run(a.delete([AclBindingFilter(T, "a", LIT),
                                    AclBindingFilter(pattern_type=PRE), AclBindingFilter()]))
    assert removed == [[one], [two], sorted([one, two])]
    assert store.acls == set() and len(a.index) == 0
    assert not allowed(a, Op.READ, "a")


def test_authorize_any_is_kafkas_authorize_by_resource_type() -> None:
    def any_write(*acls: AclBinding, host: str = "/10.0.0.1") -> bool:
        return authorizer(*acls).authorize_any(ALICE, host, Op.WRITE, T)

    assert not any_write()
    assert any_write(acl("logs", Op.WRITE))
    assert any_write(acl("logs", Op.ALL, pattern=PRE))
    assert not any_write(acl("logs", Op.READ))  # no implication here
    assert not any_write(acl("logs", Op.WRITE), acl("logs", Op.WRITE, DENY))
    assert not any_write(acl("logs", Op.WRITE), acl("lo", Op.WRITE, DENY, pattern=PRE))
    assert any_write(acl("logs", Op.WRITE), acl("logz", Op.WRITE, DENY))
    assert not any_write(acl("logs", Op.WRITE), acl("*", Op.WRITE, DENY))
    assert any_write(acl("*", Op.WRITE, principal="User:*"))
    assert not any_write(acl("logs", Op.WRITE, host="10.9.9.9"))
    everyone = Authorizer(MemoryStore(), allow_if_no_acls=True)
    assert everyone.authorize_any(ALICE, "/10.0.0.1", Op.WRITE, T)  # no ACLs at all
    supers = Authorizer(MemoryStore(), frozenset({ALICE}))
    assert supers.authorize_any(ALICE, "/10.0.0.1", Op.WRITE, T)


def test_authorized_operations_bitfield() -> None:
    a = authorizer(acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS))
    ops = {Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert a.operations(ALICE, "/1.2.3.4", T, "t") == sum(1 << int(o) for o in ops)
    assert a.operations(BOB, "/1.2.3.4", T, "t") == 0
    root = Authorizer(MemoryStore(), frozenset({ALICE}))
    assert root.operations(ALICE, "/1.2.3.4", G, "g") == sum(
        1 << int(o) for o in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS,
                              Op.ALTER_CONFIGS))


def test_super_users_parse_and_refuse_garbage() -> None:
    assert parse_super_users(" User:a ; User:b;") == {"User:a", "User:b"}
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_file_store_round_trip(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path)
    a = Authorizer(store)
    asyncio.run(a.load())
    both = [acl("a", host="10.0.0.0/8"), acl(CLUSTER_NAME, Op.ALTER, rtype=C, pattern=LIT)]
    assert asyncio.run(a.create(both)) == [None, None]
    again = Authorizer(FileAclStore(tmp_path))
    asyncio.run(again.load())
    assert sorted(again.index) == sorted(both)
    asyncio.run(again.delete([AclBindingFilter(C)]))
    assert FileAclStore(tmp_path).read() == [both[0]]


def test_denials_are_logged_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    denials = DenialLog(interval=10.0, limit=2, clock=lambda: now[0])
    caplog.set_level(logging.INFO, "samsa.authorizer")
    assert denials.denied(ALICE, "/10.0.0.1", Op.WRITE, T, "t", "Produce")
    assert not denials.denied(ALICE, "/10.0.0.1", Op.WRITE, T, "t", "Produce")  # same: later
    assert denials.denied(BOB, "/10.0.0.1", Op.WRITE, T, "t", "Produce")
    assert not denials.denied(ALICE, "/10.0.0.1", Op.READ, T, "t", "Fetch")  # over the limit
    now[0] = 10.0
    assert denials.denied(ALICE, "/10.0.0.1", Op.WRITE, T, "t", "Produce")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == ("Principal = User:alice is Denied operation = WRITE from host = "
                        "10.0.0.1 on resource = Topic:LITERAL:t for request = Produce")
    assert "2 more authorization denials were not logged" in lines[2]
    assert len(lines) == 4


# ---- the index decides as a plain scan over every ACL would -------------------------------

NAMES = st.sampled_from(["", "a", "ab", "abc", "abd", "b", "ba", "*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.0/24", "10.0.1.0/24", "::1"])
BINDINGS = st.builds(
    AclBinding, st.sampled_from([T, G]), NAMES.filter(bool), st.sampled_from([LIT, PRE]),
    st.sampled_from([ALICE, BOB, "User:*"]), HOSTS,
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS,
                     Op.DESCRIBE_CONFIGS]),
    st.sampled_from([ALLOW, DENY]))


def reference(acls: list[AclBinding], principal: str, host: str, op: Op, rtype: ResourceType,
              name: str, allow_if_none: bool) -> bool:
    """Kafka's rules, read straight off its documentation, one ACL at a time."""
    def covers(b: AclBinding) -> bool:
        if b.resource_type != rtype:
            return False
        if b.pattern_type == LIT:
            return b.name in (name, "*")
        return name.startswith(b.name)

    def grants(b: AclBinding) -> bool:
        if b.operation in (op, Op.ALL):
            return True
        return b.permission == ALLOW and (
            (op == Op.DESCRIBE and b.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
            or (op == Op.DESCRIBE_CONFIGS and b.operation == Op.ALTER_CONFIGS))

    covering = [b for b in acls if covers(b)]
    mine = [b for b in covering if b.principal in (principal, "User:*")
            and host_matcher(b.host).matches(host) and grants(b)]
    if any(b.permission == DENY for b in mine):
        return False
    if any(b.permission == ALLOW for b in mine):
        return True
    return allow_if_none and not covering


@settings(max_examples=300, deadline=None)
@given(acls=st.lists(BINDINGS, max_size=12), removed=st.integers(0, 3),
       principal=st.sampled_from([ALICE, BOB]), host=st.sampled_from(["/10.0.0.1", "/::1"]),
       op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS]),
       rtype=st.sampled_from([T, G]), name=NAMES.filter(bool), allow_if_none=st.booleans())
def test_index_decides_as_a_scan(acls: list[AclBinding], removed: int, principal: str,
                                 host: str, op: Op, rtype: ResourceType, name: str,
                                 allow_if_none: bool) -> None:
    index = AclIndex(acls)
    kept = sorted(set(acls))
    for b in kept[:removed]:  # removals keep the index right (prefix lengths, buckets)
        assert index.remove(b)
    kept = kept[removed:]
    a = Authorizer(MemoryStore(), frozenset(), allow_if_none)
    a.index = index
    assert a.authorize(principal, host, op, rtype, name) == reference(
        kept, principal, host, op, rtype, name, allow_if_none)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"authorizer.class.name": "com.example.MyAuthorizer"}, "unknown authorizer"),
    ({"super.users": "admin"}, "super.users"),
])
def test_authorizer_settings_are_checked(overrides: dict[str, str], message: str) -> None:
    from samsa.broker.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError, match=message):
        BrokerConfig.create(overrides=overrides)
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "kafka.security.authorizer.AclAuthorizer"):
        config = BrokerConfig.create(overrides={"authorizer.class.name": name,
                                                "super.users": "User:a;User:b"})
        assert config["authorizer.class.name"] == name
