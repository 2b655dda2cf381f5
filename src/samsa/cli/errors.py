"""The one exception CLI commands raise for a clean, one-line failure."""

from __future__ import annotations


class CliError(Exception):
    """Printed as ``samsa: <message>`` on stderr; the process exits with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
