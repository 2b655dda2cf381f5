"""A consumer's group membership: one pure machine per protocol, one driver around it.

Every protocol is a pure state machine (no sockets, no clock: events carry ``now`` in
milliseconds, actions come back) and a thin driver that performs its actions over the
network from the user's thread and a heartbeat thread. What all protocols share is written
once; a protocol's files come in pairs, classic beside consumer (KIP-848):

============================  ==========================  ==========================
part                          classic (JoinGroup/Sync)    consumer (KIP-848)
============================  ==========================  ==========================
pure machine                  ``classic_machine``         ``consumer_machine``
driver (``Consumer`` uses)    ``classic_driver``          ``consumer_driver``
rebalance step of ``poll``    ``classic_rebalance``       ``consumer_rebalance``
                              (join loop, assignors)      (reconciliation)
============================  ==========================  ==========================

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

A new protocol is one more machine (a ``MemberMachine`` subclass: its states, requests and
answers) and one more driver (a ``GroupDriver`` subclass: how its heartbeat-thread requests
are sent, its rebalance step, how it leaves); it reuses everything in the second list.
"""
