"""TopicManager on the filesystem: deletions and creations cut short by a crash; the
version the group coordinator's topic snapshot is checked against."""

from __future__ import annotations

import asyncio
from pathlib import Path

from samsa.broker.config import BrokerConfig
from samsa.broker.topics import TopicManager
from samsa.storage.local import LocalTopicStore
from tests.records import make_batch


def _manager(data: Path) -> TopicManager:
    topics = TopicManager(BrokerConfig.create(data_dir=data), LocalTopicStore(data))
    topics.load(now_ms=0)
    return topics


def test_orphan_partition_directory_is_not_reopened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topics = _manager(data)
    topic = topics.create("t", 1, now_ms=0)
    topic.partitions[0].log.append(make_batch([(b"k", b"old")]), 0)
    topics.close()
    # A crash after topics.json forgot "t" but before its directory went away:
    (data / "topics.json").write_text("{}")
    topics = _manager(data)
    assert topics.get("t") is None
    fresh = topics.create("t", 1, now_ms=0)
    assert fresh.partitions[0].log.log_end_offset == 0
    topics.close()


def test_delete_moves_data_aside_and_load_sweeps_leftovers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topics = _manager(data)
    topics.create("gone", 2, now_ms=0)
    asyncio.run(topics.delete("gone"))
    assert not list(data.glob("gone-*"))
    (data / "gone-0.abc.deleted").mkdir()  # as if a crash interrupted the removal
    topics.close()
    topics = _manager(data)
    assert not list(data.glob("*.deleted"))
    assert topics.get("gone") is None
    topics.close()


def test_the_version_moves_when_a_topic_appears_grows_or_goes(tmp_path: Path) -> None:
    topics = _manager(tmp_path / "data")
    seen = [topics.version]
    topics.create("t", 1, now_ms=0)
    seen.append(topics.version)
    # not what the coordinator's snapshot holds:
    asyncio.run(topics.alter("t", {"retention.ms": "1000"}))
    seen.append(topics.version)
    asyncio.run(topics.add_partitions("t", 3, now_ms=0))
    seen.append(topics.version)
    asyncio.run(topics.delete("t"))
    seen.append(topics.version)
    assert seen[0] < seen[1] == seen[2] < seen[3] < seen[4]
    topics.close()
