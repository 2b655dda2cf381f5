"""samsa as a cluster: stateless nodes over PostgreSQL.

Nodes register in the database with a renewed lease; every partition (and so every
coordinator shard, a partition of ``__consumer_offsets``) is owned by one live node through
a lease with an epoch, and every write is fenced by that epoch in the same statement
(:mod:`samsa.storage.pg`). See :mod:`samsa.cluster.node` for the lease life cycle.
"""
