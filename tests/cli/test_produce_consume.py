"""``samsa produce`` and ``samsa consume``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from samsa import TopicPartition
from samsa.client import Admin, Consumer
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, make_topic, unique


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[object]:
    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        out: list[object] = []
        for _ in range(50):
            out += c.poll(200)
            if len(out) >= expected:
                out += c.poll(200)  # and nothing more
                break
        return out
    finally:
        c.close()


def test_produce_file_with_keys_headers_and_compression(cli: CLI, admin: Admin,
                                                        broker: BrokerProcess,
                                                        tmp_path: Path) -> None:
    topic = make_topic(admin, 1)
    data = tmp_path / "lines.txt"
    data.write_text("h=1,kind=a|k1:hello\nh=2|k2:world:with:colons\n|k3:\n")
    r = cli("produce", topic, "--file", str(data), "--key-separator", ":",
            "--headers-separator", "|", "--header", "src=cli", "--compression", "gzip",
            "-o", "json")
    assert r.rc == 0, r.err
    assert r.json() == {"topic": topic, "records": 3, "failed": 0,
                        "partitions": {"0": {"first_offset": 0, "last_offset": 2,
                                             "records": 3}}}
    records = read_all(broker.bootstrap, topic, 1, 3)
    assert [(r.key, r.value, r.headers) for r in records] == [  # type: ignore[attr-defined]
        (b"k1", b"hello", [("src", b"cli"), ("h", b"1"), ("kind", b"a")]),
        (b"k2", b"world:with:colons", [("src", b"cli"), ("h", b"2")]),
        (b"k3", b"", [("src", b"cli")]),
    ]


def test_produce_stdin_and_bad_lines(cli: CLI, admin: Admin, broker: BrokerProcess,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    topic = make_topic(admin, 2)
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\nc\n"))
    r = cli("produce", topic, "--partition", "1", "--compression", "zstd")
    assert r.rc == 0, r.err
    assert "Produced 3 record(s)" in r.err
    assert admin.list_offsets({TopicPartition(topic, 1): "latest"})[
        TopicPartition(topic, 1)][0] == 3
    monkeypatch.setattr("sys.stdin", io.StringIO("no separator here\n"))
    r = cli("produce", topic, "--key-separator", "\t")
    assert r.rc == 1 and "line 1: no key separator" in r.err
    r = cli("produce", topic, "--file", "/nonexistent/x")
    assert r.rc == 1 and "--file" in r.err


def test_consume_partition_offset_and_formatting(cli: CLI, admin: Admin,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    topic = make_topic(admin, 2)
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"k{i}=v{i}\n" for i in range(6))))
    assert cli("produce", topic, "--partition", "1", "--key-separator", "=",
               "--header", "a=b").rc == 0
    r = cli("consume", topic, "--partition", "1", "--offset", "2", "--max-messages", "3",
            "--print-key", "--print-offset", "--print-partition", "--print-headers",
            "--timeout", "10")
    assert r.rc == 0, r.err
    assert r.out.splitlines() == [f"Partition:1\tOffset:{i}\ta:b\tk{i}\tv{i}" for i in (2, 3, 4)]
    r = cli("consume", topic, "--from-beginning", "--max-messages", "6", "-o", "json",
            "--print-timestamp")
    lines = [json.loads(ln) for ln in r.out.splitlines()]
    assert [(x["partition"], x["offset"], x["key"], x["value"]) for x in lines] == \
        [(1, i, f"k{i}", f"v{i}") for i in range(6)]
    assert lines[0]["headers"] == [["a", "b"]] and lines[0]["timestamp_type"] == "CreateTime"
    r = cli("consume", topic, "--partition", "1", "--offset", "earliest", "--max-messages",
            "1", "--print-timestamp", "--timestamp-format", "iso", "--separator", "|")
    assert r.out.startswith("CreateTime:20") and r.out.rstrip().endswith("|v0")
    # nothing new: the idle timeout ends a consumer that starts at the end
    r = cli("consume", topic, "--idle-timeout", "0.5")
    assert r.rc == 0 and r.out == "" and "Consumed 0 record(s)" in r.err


def test_consume_as_group_commits(cli: CLI, admin: Admin,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    topic = make_topic(admin, 1)
    group = unique("g")
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{i}\n" for i in range(10))))
    assert cli("produce", topic).rc == 0
    r = cli("consume", topic, "--group", group, "--from-beginning", "--max-messages", "4")
    assert r.rc == 0, r.err
    assert r.out.splitlines() == ["0", "1", "2", "3"]
    assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 4}
    r = cli("consume", topic, "--group", group, "--max-messages", "2")
    assert r.out.splitlines() == ["4", "5"]
    assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 6}


def test_consume_bad_arguments(cli: CLI, admin: Admin) -> None:
    topic = make_topic(admin, 1)
    cases = [
        (["--offset", "3"], "--offset needs --partition"),
        (["--partition", "0", "--offset", "x"], "expected a number"),
        (["--group", "g", "--partition", "0"], "cannot be combined with --group"),
        (["--partition", "0", "--offset", "1", "--from-beginning"], "cannot be combined"),
        (["--max-messages", "0"], "must be positive"),
    ]
    for extra, message in cases:
        r = cli("consume", topic, *extra)
        assert r.rc == 2 and message in r.err, (extra, r.err)
    r = cli("consume", topic, "--partition", "7", "--max-messages", "1")
    assert r.rc == 1 and "no partition 7" in r.err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_on_a_terminal(cli: CLI, admin: Admin, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    topic = make_topic(admin, 1)
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"{i}\n" for i in range(500)))
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert cli("produce", topic, "--file", str(data)).rc == 0
    assert "producing to" in terminal.getvalue() and "500/500" in terminal.getvalue()
    r = cli("consume", topic, "--from-beginning", "--max-messages", "500")
    assert r.rc == 0 and len(r.out.splitlines()) == 500
    assert "consuming" in terminal.getvalue()
