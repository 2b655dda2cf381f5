"""samsa.storage: the engines behind the broker's storage port (:mod:`samsa.broker.storage`).

The broker names no engine; ``samsa serve`` picks one and hands it in:

* :mod:`samsa.storage.local`: one node, everything in its data directory; partitions are
  the segment logs of :mod:`samsa.log` (whole batches as they arrived on the wire, fsynced
  by group commit), topics ``topics.json``;
* :mod:`samsa.storage.pg`: PostgreSQL shared by every node of a cluster: record batches as
  they arrived on the wire, one row each with base and last offsets; each partition is
  written only by the node holding its lease, and every write is fenced by the lease epoch.
  Which node holds what is decided by the cluster's control loop (:mod:`samsa.cluster`,
  whose engine composes this one with its leases).

An engine implements :class:`~samsa.broker.storage.PartitionStore` (append whole batches at
the log end, read whole batches from an offset, wait for durability, read everything to
load a coordinator shard, look offsets up by timestamp, retention and compaction),
:class:`~samsa.broker.storage.TopicStore`, producer ids, ACL and credential stores and
:class:`~samsa.broker.storage.Leadership`; the append preamble every engine runs lives in
:mod:`samsa.log.append`; an engine that commits in the background resolves its durability
waits with :class:`samsa.storage.waiters.Waiters`. ``tests/storage`` holds the contract
every engine passes (and an in-memory engine that injects faults); an object-storage engine
would implement the same port and pass the same test.
"""
