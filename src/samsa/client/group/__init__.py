"""A consumer's group membership: one pure machine per protocol, one driver around it.

Every protocol is a pure state machine (no sockets, no clock: events carry ``now`` in
milliseconds, actions come back) and a thin driver that performs its actions over the
network from the user's thread and a heartbeat thread. What protocols share is written
once; a protocol's own files come in pairs, classic beside consumer (KIP-848):

==========================  ========================  ===================================
part                        classic (JoinGroup/Sync)  consumer (ConsumerGroupHeartbeat)
==========================  ========================  ===================================
pure machine                ``classic_machine``       ``consumer_machine``, on
                                                      ``epoch_machine``
driver (what ``Consumer``   ``classic_driver``        ``consumer_driver``, on
drives)                                               ``epoch_driver``
rebalance step of ``poll``  ``classic_rebalance``     ``epoch_rebalance``
                            (join loop, assignors)    (reconciliation)
==========================  ========================  ===================================

``epoch_machine``, ``epoch_driver`` and ``epoch_rebalance`` hold what every protocol with
member epochs and server-side assignment shares (Kafka's ``AbstractMembershipManager``):
the lifecycle (JOINING, RECONCILING, ACKNOWLEDGING, STABLE, FENCED, LEAVING, STALE),
reconciliation, fencing and leaving. The consumer protocol adds its request fields, its
commits and static members.

Shared by every protocol:

* ``machine``: :class:`~samsa.client.group.machine.MemberMachine`, the base of the
  machines (identity, fatal error, coordinator, heartbeat bookkeeping, history);
* ``tracker``: :class:`~samsa.client.group.tracker.CoordinatorTracker`, which node
  coordinates the group and when to look again (pure);
* ``actions``: the actions every machine may return (FindCoordinator, RevokePartitions,
  LosePartitions, RaiseError);
* ``context``: :class:`~samsa.client.group.context.MemberContext`, the machine behind its
  lock with the clock, network, metadata and subscription; ``MemberStatus``;
* ``driver``: :class:`~samsa.client.group.driver.GroupDriver`, the interface ``Consumer``
  drives (poll, commits, queries, close) and the skeleton of each protocol's driver;
* ``heartbeat``: the one heartbeat thread; ``discovery``: FindCoordinator; ``commits``:
  OffsetCommit, OffsetFetch, auto-commit; ``listeners``: partition changes and the user's
  rebalance listener.

A share-group member (KIP-932, ``samsa.ShareConsumer``) is ``share_machine`` (an
``EpochMembership``: its ShareGroupHeartbeat request) and ``share_driver`` (an
``EpochDriver``: its API and request body), reusing everything else; its fetching and
acknowledging are :mod:`samsa.client.share`.
"""
