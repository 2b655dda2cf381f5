"""Runnable client examples (the consumer usage patterns of Kafka's consumer design)."""
