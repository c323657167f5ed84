"""A CLI query loads only what it uses: no Alembic at head, no parsers, no graph libraries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextgraph import ContextGraph

HEAVY = ("alembic", "igraph", "leidenalg", "tree_sitter", "markdown_it", "mcp", "yaml")

_PROBE = """
import json, sys
from contextgraph.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="contextgraph", standalone_mode=True)
except SystemExit as exc:
    code = exc.code
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


def _modules_loaded_by(db: Path, *args: str) -> set[str]:
    env = dict(os.environ, CONTEXTGRAPH_DB=str(db))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], env=env, capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.fixture
def synced(db_path: Path, write: object, vault: Path) -> Path:
    write("a.md", "[[Alpha]] and [[Beta]] and [[Gamma]].")  # type: ignore[operator]
    write("b.md", "[[Alpha]] with [[Beta]].")  # type: ignore[operator]
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
    return db_path


@pytest.mark.parametrize(
    "args",
    [
        ("context", "Alpha", "--json"),
        ("context", "[[Alpha|a]]", "--json"),
        ("search", "alpha", "--json"),
        ("stats", "--json"),
        ("communities", "--json"),
        ("sync", "--json"),
    ],
)
def test_a_query_on_a_current_database_loads_no_heavy_module(
    synced: Path, args: tuple[str, ...]
) -> None:
    loaded = _modules_loaded_by(synced, *args)
    heavy = set(HEAVY)
    if args[1].startswith("[["):
        heavy -= {"markdown_it", "yaml"}  # a wrapped name is parsed as a link, as written
    if args[0] == "communities":
        heavy -= {"igraph"}  # the igraph-free listing would be another change; see the report
    assert not loaded & heavy, sorted(loaded & heavy)


def test_an_old_database_is_still_upgraded_on_open(db_path: Path) -> None:
    from contextgraph.store import db

    engine = db.make_engine(db_path)
    db.upgrade(engine, "0001_core")
    engine.dispose()
    loaded = _modules_loaded_by(db_path, "stats", "--json")
    assert "alembic" in loaded
    with ContextGraph.open(db_path) as graph:
        assert db.current_revision(graph.engine) == db.SCHEMA_HEAD
