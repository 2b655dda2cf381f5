"""Broker throughput against the loopback ceiling, measured side by side in one run.

Starts a samsa broker, produces with confluent-kafka (1 KiB and 100 B records, acks=1 and
acks=all) and consumes it back, and measures a plain Python socket sender/receiver pair on
the same loopback right before and right after every case (the VM's speed drifts within
minutes, so each ratio uses the ceiling measured around it). Per case it also prints the
CPU share of the broker and of the client (1.00 = one core) and the broker's minor page
faults per 4 KiB moved.

Two rows per direction separate the broker from the client:

* ``confluent-kafka``: the Python client as users run it. On a 2-core machine it shares
  the CPU with the broker, and its own per-message cost caps it: the ``client alone``
  row is the rate at which the same producer merely queues records, with no broker.
* ``protocol``: a lean client on a raw socket (pre-encoded Produce requests pipelined
  8 deep; Fetch responses received into one reused buffer and walked by batch header),
  which leaves the CPU to the broker: what the broker itself sustains.

Consumers are timed from the first record to the last (connecting and metadata excluded).
Each topic is deleted once measured, as retention does on a long-running broker: on this
VM, page cache that grows into never-touched memory is written at a fraction of the speed
of reused memory, so letting it grow across cases would measure the hypervisor, not the
broker. Also reports the broker's RSS with 1,000 idle partitions.

Two rows price Kafka's record validation: the same keyed 100 B batches produced to a
``cleanup.policy=delete`` topic (batches stay opaque) and to a compacted one (the broker
reads every record's key); ``--validation-only`` runs just those two.

Security rows (``--security-only`` runs just those): one broker with PLAINTEXT, SSL and
SASL_SSL (SCRAM-SHA-512) listeners (certificates made for the run), 1 KiB records produced
(acks=1) and fetched with confluent-kafka on each; the TLS rows give their rate beside
PLAINTEXT's (target: TLS produce >= 0.6x plaintext).

``--acks-only`` runs just the 1 KiB produce rows with acks=1 and acks=all (protocol-level
and confluent-kafka, on fresh topics), and notes each acks=all row's rate beside the acks=1
one's (target: >= 0.5x) and the broker's CPU per MB.

    .venv/bin/python benchmarks/throughput.py [--records-1k N] [--records-100 N] [--repeat N]
                                              [--validation-only | --security-only | --acks-only]
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.brokerproc import BrokerProcess
from tests.records import make_batch

from samsa.protocol.codec import decode_response, encode_request

MB = 1_000_000
PAGE = 4096


# -- the ceiling -----------------------------------------------------------------------------
def loopback_ceiling(total_bytes: int = 1_000_000_000, chunk: int = 1 << 16) -> float:
    """MB/s of one Python sender and one Python receiver over 127.0.0.1."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    received = 0

    def receive() -> None:
        nonlocal received
        conn, _ = srv.accept()
        buf = bytearray(1 << 20)
        while received < total_bytes:
            n = conn.recv_into(buf)
            if not n:
                break
            received += n
        conn.close()

    t = threading.Thread(target=receive)
    t.start()
    sender = socket.create_connection(("127.0.0.1", port))
    payload = b"x" * chunk
    start = time.perf_counter()
    sent = 0
    while sent < total_bytes:
        sender.sendall(payload)
        sent += chunk
    sender.close()
    t.join()
    elapsed = time.perf_counter() - start
    srv.close()
    return total_bytes / elapsed / MB


# -- broker process accounting ---------------------------------------------------------------
def _stat(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[7])


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Row:
    name: str
    records: float  # per second
    mbs: float
    ceiling: float
    cpu: float | None  # broker CPU share
    client_cpu: float  # this process's CPU share (the client, with its threads)
    faults: float | None  # broker minor faults per 4 KiB moved
    target: float | None  # ratio to the ceiling
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.mbs / self.ceiling


def measure(name: str, pid: int | None, size: int, target: float | None,
            case: Callable[[], tuple[int, float]]) -> Row:
    """Run ``case`` (returning records moved and seconds) between two ceiling runs."""
    before = loopback_ceiling()
    cpu0, flt0 = _stat(pid) if pid else (0.0, 0)
    own0 = _own_cpu()
    wall0 = time.perf_counter()
    records, seconds = case()
    wall = time.perf_counter() - wall0
    cpu1, flt1 = _stat(pid) if pid else (0.0, 0)
    own = _own_cpu() - own0
    after = loopback_ceiling()
    nbytes = records * size
    return Row(name, records / seconds, nbytes / seconds / MB, (before + after) / 2,
               (cpu1 - cpu0) / wall if pid else None, own / wall,
               (flt1 - flt0) / max(nbytes / PAGE, 1) if pid else None, target)


