"""Consumer-group records: Kafka 4.x byte layouts, round trips through records.serialize /
deserialize, and the configuration names."""

from __future__ import annotations

import struct
import uuid

import pytest

from samsa.coordinator import CoordinatorConfig, TopicPartitions
from samsa.coordinator.consumer.group import epochs_from_record
from samsa.coordinator.consumer.records import (
    AssignedTopicPartitions,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from samsa.coordinator.records import deserialize, serialize

TID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TPS = (TopicPartitions(TID, (0, 2)),)
#: Kafka 4.3: each partition's assignment epoch (tag 0); Kafka 4.0-4.2 wrote none.
ATPS = (AssignedTopicPartitions(TID, (0, 2), (3, 1)),)
OLD_ATPS = (AssignedTopicPartitions(TID, (0, 2)),)

RECORDS = [
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(5)),
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(5, -12345)),
    (ConsumerGroupMetadataKey("g"), None),
    (ConsumerGroupMemberMetadataKey("g", "m"), ConsumerGroupMemberMetadataValue(
        "i", None, "client", "/1.2.3.4", ("a", "b"), "t.*", 30000, "range")),
    (ConsumerGroupMemberMetadataKey("g", "m"), ConsumerGroupMemberMetadataValue(
        None, "r", "", "", (), None, -1, None)),
    (ConsumerGroupMemberMetadataKey("g", "m"), None),
    (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(7)),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m"),
     ConsumerGroupTargetAssignmentMemberValue(TPS)),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m"),
     ConsumerGroupTargetAssignmentMemberValue(())),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
     ConsumerGroupCurrentMemberAssignmentValue(3, 2, 1, ATPS, ())),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
     ConsumerGroupCurrentMemberAssignmentValue(
         3, 2, 1, (AssignedTopicPartitions(TID, (5,), (2,)),), ATPS)),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
     ConsumerGroupCurrentMemberAssignmentValue(3, 2, 1, OLD_ATPS, ())),
    (ConsumerGroupRegularExpressionKey("g", "t.*"),
     ConsumerGroupRegularExpressionValue(("t1", "t2"), 9, 1234)),
    (ConsumerGroupRegularExpressionKey("g", "t.*"), None),
]


@pytest.mark.parametrize(("key", "value"), RECORDS)
def test_round_trip(key: object, value: object) -> None:
    assert deserialize(*serialize(key, value)) == (key, value)  # type: ignore[arg-type]


def test_kafka_byte_layouts() -> None:
    key, value = serialize(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(5, 1))
    assert key == b"\x00\x03\x00\x01g"
    # version 0, epoch int32, tagged fields: 1 field, tag 0, 8 bytes of int64
    assert value == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x01\x00\x08" + struct.pack(">q", 1)
    key, value = serialize(ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
                           ConsumerGroupCurrentMemberAssignmentValue(3, 2, 1, ATPS, ()))
    assert key == b"\x00\x08\x00\x01g\x00\x01m"
    # Kafka 4.3: still value version 0; the TopicPartitions struct ends with one tagged
    # field, tag 0 AssignmentEpochs (9 bytes: compact array of 2, two int32)
    assert value == (b"\x00\x00" + struct.pack(">iib", 3, 2, 1)
                     + b"\x02" + TID.bytes + b"\x03" + struct.pack(">ii", 0, 2)
                     + b"\x01\x00\x09" + b"\x03" + struct.pack(">ii", 3, 1)
                     + b"\x01" + b"\x00")
    key, value = serialize(ConsumerGroupMemberMetadataKey("g", "m"),
                           ConsumerGroupMemberMetadataValue(None, "r", "c", "h", ("a",), None,
                                                            -1, None))
    assert key[:2] == b"\x00\x05"
    assert value == (b"\x00\x00" + b"\x00" + b"\x02r" + b"\x02c" + b"\x02h" + b"\x02\x02a"
                     + b"\x00" + struct.pack(">i", -1) + b"\x00" + b"\x00")
    assert serialize(ConsumerGroupRegularExpressionKey("g", "x"), None) == \
        (b"\x00\x10\x00\x01g\x00\x01x", None)


