"""``samsa features describe`` (and ``samsa.Admin.describe_features``) against a broker."""

from __future__ import annotations

from samsa.client import Admin
from tests.cli.conftest import CLI, parse_table


def test_features_describe(cli: CLI, admin: Admin) -> None:
    meta = admin.describe_features()
    assert meta.finalized == {"group.version": 1, "share.version": 1, "transaction.version": 2}
    assert meta.supported == {"group.version": (0, 1), "share.version": (0, 1),
                              "transaction.version": (0, 2)}
    assert meta.finalized_epoch is not None and meta.finalized_epoch > 0
    epoch = str(meta.finalized_epoch)

    r = cli("features", "describe")
    assert r.rc == 0, r.err
    assert parse_table(r.out) == [
        {"FEATURE": "group.version", "SUPPORTED MIN": "0", "SUPPORTED MAX": "1",
         "FINALIZED LEVEL": "1", "EPOCH": epoch},
        {"FEATURE": "share.version", "SUPPORTED MIN": "0", "SUPPORTED MAX": "1",
         "FINALIZED LEVEL": "1", "EPOCH": epoch},
        {"FEATURE": "transaction.version", "SUPPORTED MIN": "0", "SUPPORTED MAX": "2",
         "FINALIZED LEVEL": "2", "EPOCH": epoch}]
    rows = cli("features", "describe", "-o", "json").json()
    assert rows[0] == {"feature": "group.version", "supported_min": 0, "supported_max": 1,
                       "finalized_level": 1, "epoch": meta.finalized_epoch}
    assert [r["feature"] for r in rows] == ["group.version", "share.version",
                                            "transaction.version"]


def test_features_describe_without_a_broker(cli: CLI) -> None:
    r = cli("features", "describe", "--timeout", "1", bootstrap="127.0.0.1:1")
    assert r.rc != 0 and "cannot reach a broker at 127.0.0.1:1" in r.err
