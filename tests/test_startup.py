"""A CLI query loads only what it uses: no Alembic at head, no parsers, no graph libraries, no ORM.

Every command module of the CLI is imported to build the group, so those modules import click
and the light top-level modules only; the library loads inside the command that runs. A query
never loads sync (scan, extraction, the process pool), and ``--help`` not even SQLAlchemy.
"""

from __future__ import annotations

import gc
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
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _all_modules_loaded_by(db: Path, *args: str) -> set[str]:
    env = dict(os.environ, CONTEXTGRAPH_DB=str(db))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], env=env, capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def _modules_loaded_by(db: Path, *args: str) -> set[str]:
    """The top-level packages loaded by ``contextgraph ARGS``."""
    return {m.split(".")[0] for m in _all_modules_loaded_by(db, *args)}


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
        ("read", "vault/a.md", "--json"),
        ("retrieve", "alpha", "--json"),
        ("expand", "Alpha", "--json"),
    ],
)
def test_a_query_on_a_current_database_loads_no_heavy_module(
    synced: Path, args: tuple[str, ...]
) -> None:
    modules = _all_modules_loaded_by(synced, *args)
    loaded = {m.split(".")[0] for m in modules}
    heavy = set(HEAVY)
    if args[1].startswith("[["):
        heavy -= {"markdown_it", "yaml"}  # a wrapped name is parsed as a link, as written
    assert not loaded & heavy, sorted(loaded & heavy)
    assert not _orm(modules), sorted(_orm(modules))


def _orm(modules: set[str]) -> set[str]:
    """SQLAlchemy's ORM: the tables are plain Core, so nothing should ever load it."""
    return {m for m in modules if m == "sqlalchemy.orm" or m.startswith("sqlalchemy.orm.")}


def test_a_sync_loads_no_orm_cold_or_warm(tmp_path: Path, write: object, vault: Path) -> None:
    write("a.md", "[[Alpha]] and [[Beta]].")  # type: ignore[operator]
    db = tmp_path / "fresh.db"  # blank: the first sync creates it (the snapshot), loads it cold
    cold = _all_modules_loaded_by(db, "sync", str(vault), "--json")
    assert "contextgraph.store.blank" in cold  # the probe really created the schema
    assert "alembic" not in {m.split(".")[0] for m in cold}
    assert not _orm(cold), sorted(_orm(cold))
    write("a.md", "[[Alpha]] and [[Gamma]].")  # type: ignore[operator]
    warm = _all_modules_loaded_by(db, "sync", "--json")
    assert "contextgraph.sync.run" in warm
    assert not _orm(warm), sorted(_orm(warm))


# What a sync loads only when it has a file to read: extraction, its parsers, the code model
# and the process pool. A sync that finds nothing changed compares stats and counts, no more.
EXTRACTION = (
    "contextgraph.sync.ingest",
    "contextgraph.sync.workers",
    "contextgraph.code.model",
    "contextgraph.notes.wikilinks",
    "multiprocessing",
)


def test_a_no_change_sync_loads_no_extraction_code(synced: Path, write: object) -> None:
    quiet = _all_modules_loaded_by(synced, "sync", "--json")
    assert "contextgraph.sync.scan" in quiet  # the probe really scanned
    assert not quiet & set(EXTRACTION), sorted(quiet & set(EXTRACTION))
    write("a.md", "[[Alpha]] and [[Delta]].")  # type: ignore[operator]
    changed = _all_modules_loaded_by(synced, "sync", "--json")
    assert {"contextgraph.sync.ingest", "contextgraph.notes.wikilinks"} <= changed


def test_the_code_package_loads_its_model_only_when_asked() -> None:
    code = (
        "import sys, contextgraph.code as code; a = 'contextgraph.code.model' in sys.modules; "
        "code.FileFacts; print(a, 'contextgraph.code.model' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_an_old_database_is_still_upgraded_on_open(db_path: Path) -> None:
    from contextgraph.store import db

    engine = db.make_engine(db_path)
    db.upgrade(engine, "0001_core")
    engine.dispose()
    loaded = _modules_loaded_by(db_path, "stats", "--json")
    assert "alembic" in loaded
    with ContextGraph.open(db_path) as graph:
        assert db.current_revision(graph.engine) == db.SCHEMA_HEAD


@pytest.mark.parametrize(
    "args",
    [
        ("context", "Alpha", "--json"),
        ("search", "alpha", "--json"),
        ("stats", "--json"),
        ("read", "vault/a.md", "--json"),
        ("expand", "Alpha", "--json"),
        ("retrieve", "alpha", "--json"),
        ("communities", "--json"),
        ("doctor", "--json"),
    ],
)
def test_a_query_never_loads_sync(synced: Path, args: tuple[str, ...]) -> None:
    loaded = _all_modules_loaded_by(synced, *args)
    assert "contextgraph.api" in loaded  # the probe ran the command
    assert not {m for m in loaded if m.startswith("contextgraph.sync")}, args


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("search", "--help")])
def test_help_and_version_load_no_database_code(db_path: Path, args: tuple[str, ...]) -> None:
    loaded = _all_modules_loaded_by(db_path, *args)
    assert "contextgraph.cli" in loaded
    assert not {m for m in loaded if m.split(".")[0] == "sqlalchemy"}
    assert not {m for m in loaded if m.startswith(("contextgraph.api", "contextgraph.store"))}
    assert not db_path.exists()  # nothing opened a database