# -- confluent-kafka -------------------------------------------------------------------------
def _producer(bootstrap: str, acks: str, extra: dict[str, str] | None = None) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                     "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                     "queue.buffering.max.kbytes": 1_048_576, "log_level": 0, **(extra or {})})


def confluent_produce(bootstrap: str, topic: str, n: int, size: int,
                      acks: str, extra: dict[str, str] | None = None) -> tuple[int, float]:
    p = _producer(bootstrap, acks, extra)
    value = b"v" * size
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    p.poll(0)
    assert p.flush(120) == 0
    return n, time.perf_counter() - start


def confluent_enqueue_only(n: int, size: int) -> tuple[int, float]:
    """The same producer loop with no broker to talk to: the client's own limit."""
    p = _producer("127.0.0.1:1", "1")
    value = b"v" * size
    start = time.perf_counter()
    for _ in range(n):
        p.produce("t", value)
    elapsed = time.perf_counter() - start
    p.purge()
    return n, elapsed


def confluent_consume(bootstrap: str, topic: str, partitions: int, n: int,
                      extra: dict[str, str] | None = None) -> tuple[int, float]:
    """Consume the ``n`` records of ``topic``, timed from the first to the last record."""
    # librdkafka's default fetch sizes (1 MiB per partition) were its fastest here. No
    # enable.partition.eof: with it, librdkafka fetches a partition it already drained alone
    # and waits out fetch.wait.max.ms for it while the others' queues run dry. Deep local
    # queues: at the default queued.min.messages (100,000) the queues of 100 B records
    # overfill and librdkafka backs off fetching for a whole second.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "queued.min.messages": 1_000_000, "queued.max.messages.kbytes": 1_048_576,
                  "log_level": 0, **(extra or {})})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = 0.0
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, timeout=1.0):
            if m.error():
                continue
            if not got:
                start = time.perf_counter()
            got += 1
    elapsed = time.perf_counter() - start
    c.close()
    assert got == n, f"consumed {got} records, expected {n}"
    return got, elapsed


# -- protocol-level clients ------------------------------------------------------------------
def _connect(bootstrap: str, tls: ssl.SSLContext | None = None) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    return sock if tls is None else tls.wrap_socket(sock, server_hostname=host)


def _read_frame(sock: socket.socket, view: memoryview) -> int:
    """Receive one response frame into ``view``; returns its size (without the prefix)."""
    got = 0
    while got < 4:
        n = sock.recv_into(view[got:4])
        if not n:
            raise ConnectionError("closed by broker")
        got += n
    (size,) = struct.unpack_from(">i", view, 0)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:size])
        if not n:
            raise ConnectionError("closed by broker")
        got += n
    return size


