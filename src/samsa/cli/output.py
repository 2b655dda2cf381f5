"""Printing: rich tables for people, JSON for scripts, progress bars on long work."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

Row = Mapping[str, Any]
Column = tuple[str, str]
"""(row key, header)."""


def cell(value: Any) -> str:
    """How a value prints in a table: ``-`` for missing, as-is otherwise."""
    return "-" if value is None or value == "" else str(value)


def console(stderr: bool = False) -> Console:
    """A console that never wraps or truncates when it is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 100_000
    return Console(file=stream, width=width, highlight=False, soft_wrap=True,
                   emoji=False, markup=False)


class Output:
    """Prints results as a table (``--output table``) or JSON (``--output json``)."""

    def __init__(self, fmt: str = "table") -> None:
        self.json = fmt == "json"

    def table(self, rows: Sequence[Row], columns: Sequence[Column], *,
              title: str | None = None, empty: str | None = None) -> None:
        """Rows as a table; in JSON mode the rows themselves (a list of objects)."""
        if self.json:
            self.data(list(rows))
            return
        if not rows and empty:
            self.message(empty)
            return
        table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False,
                      show_edge=False)
        for _, header in columns:
            table.add_column(header, no_wrap=True)
        for row in rows:
            table.add_row(*(Text(cell(row.get(key))) for key, _ in columns))
        console().print(table)

    def data(self, obj: Any) -> None:
        print(json.dumps(obj, indent=2, sort_keys=False, default=str))

    def message(self, text: str) -> None:
        """A line for people (stdout in table mode, stderr in JSON mode)."""
        print(text, file=sys.stderr if self.json else sys.stdout)


@contextmanager
def progress(description: str, total: int | None, enabled: bool = True
             ) -> Iterator[Any]:
    """A progress bar on stderr (only on a terminal); yields ``advance(n=1)``."""
    if not enabled or not sys.stderr.isatty():
        yield lambda n=1: None
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=console(stderr=True), transient=True,
                   redirect_stdout=False, redirect_stderr=False)
    with bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)
