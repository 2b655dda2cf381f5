"""The ``samsa`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from samsa.cli import (
    acls,
    cluster,
    configs,
    console,
    consume,
    features,
    groups,
    produce,
    serve,
    share_groups,
    topics,
    transactions,
    users,
)
from samsa.cli.errors import CliError

HINTS = {
    3: "no such topic or partition",
    29: "an ACL is missing: the principal may not use this topic",
    30: "an ACL is missing: the principal may not use this group",
    31: "an ACL is missing: the principal may not do this on the cluster",
    36: "the topic exists already",
    37: "bad partition count",
    40: "bad config name or value",
    68: "the group still has active members",
    54: "the broker has no authorizer (authorizer.class.name)",
    69: "no such group",
}
"""A plain-words hint for frequent Kafka error codes."""


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line (no usage dump), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="samsa", description="samsa: a Kafka-wire-compatible broker built around groups."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parser(sub)
    topics.add_parser(sub)
    produce.add_parser(sub)
    consume.add_parser(sub)
    groups.add_parser(sub)
    share_groups.add_parser(sub)
    configs.add_parser(sub)
    features.add_parser(sub)
    transactions.add_parser(sub)
    cluster.add_parser(sub)
    acls.add_parser(sub)
    users.add_parser(sub)
    console.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; failures print one line on stderr and return non-zero."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
    except CliError as exc:
        print(f"samsa: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("samsa: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `samsa consume ... | head`
        sys.stderr.close()
        return 0
    except Exception as exc:
        # Kafka errors from the client; not imported up front (`samsa serve` needs no client)
        errors = sys.modules.get("samsa.client.errors")
        if errors is None or not isinstance(exc, errors.KafkaError):
            raise
        hint = HINTS.get(exc.code)
        print(f"samsa: {exc}" + (f" ({hint})" if hint else ""), file=sys.stderr)
        return 1
    return result


if __name__ == "__main__":
    sys.exit(main())