def test_the_cli_package_imports_no_library_module() -> None:
    code = "import sys, contextgraph.cli; print(sorted(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.strip().strip("[]").replace("'", "").split(", "))
    ours = {m for m in loaded if m.startswith("contextgraph")}
    light = {"contextgraph", "contextgraph.errors", "contextgraph.limits", "contextgraph.settings"}
    light.add("contextgraph.launch")  # the entry point: the standard library only
    light.add("contextgraph.terminal")  # what the commands print: the standard library only
    assert ours - light == {m for m in ours if m.startswith("contextgraph.cli")}
    assert "sqlalchemy" not in loaded


def test_a_driver_error_still_prints_the_drivers_message_only() -> None:
    from click.testing import CliRunner
    from sqlalchemy.exc import OperationalError

    from contextgraph.cli.base import Group

    group = Group(name="probe")

    @group.command()
    def boom() -> None:
        raise OperationalError("SELECT secret FROM files", {}, Exception("disk I/O error"))

    result = CliRunner().invoke(group, ["boom"])
    assert result.exit_code == 1
    assert "database error: disk I/O error" in result.output
    assert "secret" not in result.output


_COMPILES = """
import json, sys
from sqlalchemy.sql import compiler

compiled = []
_init = compiler.SQLCompiler.__init__


def _counting(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    compiled.append(" ".join(str(self.string).split())[:80])


compiler.SQLCompiler.__init__ = _counting
"""

_IMPORT_PROBE = (
    _COMPILES
    + """
import contextgraph.graph.context, contextgraph.graph.expand, contextgraph.graph.retrieve
import contextgraph.graph.search, contextgraph.graph.stats, contextgraph.graph.communities
print(json.dumps(compiled))
"""
)

_SECOND_ENGINE_PROBE = (
    _COMPILES
    + """
from contextgraph import ContextGraph


def queries(graph):
    graph.stats()
    graph.expand(["Alpha"])
    graph.retrieve("alpha beta")
    graph.search("alpha")


with ContextGraph.open(sys.argv[1]) as graph:
    queries(graph)
with ContextGraph.open(sys.argv[1]) as graph:  # a second engine, its statement cache empty
    compiled.clear()
    queries(graph)
print(json.dumps(compiled))
"""
)


def _compiled_by(probe: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_query_modules_compile_no_statement_at_import() -> None:
    assert _compiled_by(_IMPORT_PROBE) == []


def test_stats_expand_retrieve_and_search_compile_their_statements_once_per_process(
    synced: Path,
) -> None:
    """Their statements are compiled once per process (ForIds, compiled_tuples), not once per
    engine: a second database opened in the same process compiles none of them again."""
    assert _compiled_by(_SECOND_ENGINE_PROBE, str(synced)) == []


_GC_PROBE = """
import gc, json, sys
from contextgraph.cli import base

seen = {"before": gc.isenabled()}
load = base._library_loaded


def watched():  # the first call is the one that counts
    seen.setdefault("importing", gc.isenabled())
    load()
    seen.setdefault("loaded", gc.isenabled())
    seen.setdefault("frozen", gc.get_freeze_count())


base._library_loaded = watched
sys.argv = ["contextgraph", *sys.argv[1:]]
try:
    base.main()
except SystemExit as exc:
    seen["code"] = exc.code
seen["end_enabled"] = gc.isenabled()
print(json.dumps(seen), file=sys.stderr)
"""


def _collector_during(db: Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _GC_PROBE, "--db", str(db), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stderr.strip().splitlines()[-1]))


def test_the_entry_point_pauses_the_collector_only_while_the_library_loads(synced: Path) -> None:
    seen = _collector_during(synced, "context", "Alpha", "--json")
    assert seen["before"] is True
    assert seen["importing"] is False  # paused from main() until the library is in
    assert seen["loaded"] is True  # a long-running command (mcp, watch) collects as usual
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 10_000  # the imports, set aside
    assert seen["code"] == 0
    assert seen["end_enabled"] is True


def test_a_command_that_loads_no_library_gets_the_collector_back_at_its_end(
    db_path: Path,
) -> None:
    seen = _collector_during(db_path, "--version")
    assert seen["importing"] is False  # reached only as the command ends: --version opens nothing
    assert seen["code"] == 0
    assert seen["end_enabled"] is True


def test_cli_invoked_by_other_code_keeps_the_collector_as_it_was(synced: Path) -> None:
    from click.testing import CliRunner

    from contextgraph.cli import cli

    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(cli, ["--db", str(synced), "stats"])
    assert result.exit_code == 0, result.output
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
