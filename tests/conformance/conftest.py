"""Fixtures of the conformance suite: ``java`` is in tests/conftest.py (the cluster tests
use it too)."""
