"""Sources: one folder is one source; listing and removing them (SPEC §3, §12)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import NOW, Writer, snapshot
from sqlalchemy import Engine

from contextgraph import ContextGraph, SourceError
from contextgraph.cli import cli
from contextgraph.errors import InvalidArgument, NotFound
from contextgraph.settings import Settings, parse_datetime
from contextgraph.store import db
from contextgraph.store.sources import get_source, list_sources, register


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("CONTEXTGRAPH_NOW", NOW)
    return CliRunner()


def invoke(runner: CliRunner, db: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def two_vaults(tmp_path: Path, write: Writer) -> tuple[Path, Path]:
    one, two = tmp_path / "one", tmp_path / "two"
    write("a.md", "[[Alpha]] [[Beta]] [[Shared]]", root=one)
    write("docs/b.md", "[[Alpha]] [[Gamma]]", root=one)
    write("tool.py", "import requests\nimport os\n\ndef run():\n    return os.getcwd()\n", root=one)
    write("c.md", "[[Alpha]] [[Shared]] [[Delta]]", root=two)
    write("lib.py", "import os\n\nclass Thing:\n    pass\n", root=two)
    return one, two


def _unkeyed(snap: dict[str, object]) -> str:
    """The snapshot with code entity keys' source-id prefixes ("2:lib.py") made equal."""
    return re.sub(r"'\d+:", "'S:", repr(snap))


def _relation_count(graph: ContextGraph, a: str, b: str) -> int:
    for r in graph.build_context(a).direct_relations:
        if r.name == b:
            return r.co_occurrence_count
    return 0


# -- one folder, one source (bug 2) ---------------------------------------------------------


def test_the_same_folder_under_another_name_is_refused_naming_the_source(
    runner: CliRunner, db_path: Path, two_vaults: tuple[Path, Path]
) -> None:
    one, _ = two_vaults
    assert invoke(runner, db_path, "sync", str(one))[0] == 0
    code, _, err = invoke(runner, db_path, "sync", str(one), "--name", "again")
    assert code == 1
    assert "already the source 'one'" in err and len(err.strip().splitlines()) == 1
    code, out, _ = invoke(runner, db_path, "search", "Gamma", "--json")
    assert json.loads(out)["total"] == 1  # not doubled


@pytest.mark.parametrize("command", ["init", "sync"])
def test_a_folder_inside_a_source_is_refused(
    runner: CliRunner, db_path: Path, two_vaults: tuple[Path, Path], command: str
) -> None:
    one, _ = two_vaults
    assert invoke(runner, db_path, "sync", str(one))[0] == 0
    code, _, err = invoke(runner, db_path, command, str(one / "docs"), "--name", "inner")
    assert code == 1
    assert "inside the source 'one'" in err
    with ContextGraph.open(db_path) as graph:
        assert [s.name for s in graph.sources()] == ["one"]
        assert _relation_count(graph, "alpha", "gamma") == 1  # not doubled


def test_a_folder_around_a_source_is_refused(
    runner: CliRunner, db_path: Path, two_vaults: tuple[Path, Path]
) -> None:
    one, _ = two_vaults
    assert invoke(runner, db_path, "sync", str(one / "docs"), "--name", "docs")[0] == 0
    code, _, err = invoke(runner, db_path, "sync", str(one))
    assert code == 1
    assert "holds the source 'docs'" in err


def test_resyncing_a_source_by_its_folder_is_still_fine(
    runner: CliRunner, db_path: Path, two_vaults: tuple[Path, Path]
) -> None:
    one, _ = two_vaults
    assert invoke(runner, db_path, "sync", str(one), "--name", "mine")[0] == 0
    assert invoke(runner, db_path, "sync", str(one))[0] == 0
    assert invoke(runner, db_path, "sync", str(one), "--name", "mine")[0] == 0
    with ContextGraph.open(db_path) as graph:
        assert [s.name for s in graph.sources()] == ["mine"]


