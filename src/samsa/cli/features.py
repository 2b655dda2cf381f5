"""``samsa features describe``: a broker's cluster features (KIP-584).

As Kafka's ``kafka-features.sh describe``: one row per feature the broker supports (and any
it reports finalized without supporting), with the supported level range, the finalized
level (0: off) and the features' epoch.
"""

from __future__ import annotations

import argparse
from typing import Any

from samsa.cli.connect import add_client_options, open_admin
from samsa.cli.output import Output


def add_parser(sub: Any) -> None:
    p = sub.add_parser("features", help="describe the cluster's features (kafka-features)",
                       description="A broker's supported and finalized features (KIP-584).")
    cmds = p.add_subparsers(dest="features_command", required=True, metavar="ACTION")
    c = cmds.add_parser("describe", help="supported levels, finalized level and epoch")
    add_client_options(c)
    c.set_defaults(run=run_describe)


def run_describe(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        meta = admin.describe_features()
    rows = [{"feature": name,
             "supported_min": meta.supported[name][0] if name in meta.supported else None,
             "supported_max": meta.supported[name][1] if name in meta.supported else None,
             "finalized_level": meta.finalized.get(name, 0),
             "epoch": meta.finalized_epoch}
            for name in sorted(meta.supported.keys() | meta.finalized.keys())]
    Output(args.output).table(rows, [
        ("feature", "FEATURE"), ("supported_min", "SUPPORTED MIN"),
        ("supported_max", "SUPPORTED MAX"), ("finalized_level", "FINALIZED LEVEL"),
        ("epoch", "EPOCH")], empty="The broker reports no features.")
    return 0
