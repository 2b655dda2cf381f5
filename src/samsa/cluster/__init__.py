"""samsa as a cluster: stateless nodes over PostgreSQL.

Nodes register in the database with a renewed lease; every partition (and so every
coordinator shard, a partition of ``__consumer_offsets``) is owned by one live node through
a lease with an epoch, and every write is fenced by that epoch in the same statement
(:mod:`samsa.storage.pg`).

* :mod:`.reconcile`: the control step, pure: ``reconcile(node, live nodes, leases, now)``
  returns the actions (drop, claim, hand off, forget) a node takes about the leases it read;
* :mod:`.placement`: each partition's preferred owner (rendezvous hashing over live nodes);
* :mod:`.node`: the loop that reads the leases (the SQL is
  :class:`samsa.storage.pg.leases.LeaseStore`'s), carries the actions out and moves
  coordinator shards through the broker's callbacks (``on_shard_gained``,
  ``on_shard_lost``); it is the engine's :class:`~samsa.broker.storage.Leadership`;
* :mod:`.engine`: the storage engine a cluster node hands the broker (PostgreSQL's stores
  and the node);
* :mod:`.metrics`: the node's Prometheus metrics.
"""