def test_one_sync_names_at_most_100_folders_in_every_door(
    runner: CliRunner, store: ContextGraph, tmp_path: Path
) -> None:
    folders = []
    for n in range(101):
        folders.append(tmp_path / f"f{n:03d}")
        folders[-1].mkdir()
    with pytest.raises(InvalidArgument, match="at most 100 folders in one sync"):
        store.sync(folders)
    assert store.sources() == []  # refused before anything was registered
    code, _, err = invoke(runner, tmp_path / "cli.db", "sync", *map(str, folders))
    assert code == 2 and "at most 100 PATHs (got 101)" in err
    assert not (tmp_path / "cli.db").exists()
    assert len(store.sync(folders[:100]).sources) == 100


def test_library_refuses_overlapping_sources(
    store: ContextGraph, two_vaults: tuple[Path, Path]
) -> None:
    one, _ = two_vaults
    store.sync([one])
    with pytest.raises(SourceError, match="inside the source 'one'"):
        store.add_source(one / "docs")
    with pytest.raises(SourceError, match="already the source 'one'"):
        store.add_source(one, name="other")


# -- listing and removing (bug 2) ------------------------------------------------------------


def test_sources_lists_name_and_folder(
    runner: CliRunner, db_path: Path, two_vaults: tuple[Path, Path]
) -> None:
    one, two = two_vaults
    assert invoke(runner, db_path, "sync", str(one), str(two))[0] == 0
    code, out, _ = invoke(runner, db_path, "sources", "--json")
    assert code == 0
    assert json.loads(out) == {
        "sources": [
            {"name": "one", "root": str(one.resolve()), "exists": True},
            {"name": "two", "root": str(two.resolve()), "exists": True},
        ]
    }
    code, out, _ = invoke(runner, db_path, "sources")
    assert out.splitlines() == [f"one: {one.resolve()}", f"two: {two.resolve()}"]


def test_removing_a_source_equals_never_having_synced_it(
    tmp_path: Path, two_vaults: tuple[Path, Path]
) -> None:
    one, two = two_vaults
    settings = Settings.from_env(now=parse_datetime(NOW))
    with ContextGraph.open(tmp_path / "both.db", settings=settings) as both:
        both.sync([one, two])
        assert _relation_count(both, "alpha", "shared") == 2
        report = both.remove_source("one")
        assert report.deleted == 3
        assert [s.name for s in both.sources()] == ["two"]
        with ContextGraph.open(tmp_path / "fresh.db", settings=settings) as fresh:
            fresh.sync([two])
            assert _unkeyed(snapshot(both)) == _unkeyed(snapshot(fresh))
            assert (
                both.communities().as_dict()["communities"]
                == (fresh.communities().as_dict()["communities"])
            )
        assert both.doctor().ok
        assert _relation_count(both, "alpha", "shared") == 1
        assert both.search("Gamma").total == 0
        assert both.read("c.md").source == "two"
        assert both.stats().entities["package"] == 1  # os, still imported by two; requests gone


