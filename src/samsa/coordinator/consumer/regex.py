"""Topic regular expressions of consumer groups, with RE2's syntax and full-match semantics.

Kafka compiles ``subscribed_topic_regex`` with RE2/J and keeps a topic when
``matcher(topic).matches()``; samsa compiles it with RE2 itself (the ``google-re2``
binding) and keeps a topic when ``fullmatch`` succeeds. So what RE2 refuses (atomic groups,
possessive quantifiers, backreferences, lookaround) is INVALID_REGULAR_EXPRESSION here as
in Kafka, and RE2-only syntax (``\\pL``, ``\\z``, ``[[:alpha:]]``) works.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr


class InvalidRegex(ValueError):
    pass


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """The compiled RE2 pattern; InvalidRegex with RE2's reason if RE2 refuses it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidRegex(str(reason)) from exc


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
    return frozenset(t for t in topic_names if compiled.fullmatch(t) is not None)
