"""The package's structure: no import cycle (module level or inside functions), one meta owner."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import contextgraph

PACKAGE = Path(contextgraph.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path) -> set[str]:
    """Every contextgraph module ``name`` imports anywhere, except under ``if TYPE_CHECKING``."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    # Importing a submodule initialises its parent packages first; that is not an edge we draw.
    return {m for m in found if m in MODULES and m != name and not name.startswith(m + ".")}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_meta_table_has_one_owner() -> None:
    """Only contextgraph.meta reads or writes ``meta`` (through its model or in SQL text)."""
    touches = re.compile(r"table_of\(Meta\)|\b(FROM|INTO|UPDATE)\s+meta\b", re.IGNORECASE)
    owners = sorted(
        name for name, path in MODULES.items() if touches.search(path.read_text(encoding="utf-8"))
    )
    assert owners == ["contextgraph.meta"]


# Known exceptions, each with its reason; an entry that no longer applies fails the test too.
OVER_600_LINES = {
    "contextgraph.cli": "issue 10/12 commands merged at 773 lines; its split belongs to its owner",
}


def test_no_module_is_over_600_lines() -> None:
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()
    }
    over = {name for name, n in sizes.items() if n > 600}
    assert over - OVER_600_LINES.keys() == set()
    assert OVER_600_LINES.keys() <= over, "remove the exceptions that no longer apply"


def test_sql_is_written_with_core_except_fts5_and_pragmas() -> None:
    """Raw SQL text only for PRAGMAs and the FTS5 tables (the lead's modules aside)."""
    owned_elsewhere = {"cli", "mcp_server", "search", "ftsquery", "expand", "retrieve", "db"}
    raw = re.compile(r"""\b(text|exec_driver_sql)\(\s*(f?["'])""")
    offenders = []
    for name, path in MODULES.items():
        if name.rpartition(".")[2] in owned_elsewhere:
            continue
        for m in raw.finditer(path.read_text(encoding="utf-8")):
            line = path.read_text(encoding="utf-8")[m.start() : m.start() + 120]
            if "PRAGMA" not in line and "_fts" not in line:
                offenders.append(f"{name}: {line.splitlines()[0]}")
    assert offenders == []