def test_cli_sources_remove_forgets_it_and_doctor_stays_ok(
    runner: CliRunner, db_path: Path, two_vaults: tuple[Path, Path]
) -> None:
    one, two = two_vaults
    assert invoke(runner, db_path, "sync", str(one), str(two))[0] == 0
    code, out, err = invoke(runner, db_path, "sources", "remove", "one")
    assert code == 0, err
    assert out.startswith("removed source one: 3 files forgotten")
    code, out, _ = invoke(runner, db_path, "sources", "--json")
    assert [s["name"] for s in json.loads(out)["sources"]] == ["two"]
    code, out, _ = invoke(runner, db_path, "doctor", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    code, _, err = invoke(runner, db_path, "sources", "remove", "one")
    assert code == 1 and "no source named 'one'" in err
    # The folder can now be registered again, also as the parent of nothing.
    assert invoke(runner, db_path, "sync", str(one / "docs"), "--name", "docs")[0] == 0


def test_a_vanished_source_folder_fails_the_sync_and_points_at_sources_remove(
    runner: CliRunner, db_path: Path, two_vaults: tuple[Path, Path]
) -> None:
    one, two = two_vaults
    assert invoke(runner, db_path, "sync", str(one), str(two))[0] == 0
    shutil.rmtree(one)
    code, out, err = invoke(runner, db_path, "sync", "--json")
    assert code == 1
    assert json.loads(out)["missingSources"] == ["one"]
    assert "contextgraph sources remove one" in err
    code, out, _ = invoke(runner, db_path, "sources")
    assert "(folder missing)" in out
    assert invoke(runner, db_path, "sources", "remove", "one")[0] == 0
    assert invoke(runner, db_path, "sync")[0] == 0
    code, out, _ = invoke(runner, db_path, "doctor", "--json")
    assert code == 0 and json.loads(out)["ok"] is True


# -- folders that are no source (rough edges) ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/", "file-system root"),
        ("/proc", "pseudo-filesystem"),
        ("/sys/kernel", "pseudo-filesystem"),
        ("/dev", "pseudo-filesystem"),
    ],
)
def test_sync_refuses_empty_root_and_pseudo_filesystem_paths(
    runner: CliRunner,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # an empty path must not mean "the working directory"
    (tmp_path / "note.md").write_text("[[Here]] [[There]]")
    code, _, err = invoke(runner, db_path, "sync", path)
    assert code == 1
    assert message in err and len(err.strip().splitlines()) == 1
    assert not db_path.exists()  # refused before a database was created for it
    code, _, err = invoke(runner, db_path, "init", path)
    assert code == 1 and message in err
    assert not db_path.exists()


def test_library_sync_without_sources_says_so(store: ContextGraph) -> None:
    with pytest.raises(SourceError, match="no sources registered"):
        store.sync()


# -- the library's register, get and list ---------------------------------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = db.make_engine(tmp_path / "graph.db")
    db.upgrade(engine)
    yield engine
    engine.dispose()


def test_a_folder_is_registered_under_its_basename_once(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    folder.mkdir()
    first = register(engine, folder)
    assert (first.name, first.root) == ("vault", folder.resolve())
    assert register(engine, folder) == first  # idempotent
    with db.read(engine) as conn:
        assert list_sources(conn) == [first]
        assert get_source(conn, "vault") == first


def test_a_name_used_by_another_folder_is_refused(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "a" / "notes").mkdir(parents=True)
    (tmp_path / "b" / "notes").mkdir(parents=True)
    register(engine, tmp_path / "a" / "notes")
    with pytest.raises(SourceError, match="'notes' is already used for"):
        register(engine, tmp_path / "b" / "notes")
    other = register(engine, tmp_path / "b" / "notes", name="b-notes")
    assert other.name == "b-notes"


def test_bad_roots_and_names_are_one_line_errors(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a folder"):
        register(engine, tmp_path / "missing")
    (tmp_path / "ok").mkdir()
    for bad in ("a/b", " padded ", "tab\there"):
        with pytest.raises(InvalidArgument, match="invalid source name"):
            register(engine, tmp_path / "ok", name=bad)
    with db.read(engine) as conn, pytest.raises(NotFound, match="no source named 'nosuch'"):
        get_source(conn, "nosuch")


@pytest.mark.parametrize(
    "path",
    ["x" * 5000, "word " * 20000, "a/" * 3000 + "b", "line\nbreak", "~nosuchuser-cg/notes"],
    ids=["name-too-long", "path-too-long", "deep", "newline", "no-such-user"],
)
def test_a_folder_path_the_system_cannot_take_is_a_one_line_refusal(
    runner: CliRunner, tmp_path: Path, engine: Engine, path: str
) -> None:
    fresh = tmp_path / "fresh.db"
    for command in ("sync", "init"):
        code, _, err = invoke(runner, fresh, command, path)
        assert code == 1, err
        assert "not a folder" in err and "unexpected" not in err, err
        assert len(err.strip().splitlines()) == 1, err
        assert not fresh.exists()
    with pytest.raises(SourceError, match="not a folder"):
        register(engine, path)
