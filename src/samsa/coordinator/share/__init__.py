"""Share groups (KIP-932), the coordinator's third group family.

* :mod:`.records`: their ``__consumer_offsets`` records (Kafka's formats, types 10-15);
* :mod:`.group`: share groups as their records say (hard state = live state);
* :mod:`.assignor`: the ``simple`` server assignor;
* :mod:`.heartbeat`: ShareGroupHeartbeat, leaving, session expiry;
* :mod:`.describe`: ShareGroupDescribe;
* :mod:`.admin`: Alter/DeleteShareGroupOffsets' group step (Alter creates a missing group);
* :mod:`.family`: the shard's entry point (which events are a share-group matter).

The share partitions themselves (acquisition, acknowledgement) live on the partition's
leader, in :mod:`samsa.share`.
"""