#: A current member assignment value as Kafka 4.0-4.2 wrote it: no tagged field in the
#: TopicPartitions structs (member epoch 3, previous 2, state 1, assigned t-0 and t-2,
#: t-5 pending revocation).
KAFKA_42_ASSIGNMENT = (b"\x00\x00" + struct.pack(">iib", 3, 2, 1)
                       + b"\x02" + TID.bytes + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
                       + b"\x02" + TID.bytes + b"\x02" + struct.pack(">i", 5) + b"\x00"
                       + b"\x00")


def test_a_kafka_42_current_assignment_takes_the_member_epoch() -> None:
    """Records without assignment epochs are read as Kafka 4.3 reads them: every partition
    at the record's member epoch (0 for a static member that left, epoch -2)."""
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    decoded = deserialize(serialize(key, None)[0], KAFKA_42_ASSIGNMENT)
    expected = ConsumerGroupCurrentMemberAssignmentValue(
        3, 2, 1, OLD_ATPS, (AssignedTopicPartitions(TID, (5,)),))
    assert decoded == (key, expected)
    assert epochs_from_record(expected) == {(TID, 0): 3, (TID, 2): 3, (TID, 5): 3}
    left = ConsumerGroupCurrentMemberAssignmentValue(-2, 3, 0, OLD_ATPS, ())
    assert epochs_from_record(left) == {(TID, 0): 0, (TID, 2): 0}
    # epochs not aligned with the partitions: the member epoch, as Kafka falls back
    odd = ConsumerGroupCurrentMemberAssignmentValue(
        7, 6, 0, (AssignedTopicPartitions(TID, (0, 2), (1,)),
                  AssignedTopicPartitions(uuid.UUID(int=1), (4,), (5,))), ())
    assert epochs_from_record(odd) == {(TID, 0): 7, (TID, 2): 7, (uuid.UUID(int=1), 4): 5}


def test_unknown_tagged_fields_are_skipped_and_old_partition_metadata_ignored() -> None:
    key, value = serialize(ConsumerGroupTargetAssignmentMetadataKey("g"),
                           ConsumerGroupTargetAssignmentMetadataValue(7))
    assert value is not None
    stamped = value[:-1] + b"\x01\x00\x08" + struct.pack(">q", 99)  # AssignmentTimestamp
    assert deserialize(key, stamped) == (ConsumerGroupTargetAssignmentMetadataKey("g"),
                                         ConsumerGroupTargetAssignmentMetadataValue(7, 99))
    assert serialize(ConsumerGroupTargetAssignmentMetadataKey("g"),
                     ConsumerGroupTargetAssignmentMetadataValue(7, 99))[1] == stamped
    tagged = value[:-1] + b"\x01\x05\x08" + struct.pack(">q", 99)  # a tag samsa lacks
    assert deserialize(key, tagged) == (ConsumerGroupTargetAssignmentMetadataKey("g"),
                                        ConsumerGroupTargetAssignmentMetadataValue(7))
    assert deserialize(b"\x00\x04\x00\x01g", b"\x00\x00\x01\x00") is None  # key 4 (< 4.1)


def test_configuration_names_and_defaults() -> None:
    default = CoordinatorConfig()
    assert (default.consumer_heartbeat_interval_ms, default.consumer_session_timeout_ms) == \
        (5000, 45000)
    assert default.consumer_assignors == ("uniform", "range")
    assert default.rebalance_protocols == ("classic", "consumer")
    assert default.consumer_migration_policy == "bidirectional"
    config = CoordinatorConfig.from_properties({
        "group.coordinator.rebalance.protocols": "classic",
        "group.consumer.heartbeat.interval.ms": "3000",
        "group.consumer.session.timeout.ms": 50000,
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.max.size": "10",
        "group.consumer.assignors": "range, uniform",
        "group.consumer.migration.policy": "Upgrade",
    })
    assert not config.consumer_protocol_enabled
    assert (config.consumer_heartbeat_interval_ms, config.consumer_session_timeout_ms,
            config.consumer_min_session_timeout_ms, config.consumer_max_size) == \
        (3000, 50000, 1000, 10)
    assert config.consumer_assignors == ("range", "uniform")
    assert config.online_upgrade_enabled and not config.online_downgrade_enabled
