"""The import graph of the storage layers (every import counts: top-level, under
``TYPE_CHECKING`` and inside functions): the broker owns its storage port and names no
engine; engines and the cluster implement it, never the reverse; and the broker, the
engines, the cluster, the log and the protocol form no loop."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
LAYERS = ("samsa.broker", "samsa.storage", "samsa.cluster", "samsa.log", "samsa.protocol")


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "samsa").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@cache
def _edges() -> dict[str, set[str]]:
    modules = _modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith("samsa") and target != name:
                    found.add(target)
        edges[name] = found
    return edges


def _within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_broker_names_no_engine_and_no_cluster() -> None:
    bad = sorted((m, t) for m, ts in _edges().items() if _within(m, "samsa.broker")
                 for t in ts if _within(t, "samsa.storage", "samsa.cluster", "samsa.cli",
                                         "samsa.console"))
    assert bad == []


def test_the_log_and_the_protocol_know_nothing_above_them() -> None:
    bad = sorted((m, t) for m, ts in _edges().items() if _within(m, "samsa.log",
                                                                  "samsa.protocol")
                 for t in ts if _within(t, "samsa.broker", "samsa.storage", "samsa.cluster",
                                        "samsa.coordinator"))
    assert bad == []


def test_no_import_loop_among_the_storage_layers() -> None:
    edges = {m: {t for t in ts if _within(t, *LAYERS)} for m, ts in _edges().items()
             if _within(m, *LAYERS)}
    loops: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(edges.get(m, ())):
            if state.get(t) == 1:
                loops.append([*path[path.index(t):], t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert loops == []
