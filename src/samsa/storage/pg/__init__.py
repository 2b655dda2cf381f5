"""The PostgreSQL storage engine: topics, partition logs, producer ids and leases in one
database shared by every node of a samsa cluster."""
