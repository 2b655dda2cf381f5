"""The cost of authorization with 10,000 ACLs: per decision, and per request.

Usage: .venv/bin/python benchmarks/authorization.py [--acls 10000] [--seconds 2]

1. Decisions over ACLs of 1,000 principals (literal and prefixed topics and groups, CIDR and
   exact hosts, some DENYs and ``User:*`` ones): a remembered decision, one made through the
   index (an allowed and a denied action, and beside an index of 10 ACLs), and one made by
   a plain scan of every ACL (what the index avoids).
2. Requests: Produce (one partition, acks=1), Fetch (one partition, 1 KB), Metadata (one
   topic) and OffsetFetch (one partition) through an in-process broker's handlers, the
   same requests with no authorizer and with one holding the ACLs; µs per request and the
   ratio. No sockets: the figures are the handlers' own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.index import load_request_schema

from samsa.broker.config import BrokerConfig
from samsa.broker.context import RequestContext
from samsa.broker.server import Broker
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import decode_request, encode_request
from samsa.protocol.records import ProducerRecordData, encode_batch
from samsa.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    host_matcher,
)
from samsa.security.authorizer import Authorizer, FileAclStore
from samsa.storage.local import LocalEngine

Op = AclOperation
T, G = ResourceType.TOPIC, ResourceType.GROUP
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUBJECT, HOST = "User:ANONYMOUS", "/127.0.0.1"
TOPIC, GROUP = "orders-eu-7", "billing-7"


def many_acls(count: int, seed: int = 7) -> list[AclBinding]:
    """``count`` ACLs of 1,000 principals; the subject's own are the last few."""
    rnd = random.Random(seed)
    hosts = ["*", "*", "*", "10.1.2.3", "10.0.0.0/8", "192.168.0.0/16", "2001:db8::/32"]
    ops = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.ALTER_CONFIGS, Op.ALL]
    out: set[AclBinding] = set()
    while len(out) < count - 4:
        principal = f"User:app-{rnd.randrange(1000)}"
        rtype = rnd.choice([T, T, T, G])
        prefixed = rnd.random() < 0.3
        name = (f"orders-{rnd.choice(['eu', 'us', 'ap'])}" if prefixed else
                f"{'orders' if rtype == T else 'billing'}-{rnd.choice(['eu-', 'us-', ''])}"
                f"{rnd.randrange(3000)}")
        out.add(AclBinding(rtype, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL,
                           principal, rnd.choice(hosts), rnd.choice(ops),
                           DENY if rnd.random() < 0.05 else ALLOW))
    mine = [AclBinding(T, "orders-eu", PatternType.PREFIXED, SUBJECT, "127.0.0.0/8", op, ALLOW)
            for op in (Op.WRITE, Op.READ)]
    mine.append(AclBinding(G, GROUP, PatternType.LITERAL, SUBJECT, "*", Op.DESCRIBE, ALLOW))
    mine.append(AclBinding(T, "*", PatternType.LITERAL, "User:*", "*", Op.CREATE, DENY))
    return sorted(out) + mine


def scan(acls: list[AclBinding], principal: str, host: str, op: AclOperation,
         rtype: ResourceType, name: str) -> bool:
    """The decision made by looking at every ACL (no index)."""
    allowed = False
    for b in acls:
        if b.resource_type != rtype:
            continue
        if not (b.name in (name, "*") if b.pattern_type == PatternType.LITERAL
                else name.startswith(b.name)):
            continue
        if b.principal not in (principal, "User:*") or not host_matcher(b.host).matches(host):
            continue
        verdict = b.decides(op)
        if verdict == DENY:
            return False
        allowed |= verdict == ALLOW
    return allowed  # allow.everyone.if.no.acl.found=false


def per_call(fn: Callable[[], object], seconds: float) -> float:
    """µs per call: the best of five rounds of ``seconds / 5``."""
    rounds = []
    for _ in range(5):
        n, started = 0, time.perf_counter()
        deadline = started + seconds / 5
        while True:
            for _ in range(100):
                fn()
            n += 100
            now = time.perf_counter()
            if now >= deadline:
                break
        rounds.append((now - started) / n * 1e6)
    return min(rounds)


