"""The package's structure: layers, no import cycle (module level or inside functions), one
meta owner, modules under 600 lines, SQL in Core."""

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
    """Only contextgraph.store.meta reads or writes ``meta`` (through its table or in SQL text).

    contextgraph.sync.unchanged holds the SQLite text of one of meta's statements (it runs
    without SQLAlchemy), checked equal to it by tests/test_unchanged_sync.py."""
    touches = re.compile(r"\bT_META\b|(\\n|\b)(FROM|INTO|UPDATE)\s+meta\b", re.IGNORECASE)
    owners = sorted(
        name
        for name, path in MODULES.items()
        if name != "contextgraph.store.models"  # defines the table
        and touches.search(path.read_text(encoding="utf-8"))
    )
    assert owners == ["contextgraph.store.meta", "contextgraph.sync.unchanged"]


def test_no_module_is_over_600_lines() -> None:
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()
    }
    assert {name: n for name, n in sizes.items() if n > 600} == {}


def test_sql_is_written_with_core_except_fts5_and_pragmas() -> None:
    """Raw SQL text only for PRAGMAs, the FTS5 tables, transaction control and migrations' DDL."""
    transaction_control = re.compile(r"BEGIN|SET (LOCAL|TRANSACTION)|SELECT pg_advisory")
    raw = re.compile(r"""\b(text|exec_driver_sql)\(\s*(f?["'])""")
    offenders = []
    for name, path in MODULES.items():
        if name.startswith("contextgraph.store.migrations."):
            continue
        source = path.read_text(encoding="utf-8")
        for m in raw.finditer(source):
            line = source[m.start() : m.start() + 120].splitlines()[0]
            if "PRAGMA" in line or "_fts" in line:
                continue
            engines = ("contextgraph.store.db", "contextgraph.store.pgengine")
            if name in engines and transaction_control.search(line):
                continue
            offenders.append(f"{name}: {line}")
    assert offenders == []


# The layers, bottom to top: each unit names the modules (and packages) it holds. A module may
# import its own unit and the units of lower layers; units in one layer (the store and the two
# parsers) do not import one another. Migrations are scripts Alembic runs, imported by no module:
# their data steps may use the code below the doors.
LAYERS: list[dict[str, set[str]]] = [
    {
        "base": {
            "contextgraph.errors",
            "contextgraph.settings",
            "contextgraph.limits",
            "contextgraph.terminal",
        }
    },
    {
        "store": {"contextgraph.store"},
        "notes": {"contextgraph.notes"},
        "code": {"contextgraph.code"},
    },
    {"graph": {"contextgraph.graph"}},
    {"sync": {"contextgraph.sync"}},
    {"migrations": {"contextgraph.store.migrations"}},
    {
        "doors": {
            "contextgraph",
            "contextgraph.__main__",
            "contextgraph.launch",
            "contextgraph.api",
            "contextgraph.cli",
            "contextgraph.watch",
            "contextgraph.mcp_server",
            "contextgraph.mcp_tools",
            "contextgraph.mcp_write_tools",
            "contextgraph.mcp_schemas",
        }
    },
]


def _unit(module: str) -> str:
    """The unit a module belongs to: the one naming its longest prefix."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        for layer in LAYERS:
            for unit, members in layer.items():
                if candidate in members:
                    return unit
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def _rank(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def test_every_module_belongs_to_a_layer() -> None:
    for name in MODULES:
        _unit(name)


def test_modules_import_only_their_own_package_and_lower_layers() -> None:
    offenders = []
    for name, path in MODULES.items():
        unit = _unit(name)
        for imported in _imports(name, path):
            other = _unit(imported)
            if other != unit and _rank(other) >= _rank(unit):
                offenders.append(f"{name} imports {imported}")
    assert offenders == []


def test_the_layer_rule_catches_an_upward_import() -> None:
    assert _rank(_unit("contextgraph.store.db")) < _rank(_unit("contextgraph.graph.search"))
    assert _rank(_unit("contextgraph.notes.links")) == _rank(_unit("contextgraph.code.model"))
    assert _unit("contextgraph.store.migrations.env") == "migrations"
    assert _unit("contextgraph.cli.query") == "doors"
