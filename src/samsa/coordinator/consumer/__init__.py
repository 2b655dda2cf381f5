"""KIP-848 ``consumer`` groups in the sans-I/O coordinator (the pure core).

Contract with the broker edge (K-edge):

* Requests: :class:`~samsa.coordinator.events.ConsumerGroupHeartbeat` (API 68, v0-v1) and
  :class:`~samsa.coordinator.events.ConsumerGroupDescribe` (API 69, v0-v1), handed to
  ``Coordinator.handle(event, now_ms, reply_to)`` like every other event. Answers:
  :class:`~samsa.coordinator.responses.ConsumerGroupHeartbeatResponse` (member id, member
  epoch, heartbeat interval, ``assignment`` or ``None`` when unchanged) and
  :class:`~samsa.coordinator.responses.ConsumerGroupDescribeResponse`. Heartbeats are never
  parked: each is answered in its own result. ``error_message`` is set where Kafka sets one.
* Topics: the edge calls ``Coordinator.update_metadata(TopicsSnapshot.of(TopicInfo...),
  now_ms)`` (ids, names, partition counts, replica racks) when topics change and before
  loading shards. Nothing is written then; each group notices on its next heartbeat (epoch
  bumped if a subscribed topic changed, regexes resolved again once new topics appeared),
  as Kafka does.
* Background jobs (:mod:`samsa.coordinator.jobs`): target assignments (:mod:`.batching`,
  KIP-1263: at most one per ``consumer.assignment.interval.ms``, off the event loop with
  ``consumer.assignor.offload.enable``) and regex resolutions (:mod:`.regex_refresh`,
  Kafka's conditions) leave with a call's result and come back through
  ``Coordinator.complete``; heartbeats meanwhile are answered from the current target.
* Records: consumer-group records (:mod:`.records`, Kafka 4.x formats, key versions 3 and
  5-8 and 16) travel in ``Result.records`` like the classic ones; ``records.serialize`` /
  ``records.deserialize`` handle both. Loading replays them; the live consumer groups are
  exactly what replay builds (``HardState.consumer``), timers are re-armed on load.
* Timers: ``TimerKind.CONSUMER_SESSION`` (per member), ``CONSUMER_REBALANCE`` (a member that
  must revoke partitions, per member), ``CONSUMER_JOIN`` and ``CONSUMER_ASSIGNMENT`` (a
  group's next target once its assignment interval has passed) are fired by ``coord.fire``
  like the classic ones.
* Classic APIs on consumer groups (as Kafka 4.0's GroupMetadataManager): ListGroups lists
  them with type ``consumer``, protocol type ``consumer`` and states Empty, Assigning,
  Reconciling, Stable; DescribeGroups answers a consumer group as Dead (NONE; from v6
  GROUP_ID_NOT_FOUND, "Group g is not a classic group.") as Kafka's ``describeGroups``
  does for a non-classic group; OffsetCommit checks member epochs against each
  partition's assignment epoch (KIP-1251) and OffsetFetch the exact epoch, both in
  :mod:`.commits` (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); OffsetDelete and DeleteGroups
  work on consumer groups (NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC);
  JoinGroup/SyncGroup/Heartbeat/LeaveGroup on a non-empty consumer group: see
  :mod:`.interop`.
* Conversion: a consumer-protocol member joining an EMPTY classic group converts it (the
  classic metadata gets a tombstone, offsets stay). A live classic group is upgraded online
  when ``group.consumer.migration.policy`` allows it, else GROUP_ID_NOT_FOUND; its members
  go on with the classic protocol (:mod:`.classic_members`), and the group becomes classic
  again when its last consumer-protocol member leaves (:mod:`.migrate`). Classic members
  have ``TimerKind.CONSUMER_JOIN`` and ``CONSUMER_SYNC`` timeouts.
"""
