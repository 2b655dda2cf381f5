"""Topic regular expressions of consumer groups, with RE2's full-match semantics.

No RE2 binding is installed, so patterns run on Python's ``re`` with ``fullmatch`` (Kafka
uses RE2/J ``matcher(topic).matches()``). Constructs RE2 refuses (lookaround and
backreferences) are refused here too, so a pattern valid here is valid for Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_NOT_RE2 = re.compile(r"\(\?<?[=!]|\(\?P=|\\[1-9]")


class InvalidRegex(ValueError):
    pass


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re.Pattern[str]:
    if _NOT_RE2.search(pattern):
        raise InvalidRegex("lookaround and backreferences are not supported")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidRegex(str(exc)) from exc


def validate(pattern: str) -> str | None:
    """Kafka's error message for an invalid pattern, or None."""
    try:
        compile_regex(pattern)
    except InvalidRegex as exc:
        return f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {exc}."
    return None


def resolve(pattern: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topic names the pattern fully matches (none if it does not compile)."""
    try:
        compiled = compile_regex(pattern)
    except InvalidRegex:
        return frozenset()
    return frozenset(t for t in topic_names if compiled.fullmatch(t))
