"""Client throughput: samsa vs kafka-python vs confluent-kafka against one samsa broker.

Produces N records of 100 bytes with each producer (one topic each), then consumes the same
N records with each consumer, and prints records/s and ratios. Run::

    .venv/bin/python benchmarks/clients.py               # 1,000,000 records
    .venv/bin/python benchmarks/clients.py --records 200000 --partitions 4

Producers only, as a matrix of record sizes and delivery modes (acks=1; idempotent
acks=all), each producer in its own process, with the CPU seconds of the client process and
of the broker (read from /proc) per run, and, with ``--baseline SRC``, samsa's producer
from another checkout (``git worktree add /tmp/before main``) beside this one::

    .venv/bin/python benchmarks/clients.py --produce-matrix --sizes 100,1024 \
        --baseline /tmp/before/src --repeat 3

Starts its own broker on 127.0.0.1 (data in a temporary directory) unless --bootstrap.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

VALUE = b"x" * 100
Result = tuple[str, str, float]


def start_broker(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``samsa serve`` on a free port; its output goes to ``<data_dir>.log``."""
    log_path = data_dir + ".log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli.main", "serve", "--listen", "127.0.0.1:0",
             "--data-dir", data_dir], stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            m = re.search(r"samsa listening on ([\d.]+):(\d+)", f.read())
        if m:
            return proc, f"{m.group(1)}:{m.group(2)}"
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"broker did not start, see {log_path}")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from samsa.client import Admin

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({name: partitions}, exist_ok=True)


def timed(fn: Callable[[], int]) -> float:
    start = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - start)


# ---- producers --------------------------------------------------------------------------


def produce_samsa(bootstrap: str, topic: str, n: int, value: bytes = VALUE,
                  mode: str = "acks1") -> int:
    from samsa.client import Producer

    acks: Any = 1 if mode == "acks1" else "all"
    p = Producer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=mode == "idem",
                 linger_ms=5, batch_size=65536)
    send = p.send
    for _ in range(n):
        send(topic, value)
    assert p.flush(120) == 0
    p.close()
    return n


def produce_kafka_python(bootstrap: str, topic: str, n: int, value: bytes = VALUE,
                         mode: str = "acks1") -> int:
    from kafka import KafkaProducer

    acks: Any = 1 if mode == "acks1" else "all"
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5, batch_size=65536,
                      enable_idempotence=mode == "idem")
    send = p.send
    for _ in range(n):
        send(topic, value)
    p.flush(120)
    p.close()
    return n


def produce_confluent(bootstrap: str, topic: str, n: int, value: bytes = VALUE,
                      mode: str = "acks1") -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1 if mode == "acks1" else "all",
                  "enable.idempotence": mode == "idem", "linger.ms": 5,
                  "batch.size": 65536, "queue.buffering.max.messages": 2_000_000})
    produce = p.produce
    for i in range(n):
        try:
            produce(topic, value)
        except BufferError:
            p.poll(0.01)
            produce(topic, value)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return n


PRODUCERS: dict[str, Callable[..., int]] = {
    "samsa": produce_samsa, "kafka-python": produce_kafka_python,
    "confluent-kafka": produce_confluent}


# ---- consumers --------------------------------------------------------------------------


def consume_samsa(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    from samsa import TopicPartition
    from samsa.client import Consumer

    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                 max_poll_records=10000)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = 0
    while got < n:
        got += len(c.poll(1000))
    c.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      max_poll_records=10000, enable_auto_commit=False)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = 0
    while got < n:
        for records in c.poll(1000).values():
            got += len(records)
    c.close()
    return got


