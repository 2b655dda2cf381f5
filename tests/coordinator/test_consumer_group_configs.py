"""A group's own configs (Kafka's GroupConfig: ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``) apply to its members; other groups keep the broker's."""

from __future__ import annotations

from collections.abc import Mapping

from samsa.coordinator import CoordinatorConfig

from .consumer_ctx import CCtx


def _ctx(overrides: dict[str, dict[str, int]]) -> CCtx:
    def lookup(group_id: str) -> Mapping[str, int]:
        return overrides.get(group_id, {})

    return CCtx(CoordinatorConfig(offsets_topic_num_partitions=1, group_configs=lookup))


def test_group_heartbeat_interval_is_returned_to_its_members() -> None:
    overrides = {"g": {"consumer.heartbeat.interval.ms": 7000}}
    ctx = _ctx(overrides)
    assert ctx.hb("a", 0).heartbeat_interval_ms == 7000
    assert ctx.hb("b", 0, group_id="h").heartbeat_interval_ms == 5000  # the broker's
    # AlterConfigs applies on the next heartbeat
    overrides["g"] = {"consumer.heartbeat.interval.ms": 9000}
    assert ctx.hb("a", ctx.member("a").member_epoch).heartbeat_interval_ms == 9000
    overrides.clear()
    assert ctx.hb("a", ctx.member("a").member_epoch).heartbeat_interval_ms == 5000


def test_group_session_timeout_expires_its_members() -> None:
    ctx = _ctx({"g": {"consumer.session.timeout.ms": 50_000}, "h": {}})
    ctx.hb("a", 0)
    ctx.hb("b", 0, group_id="h")
    ctx.sleep(46_000)  # past the broker's 45 s, within g's 50 s
    assert "b" not in ctx.cgroup("h").members
    assert "a" in ctx.cgroup("g").members
    ctx.sleep(4_001)
    assert "a" not in ctx.cgroup("g").members


def test_shorter_group_session_timeout() -> None:
    ctx = _ctx({"g": {"consumer.session.timeout.ms": 10_000}})
    ctx.hb("a", 0)
    ctx.hb("b", 0, group_id="h")
    ctx.sleep(10_001)
    assert "a" not in ctx.cgroup("g").members
    assert "b" in ctx.cgroup("h").members