def decisions(acls: list[AclBinding], seconds: float) -> None:
    big = Authorizer(FileAclStore(Path("/nonexistent")))
    for b in acls:
        big.index.add(b)
    small = Authorizer(FileAclStore(Path("/nonexistent")))
    for b in acls[-10:]:
        small.index.add(b)
    allowed = (SUBJECT, HOST, Op.WRITE, T, TOPIC)
    denied = (SUBJECT, HOST, Op.WRITE, T, "payments-1")
    assert big.authorize(*allowed) and not big.authorize(*denied)
    assert scan(acls, *allowed) and not scan(acls, *denied)
    print(f"decisions ({len(acls)} ACLs, {len({b.principal for b in acls})} principals)")
    rows = [("allowed, remembered", per_call(lambda: big.authorize(*allowed), seconds)),
            ("allowed, index", per_call(lambda: big._decide(*allowed), seconds)),
            ("denied, index", per_call(lambda: big._decide(*denied), seconds)),
            ("allowed, index of 10", per_call(lambda: small._decide(*allowed), seconds)),
            ("allowed, plain scan", per_call(lambda: scan(acls, *allowed), seconds / 4))]
    for what, us in rows:
        print(f"  {what:24s} {us:9.2f} µs")
    print(f"  index vs scan: {rows[4][1] / rows[1][1]:.0f}x faster")


def request(api: ApiKey, version: int, **fields: Any) -> tuple[ApiKey, int, Any]:
    return api, version, build(load_request_schema(api, version), fields)


REQUESTS = {
    "Produce": request(ApiKey.PRODUCE, 9, transactional_id=None, acks=1, timeout=5000,
                       topic_data=[{"name": TOPIC, "partition_data": [
                           {"index": 0, "records": encode_batch(
                               [ProducerRecordData(0, b"k", b"v" * 100, ())])}]}]),
    "Fetch": request(ApiKey.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0,
                     max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                     topics=[{"topic": TOPIC, "partitions": [
                         {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                          "last_fetched_epoch": -1, "log_start_offset": -1,
                          "partition_max_bytes": 1024}]}], forgotten_topics_data=[],
                     rack_id=""),
    "Metadata": request(ApiKey.METADATA, 12, topics=[{"name": TOPIC, "topic_id": None}],
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False),
    "OffsetFetch": request(ApiKey.OFFSET_FETCH, 8, require_stable=False, groups=[
        {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]),
}


async def start_broker(data_dir: Path, acls: list[AclBinding] | None) -> Broker:
    """A broker with a topic (no authorizer if ``acls`` is None)."""
    overrides = {"offsets.topic.num.partitions": "1", "log.flush.interval.ms": "600000"}
    if acls is not None:
        FileAclStore(data_dir).write(acls)
        overrides["authorizer.class.name"] = AUTHORIZER
    config = BrokerConfig.create(host="127.0.0.1", port=0, data_dir=data_dir,
                                 overrides=overrides)
    broker = Broker(config, LocalEngine(config))
    await broker.start()
    broker.topics.create(TOPIC, 1, now_ms=0)
    return broker


async def round_us(broker: Broker, ctx: RequestContext, seconds: float) -> float:
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(50):
            await broker.dispatch(ctx)
        count += 50
    return (time.perf_counter() - started) / count * 1e6


async def handler_costs(dirs: tuple[Path, Path], acls: list[AclBinding],
                        seconds: float) -> dict[str, tuple[float, float]]:
    """µs per request of each of :data:`REQUESTS` without and with the authorizer: the
    best of 7 rounds each, the rounds of the two brokers alternating (the machine's load
    hits both alike)."""
    plain, guarded = await start_broker(dirs[0], None), await start_broker(dirs[1], acls)
    try:
        out = {}
        for name, (api, version, body) in REQUESTS.items():
            frame = encode_request(api, version, 1, "bench", body)[4:]
            ctxs = [RequestContext(b, decode_request(frame, b.supported), HOST)
                    for b in (plain, guarded)]
            for ctx in ctxs:
                answer = str(await ctx.broker.dispatch(ctx))
                assert "authorization_failed" not in answer and "unknown" not in answer, answer
            best = [float("inf"), float("inf")]
            for _ in range(7):
                for i, ctx in enumerate(ctxs):
                    best[i] = min(best[i], await round_us(ctx.broker, ctx,
                                                          seconds / 14 / len(REQUESTS)))
            out[name] = (best[0], best[1])
        return out
    finally:
        await plain.stop()
        await guarded.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    acls = many_acls(args.acls)
    decisions(acls, args.seconds)
    print("requests through the handlers (µs per request, best of 7 alternating rounds)")
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        costs = asyncio.run(handler_costs((Path(a), Path(b)), acls, args.seconds * 8))
    print(f"  {'API':14s} {'no authorizer':>14s} {f'{len(acls)} ACLs':>14s} {'ratio':>7s}")
    for name, (plain, guarded) in costs.items():
        print(f"  {name:14s} {plain:14.1f} {guarded:14.1f} {guarded / plain:7.2f}")
    ratios = [guarded / plain for plain, guarded in costs.values()]
    print(f"  geometric mean ratio: {statistics.geometric_mean(ratios):.2f}")


if __name__ == "__main__":
    main()