def consume_confluent(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    while got < n:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    c.close()
    return got


# ---- the producer matrix: one process per run, CPU of client and broker ------------------


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_produce(argv: list[str]) -> None:
    """``--child-produce NAME BOOTSTRAP TOPIC N SIZE MODE``: one run; prints JSON."""
    name, bootstrap, topic, n, size, mode = argv
    import samsa

    fn = PRODUCERS[name]
    importlib.import_module({"samsa": "samsa.client", "kafka-python": "kafka",
                             "confluent-kafka": "confluent_kafka"}[name])  # not timed
    cpu, start = time.process_time(), time.perf_counter()
    fn(bootstrap, topic, int(n), b"x" * int(size), mode)
    print(json.dumps({"seconds": time.perf_counter() - start,
                      "cpu": time.process_time() - cpu, "samsa": samsa.__file__}))


def run_producer(name: str, src: str | None, bootstrap: str, broker: int | None, topic: str,
                 n: int, size: int, mode: str) -> dict[str, float]:
    """One producer run in a fresh process (samsa from ``src`` when given): records/s and
    the CPU seconds of the client and of the broker."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src  # precedes the editable install's path
    before = cpu_of(broker) if broker else 0.0
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child-produce", name, bootstrap, topic,
         str(n), str(size), mode], env=env, check=True, capture_output=True, text=True).stdout
    got = json.loads(out.splitlines()[-1])
    if src is not None and not os.path.abspath(got["samsa"]).startswith(os.path.abspath(src)):
        raise RuntimeError(f"baseline run imported samsa from {got['samsa']}")
    return {"rate": n / got["seconds"], "client_cpu": got["cpu"],
            "broker_cpu": (cpu_of(broker) - before) if broker else float("nan")}


def produce_matrix(args: argparse.Namespace, bootstrap: str, broker: int | None) -> None:
    n, parts = args.records, args.partitions
    runners: list[tuple[str, str, str | None]] = [("samsa", "samsa", None)]
    if args.baseline:
        runners.append(("samsa (before)", "samsa", args.baseline))
    runners += [("confluent-kafka", "confluent-kafka", None),
                ("kafka-python", "kafka-python", None)]
    print(f"{n:,} records per run, {parts} partitions, one samsa broker; linger 5 ms, "
          f"batch 64 KiB; median of {args.repeat} (runs interleaved); CPU seconds per run")
    for size in [int(x) for x in args.sizes.split(",")]:
        for mode in ("acks1", "idem"):
            label = "acks=1" if mode == "acks1" else "idempotent acks=all"
            results: dict[str, list[dict[str, float]]] = {r[0]: [] for r in runners}
            for rep in range(args.repeat):
                for label_, name, src in runners:
                    topic = f"bench-{size}-{mode}-{rep}-{name}-{int(time.time() * 1000)}"
                    create_topic(bootstrap, topic, parts)
                    results[label_].append(
                        run_producer(name, src, bootstrap, broker, topic, n, size, mode))
            print(f"\n{size} B records, {label}")
            med = {k: {f: statistics.median(r[f] for r in rs) for f in rs[0]}
                   for k, rs in results.items()}
            for k, m in med.items():
                rates = ", ".join(f"{r['rate']:,.0f}" for r in results[k])
                print(f"  {k:16s} {m['rate']:11,.0f} records/s  client cpu {m['client_cpu']:6.2f}"
                      f" s  broker cpu {m['broker_cpu']:6.2f} s   (runs: {rates})")
            ck = med["confluent-kafka"]
            for k in med:
                if k.startswith("samsa"):
                    m = med[k]
                    print(f"  {k}/confluent-kafka = {m['rate'] / ck['rate']:.2f}x records/s; "
                          f"client cpu per record {m['client_cpu'] / ck['client_cpu']:.2f}x")
            if "samsa (before)" in med:
                a, b = med["samsa"], med["samsa (before)"]
                print(f"  samsa after/before = {a['rate'] / b['rate']:.2f}x records/s, "
                      f"client cpu {a['client_cpu'] / b['client_cpu']:.2f}x, broker cpu "
                      f"{a['broker_cpu'] / b['broker_cpu']:.2f}x")


def main() -> None:
    if "--child-produce" in sys.argv:
        child_produce(sys.argv[sys.argv.index("--child-produce") + 1:])
        return
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--bootstrap")
    ap.add_argument("--produce-matrix", action="store_true",
                    help="producers only: record sizes x (acks=1, idempotent acks=all)")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline", help="src directory of another samsa checkout")
    args = ap.parse_args()
    n, parts = args.records, args.partitions
    proc = None
    tmp = tempfile.TemporaryDirectory()
    bootstrap = args.bootstrap
    if bootstrap is None:
        proc, bootstrap = start_broker(os.path.join(tmp.name, "data"))
    run = f"{int(time.time())}"
    try:
        if args.produce_matrix:
            produce_matrix(args, bootstrap, proc.pid if proc is not None else None)
            return
        produced: list[Result] = []
        for name, fn in [("samsa", produce_samsa), ("kafka-python", produce_kafka_python),
                         ("confluent-kafka", produce_confluent)]:
            topic = f"bench-{name}-{run}"
            create_topic(bootstrap, topic, parts)
            rate = timed(lambda fn=fn, topic=topic: fn(bootstrap, topic, n))
            produced.append((name, topic, rate))
            print(f"produce  {name:16s} {rate:12,.0f} records/s", flush=True)
        source = produced[-1][1]  # every consumer reads the same (librdkafka-written) data
        consumed: list[Result] = []
        for name, cfn in [("samsa", consume_samsa), ("kafka-python", consume_kafka_python),
                          ("confluent-kafka", consume_confluent)]:
            rate = timed(lambda cfn=cfn: cfn(bootstrap, source, n, parts))
            consumed.append((name, source, rate))
            print(f"consume  {name:16s} {rate:12,.0f} records/s", flush=True)
        print(f"\n{n:,} records of {len(VALUE)} B, {parts} partitions, one samsa broker")
        for what, results in (("produce", produced), ("consume", consumed)):
            rates = {name: rate for name, _, rate in results}
            print(f"{what}: samsa/kafka-python = {rates['samsa'] / rates['kafka-python']:.2f}x,"
                  f" samsa/confluent-kafka = {rates['samsa'] / rates['confluent-kafka']:.2f}x")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        tmp.cleanup()


if __name__ == "__main__":
    main()