def protocol_produce(bootstrap: str, topic: str, partitions: int, n: int,
                     size: int, acks: int = 1, keyed: bool = False,
                     tls: ssl.SSLContext | None = None) -> tuple[int, float]:
    """Pipelined Produce v7 of ~1 MB batches of ``size``-byte records (``keyed``: each
    with an 8-byte key, counted in ``size``)."""
    per_batch = max(1, 1_000_000 // (size + 10))
    if keyed:
        batch = make_batch([(f"k{i:07d}".encode(), b"v" * (size - 8)) for i in range(per_batch)])
    else:
        batch = make_batch([(None, b"v" * size)] * per_batch)
    frames = []
    for p in range(partitions):
        req = ProduceRequest(transactional_id=None, acks=acks,
                             timeout=datetime.timedelta(seconds=30),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=p, records=batch),)),))
        frames.append(encode_request(0, 7, p, "bench", req))
    requests = -(-n // per_batch)
    sock = _connect(bootstrap, tls)
    buf = memoryview(bytearray(1 << 16))
    in_flight, sent, done = 0, 0, 0
    start = time.perf_counter()
    while done < requests:
        while sent < requests and in_flight < 8:
            sock.sendall(frames[sent % partitions])
            sent += 1
            in_flight += 1
        size_ = _read_frame(sock, buf)
        _, response = decode_response(bytes(buf[:size_]), 0, 7)
        code = response.responses[0].partition_responses[0].error_code
        assert code == 0, f"produce failed: {code}"
        in_flight -= 1
        done += 1
    elapsed = time.perf_counter() - start
    sock.close()
    return requests * per_batch, elapsed


def protocol_fetch(bootstrap: str, topic: str, partitions: int, size: int,
                   total_records: int) -> tuple[int, float]:
    """Fetch v4 from offset 0 until ``total_records`` records arrived; batches not decoded."""
    sock = _connect(bootstrap)
    buf = bytearray(80 << 20)
    view = memoryview(buf)
    offsets = [0] * partitions
    records = 0
    correlation = 0
    start = time.perf_counter()
    while records < total_records:
        correlation += 1
        req = FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
            max_bytes=64 << 20, isolation_level=0,
            topics=(FetchTopic(topic=topic, partitions=tuple(
                FetchPartition(partition=p, fetch_offset=offsets[p],
                               partition_max_bytes=16 << 20)
                for p in range(partitions))),))
        sock.sendall(encode_request(1, 4, correlation, "bench", req))
        _read_frame(sock, view)
        progressed = False
        pos = 8  # correlation id, throttle time
        (topics,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        for _ in range(topics):
            (name_len,) = struct.unpack_from(">h", buf, pos)
            pos += 2 + name_len
            (parts,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            for _ in range(parts):
                index, error, _hw, _lso, aborted = struct.unpack_from(">ihqqi", buf, pos)
                assert error == 0, f"fetch failed: {error}"
                pos += 26 + 16 * max(aborted, 0)
                (length,) = struct.unpack_from(">i", buf, pos)
                pos += 4
                end = pos + max(length, 0)
                while pos + 61 <= end:  # walk batch headers only
                    base, blen = struct.unpack_from(">qi", buf, pos)
                    if pos + 12 + blen > end:
                        break
                    delta, = struct.unpack_from(">i", buf, pos + 23)
                    (count,) = struct.unpack_from(">i", buf, pos + 57)
                    offsets[index] = base + delta + 1
                    records += count
                    pos += 12 + blen
                    progressed = True
                pos = end
        if not progressed:
            break
    elapsed = time.perf_counter() - start
    sock.close()
    return records, elapsed


# -- the run -----------------------------------------------------------------------------------
def run_once(args: argparse.Namespace, tmp: Path) -> list[Row]:
    broker = BrokerProcess(tmp / "data").start()
    try:
        assert broker.proc is not None
        pid, boot = broker.proc.pid, broker.bootstrap
        admin = AdminClient({"bootstrap.servers": boot})
        n1k, n100 = args.records_1k, args.records_100

        def create(topic: str, configs: dict[str, str] | None = None) -> str:
            admin.create_topics([NewTopic(topic, num_partitions=4,
                                          config=configs or {})])[topic].result(30)
            return topic

        def drop(topic: str) -> None:
            admin.delete_topics([topic])[topic].result(30)

        if args.acks_only:
            return acks_rows(pid, boot, n1k, create, drop)
        rows = validation_rows(pid, boot, n100, create, drop)
        if args.validation_only:
            return rows
        t = create("b1k-acks1")
        rows.append(measure("produce 1 KiB acks=1 (confluent-kafka)", pid, 1024, 0.3,
                            lambda: confluent_produce(boot, t, n1k, 1024, "1")))
        rows.append(measure("fetch 1 KiB (confluent-kafka)", pid, 1024, 0.5,
                            lambda: confluent_consume(boot, t, 4, n1k)))
        rows.append(measure("fetch 1 KiB (protocol)", pid, 1024, 0.5,
                            lambda: protocol_fetch(boot, t, 4, 1024, n1k)))
        drop(t)
        t = create("b1k-acksall")
        rows.append(measure("produce 1 KiB acks=all (confluent-kafka)", pid, 1024, 0.3,
                            lambda: confluent_produce(boot, t, n1k, 1024, "all")))
        drop(t)
        rows.append(measure("  confluent-kafka client alone, no broker", None, 1024, None,
                            lambda: confluent_enqueue_only(n1k, 1024)))
        t = create("b1k-protocol")
        rows.append(measure("produce 1 KiB acks=1 (protocol)", pid, 1024, 0.3,
                            lambda: protocol_produce(boot, t, 4, n1k, 1024)))
        drop(t)
        t = create("b1k-protocol-all")
        rows.append(measure("produce 1 KiB acks=all (protocol)", pid, 1024, 0.3,
                            lambda: protocol_produce(boot, t, 4, n1k, 1024, acks=-1)))
        drop(t)
        t = create("b100")
        rows.append(measure("produce 100 B acks=1 (confluent-kafka)", pid, 100, None,
                            lambda: confluent_produce(boot, t, n100, 100, "1")))
        rows.append(measure("fetch 100 B (confluent-kafka)", pid, 100, None,
                            lambda: confluent_consume(boot, t, 4, n100)))
        drop(t)
        rows[-2].note = "target >= 500,000 records/s"
        return rows
    finally:
        broker.stop()


def acks_rows(pid: int, boot: str, n: int, create: Callable[..., str],
              drop: Callable[[str], None]) -> list[Row]:
    """1 KiB produce with acks=1 and acks=all, protocol-level then confluent-kafka; each
    acks=all row notes its rate as a share of the acks=1 row before it, and its ratio to
    the ceiling as a share of that row's (the VM drifts between rows; target >= 0.5x)."""
    rows = []
    for client in ("protocol", "confluent-kafka"):
        for acks in (1, -1):
            t = create(f"b1k-{client}-{acks}")
            label = "all" if acks == -1 else "1"

            def case(t: str = t, acks: int = acks, client: str = client) -> tuple[int, float]:
                if client == "protocol":
                    return protocol_produce(boot, t, 4, n, 1024, acks=acks)
                return confluent_produce(boot, t, n, 1024, "all" if acks == -1 else "1")

            rows.append(measure(f"produce 1 KiB acks={label} ({client})", pid, 1024, None,
                                case))
            drop(t)
            row = rows[-1]
            row.note = f"broker {row.cpu / row.mbs * 1000:.1f} ms CPU/MB" if row.cpu else ""
            if acks == -1:  # the rates, and the ratios to their own ceilings
                row.note += (f", {row.records / rows[-2].records:.2f}x acks=1 "
                             f"({row.ratio / rows[-2].ratio:.2f}x by ratio; target >= 0.5x)")
    return rows


def validation_rows(pid: int, boot: str, n: int, create: Callable[..., str],
                    drop: Callable[[str], None]) -> list[Row]:
    """The cost of reading records on produce: the same keyed 100 B batches to a topic with
    cleanup.policy=delete (batches stay opaque) and to a compacted one (every record's key
    is checked, as Kafka's LogValidator does)."""
    rows = []
    for policy in ("delete", "compact"):
        t = create(f"b100-keyed-{policy}", {"cleanup.policy": policy})
        label = "keys read" if policy == "compact" else "opaque"
        rows.append(measure(f"produce 100 B keyed, {policy} ({label}, protocol)", pid, 100,
                            None, lambda t=t: protocol_produce(boot, t, 4, n, 100, keyed=True)))
        drop(t)
    rows[-1].note = f"{rows[-1].records / rows[-2].records:.2f}x the delete-policy rate"
    return rows


def security_rows(args: argparse.Namespace, tmp: Path) -> list[Row]:
    """1 KiB produce and fetch over PLAINTEXT, SSL and SASL_SSL listeners of one broker."""
    import asyncio

    from tests.security.certs import Pki

    from samsa.security.credentials import FileStore, from_password

    pki = Pki(tmp / "pki")
    server = pki.issue("broker", server=True)
    store = FileStore(tmp / "sdata")
    asyncio.run(store.alter([("bench", "SCRAM-SHA-512",
                              from_password("SCRAM-SHA-512", "bench-pw"))], []))
    broker = BrokerProcess(tmp / "sdata", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(server.pem), "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    broker.start()
    tls = {"ssl.ca.location": str(pki.ca)}
    ways = {"PLAINTEXT": {}, "SSL": {"security.protocol": "SSL", **tls},
            "SASL_SSL": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": "bench", "sasl.password": "bench-pw", **tls}}
    rows: list[Row] = []
    try:
        assert broker.proc is not None
        pid, n = broker.proc.pid, args.records_1k
        admin = AdminClient({"bootstrap.servers": broker.address("PLAINTEXT")})
        for listener, extra in ways.items():
            boot, t = broker.address(listener), f"sec-{listener.lower()}"
            admin.create_topics([NewTopic(t, num_partitions=4)])[t].result(30)
            rows.append(measure(f"produce 1 KiB acks=1 ({listener})", pid, 1024, None,
                                lambda b=boot, t=t, e=extra: confluent_produce(  # type: ignore[misc]
                                    b, t, n, 1024, "1", e)))
            rows.append(measure(f"fetch 1 KiB ({listener})", pid, 1024, None,
                                lambda b=boot, t=t, e=extra: confluent_consume(  # type: ignore[misc]
                                    b, t, 4, n, e)))
            admin.delete_topics([t])[t].result(30)
        for listener in ("PLAINTEXT", "SSL"):
            boot, t = broker.address(listener), f"sec-p-{listener.lower()}"
            admin.create_topics([NewTopic(t, num_partitions=4)])[t].result(30)
            ctx = ssl.create_default_context(cafile=str(pki.ca)) if listener == "SSL" else None
            rows.append(measure(f"produce 1 KiB acks=1 ({listener}, protocol)", pid, 1024, None,
                                lambda b=boot, t=t, c=ctx: protocol_produce(  # type: ignore[misc]
                                    b, t, 4, n, 1024, tls=c)))
            admin.delete_topics([t])[t].result(30)
        for i, base in ((2, 0), (3, 1), (4, 0), (5, 1), (7, 6)):
            rows[i].note = f"{rows[i].records / rows[base].records:.2f}x PLAINTEXT" + (
                " (target >= 0.6x)" if i in (2, 7) else "")
        return rows
    finally:
        broker.stop()


def idle_rss(tmp: Path) -> tuple[float, float]:
    idle = BrokerProcess(tmp / "idle").start()
    try:
        assert idle.proc is not None
        base = rss_mb(idle.proc.pid)
        admin = AdminClient({"bootstrap.servers": idle.bootstrap})
        fs = admin.create_topics([NewTopic(f"idle-{i}", num_partitions=10) for i in range(100)])
        for f in fs.values():
            f.result(60)
        time.sleep(1)
        return base, rss_mb(idle.proc.pid)
    finally:
        idle.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records-1k", type=int, default=500_000)
    ap.add_argument("--records-100", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs; the (lower) median row is shown, all ratios listed")
    ap.add_argument("--validation-only", action="store_true",
                    help="only the delete vs compacted (key validation) produce rows")
    ap.add_argument("--security-only", action="store_true",
                    help="only the PLAINTEXT / SSL / SASL_SSL rows")
    ap.add_argument("--acks-only", action="store_true",
                    help="only the 1 KiB acks=1 / acks=all produce rows")
    args = ap.parse_args()
    runs: list[list[Row]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            (Path(tmp) / f"run{i}").mkdir()
            rows = [] if args.security_only else run_once(args, Path(tmp) / f"run{i}")
            if not (args.validation_only or args.acks_only):
                rows += security_rows(args, Path(tmp) / f"run{i}")
            runs.append(rows)
        quick = args.validation_only or args.security_only or args.acks_only
        base, loaded = (0.0, 0.0) if quick else idle_rss(Path(tmp))
    print(f"{'case':<42}{'records/s':>12}{'MB/s':>8}{'ceiling':>9}{'ratio':>7}"
          f"{'broker':>8}{'client':>8}{'faults':>8}{'target':>8}")
    for i in range(len(runs[0])):
        samples = sorted((run[i] for run in runs), key=lambda r: r.ratio)
        row = samples[(len(samples) - 1) // 2]  # the lower median
        spread = ""
        if len(samples) > 1:
            spread = f"  ratios {', '.join(f'{r.ratio:.2f}' for r in samples)}"
        cpu = f"{row.cpu:.2f}" if row.cpu is not None else "-"
        faults = f"{row.faults:.2f}" if row.faults is not None else "-"
        target = f">={row.target}" if row.target else ""
        verdict = "" if not row.target else (" met" if row.ratio >= row.target else " MISSED")
        print(f"{row.name:<42}{row.records:>12,.0f}{row.mbs:>8,.0f}{row.ceiling:>9,.0f}"
              f"{row.ratio:>7.2f}{cpu:>8}{row.client_cpu:>8.2f}{faults:>8}{target:>8}{verdict}{spread}"
              f"{'  ' + row.note if row.note else ''}")
    print("ceiling: MB/s of a plain Python socket pair, mean of the runs just before and after "
          "the case; broker, client: CPU shares (1.00 = one core) of the broker process and of "
          "this one; faults: the broker's minor page faults per 4 KiB moved")
    if quick:
        return
    print(f"broker RSS: {base:.1f} MB empty, {loaded:.1f} MB with 1,000 idle partitions "
          "(target <= 150 MB)")


if __name__ == "__main__":
    main()
