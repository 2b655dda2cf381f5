"""Partition assignors: range, roundrobin, sticky, cooperative-sticky, optimal, custom.

See ``docs/assignors.md``. Strategies register by protocol name; ``resolve_assignor`` turns a
``partition_assignment_strategy`` entry (name, class or instance) into an instance.
"""

from samsa import TopicPartition
from samsa.assignors.codec import (
    ConsumerProtocolError,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
)
from samsa.assignors.cooperative_sticky import CooperativeStickyAssignor
from samsa.assignors.interface import (
    Assignment,
    Assignor,
    ClusterView,
    PartitionAssignor,
    RebalanceProtocol,
    Subscription,
    assignor_names,
    register_assignor,
    resolve_assignor,
)
from samsa.assignors.optimal import OptimalAssignor
from samsa.assignors.plan import plan
from samsa.assignors.range_assignor import RangeAssignor
from samsa.assignors.roundrobin import RoundRobinAssignor
from samsa.assignors.sticky import StickyAssignor

__all__ = [
    "Assignment",
    "Assignor",
    "ClusterView",
    "ConsumerProtocolError",
    "CooperativeStickyAssignor",
    "OptimalAssignor",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "assignor_names",
    "decode_assignment",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_sticky_user_data",
    "encode_subscription",
    "plan",
    "register_assignor",
    "resolve_assignor",
]
