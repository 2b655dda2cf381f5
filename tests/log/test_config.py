from __future__ import annotations

import pytest

from samsa.log import LogConfig


def test_kafka_defaults() -> None:
    cfg = LogConfig()
    assert cfg.segment_bytes == 1073741824
    assert cfg.segment_ms == 604800000
    assert cfg.index_interval_bytes == 4096
    assert cfg.retention_ms == 604800000
    assert cfg.retention_bytes == -1
    assert cfg.cleanup_policy == "delete"
    assert cfg.max_message_bytes == 1048588
    assert cfg.delete_retention_ms == 86400000
    assert cfg.message_timestamp_type == "CreateTime"
    assert cfg.delete and not cfg.compact and not cfg.log_append_time


def test_from_mapping_parses_and_round_trips() -> None:
    cfg = LogConfig.from_mapping(
        {
            "segment.bytes": "1000",
            "retention.ms": "-1",
            "cleanup.policy": "delete,compact",
            "message.timestamp.type": "LogAppendTime",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "true",
        }
    )
    assert cfg.segment_bytes == 1000
    assert cfg.retention_ms == -1
    assert cfg.cleanup_policy == "compact,delete"
    assert cfg.compact and cfg.delete and cfg.log_append_time
    assert cfg.min_cleanable_dirty_ratio == 0.1
    mapping = cfg.to_mapping()
    assert mapping["segment.bytes"] == "1000"
    assert mapping["preallocate"] == "true"
    assert mapping["cleanup.policy"] == "compact,delete"
    assert LogConfig.from_mapping(mapping) == cfg
    assert set(mapping) == set(LogConfig.names())


def test_from_mapping_on_base() -> None:
    base = LogConfig.from_mapping({"segment.bytes": "5000"})
    cfg = LogConfig.from_mapping({"retention.bytes": "10"}, base=base)
    assert (cfg.segment_bytes, cfg.retention_bytes) == (5000, 10)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "13"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "remove"),
        ("cleanup.policy", ""),
        ("message.timestamp.type", "Now"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("preallocate", "yes"),
        ("max.message.bytes", "99999999999"),
    ],
)
def test_invalid_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_mapping({key: value})


def test_unknown_key() -> None:
    with pytest.raises(ValueError, match=r"no\.such\.setting"):
        LogConfig.from_mapping({"no.such.setting": "1"})
