"""Server-side assignors of the ``consumer`` group protocol (KIP-848): ``uniform`` and
``range``, and the ``group.consumer.assignors`` registry."""

from samsa.assignors.server.interface import (
    Assignment,
    GroupSpec,
    MemberSpec,
    ServerAssignor,
    TopicInfo,
    TopicsView,
)
from samsa.assignors.server.range_assignor import RangeAssignor
from samsa.assignors.server.registry import (
    DEFAULT_SERVER_ASSIGNORS,
    resolve_server_assignor,
    resolve_server_assignors,
)
from samsa.assignors.server.uniform import UniformAssignor

__all__ = [
    "DEFAULT_SERVER_ASSIGNORS",
    "Assignment",
    "GroupSpec",
    "MemberSpec",
    "RangeAssignor",
    "ServerAssignor",
    "TopicInfo",
    "TopicsView",
    "UniformAssignor",
    "resolve_server_assignor",
    "resolve_server_assignors",
]
