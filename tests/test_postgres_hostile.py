"""Hostile input on both engines (a hunt of the PostgreSQL tier, stop 42): what SQLite took,
PostgreSQL refused, or the other way round."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from helpers import Writer

from contextgraph import ContextGraph
from contextgraph.errors import DatabaseError
from contextgraph.sync.run import lock_database, run_sync, sync_paths

pytestmark = pytest.mark.engines("sqlite", "postgresql")


def test_a_nul_escaped_in_a_frontmatter_title_stops_no_sync(
    db_url: str, vault: Path, write: Writer
) -> None:
    write("nul.md", '---\ntitle: "bad\\0title"\n---\n[[A]] [[B]]\n')
    write("ok.md", "[[A]] [[C]]\n")
    with ContextGraph.open(db_url) as graph:
        report = graph.sync([vault])
        assert (report.added, report.failed) == (2, [])
        assert graph.read("nul.md").title == "bad\ufffdtitle"


def test_a_nul_in_a_looked_up_name_finds_nothing_on_either_engine(
    db_url: str, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Block]] and [[Other]]\n")
    with ContextGraph.open(db_url) as graph:
        graph.sync([vault])
        assert graph.build_context("x\0y").direct_relations == ()
        assert graph.expand(["block", "x\0y"]).matched == ("block",)
        assert graph.search("bl\0ock").total == graph.search("bl\ufffdock").total


def test_a_database_name_with_a_space_is_synced(
    backend: str, pg_cluster: object, vault: Path, write: Writer
) -> None:
    if backend != "postgresql":
        pytest.skip("a PostgreSQL URL")
    name = f"cg space {os.getpid()}"
    pg_cluster.admin(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    try:
        write("a.md", "[[A]] [[B]]\n")
        url = pg_cluster.url(name.replace(" ", "%20"))  # type: ignore[attr-defined]
        with ContextGraph.open(url) as graph:
            assert graph.sync([vault]).added == 1  # the sync lock's own session connects too
    finally:
        pg_cluster.drop(name)  # type: ignore[attr-defined]


def test_another_applications_database_is_left_untouched(backend: str, pg_cluster: object) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite's case is in test_database_files")
    name = f"cg_foreign_{os.getpid()}"
    pg_cluster.admin(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    try:
        import psycopg

        url = pg_cluster.url(name)  # type: ignore[attr-defined]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE customers (id int)")
        with pytest.raises(DatabaseError, match="another application"):
            ContextGraph.open(url).stats()
        with psycopg.connect(url, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchall()
        assert tables == [("customers",)]
    finally:
        pg_cluster.drop(name)  # type: ignore[attr-defined]


def test_a_url_whose_port_is_no_number_is_one_clear_error() -> None:
    with pytest.raises(DatabaseError, match="invalid database URL"):
        ContextGraph.open("postgresql://postgres@localhost:notaport/x")


def _deep(root: Path, total_bytes: int) -> Path:
    """A folder under ``root`` whose source-relative path is about ``total_bytes`` long."""
    folder, part = root, 0
    while len(str(folder.relative_to(root))) < total_bytes - 250:
        # Names that do not compress: PostgreSQL compresses an index entry before it checks
        # its size.
        name = "".join(hashlib.sha512(f"{part} {i}".encode()).hexdigest() for i in range(2))
        folder = folder / name[:200]
        part += 1
    folder.mkdir(parents=True)
    return folder


def test_a_path_too_long_for_an_index_fails_its_file_not_the_sync(
    backend: str, db_url: str, vault: Path, write: Writer
) -> None:
    deep = _deep(vault, 3000)
    (deep / "deep.md").write_text("[[A]] [[B]]\n", encoding="utf-8")
    (deep / "deep.py").write_text("import os\nclass C:\n    def m(self): pass\n", encoding="utf-8")
    write("ok.md", "[[A]] [[C]]\n")
    write("ok.py", "import json\n")
    with ContextGraph.open(db_url) as graph:
        report = graph.sync([vault])
        if backend == "sqlite":  # no limit there
            assert (report.added, report.failed) == (4, [])
            return
        assert report.added == 2
        assert sorted(Path(p.path).name for p in report.failed) == ["deep.md", "deep.py"]
        assert {p.reason for p in report.failed} == {
            "path longer than 2,400 bytes: PostgreSQL cannot index it"
        }
        assert graph.build_context("a").direct_relations[0].name == "c"
        assert graph.search("json").total == 1
        assert graph.sync([vault]).failed == report.failed  # and again, nothing else changed
        deep_note = str((deep / "deep.md").relative_to(vault))
        # The way a watcher's batch and a note write sync their files, the same.
        paths = sync_paths(graph.engine, graph.settings, "vault", [deep_note])
        assert (paths.added, [p.reason for p in paths.failed]) == (0, [report.failed[0].reason])


def test_code_names_too_long_for_an_index_leave_the_code_graph_whole(
    backend: str, db_url: str, vault: Path, write: Writer
) -> None:
    long_name = "C" + "".join(hashlib.sha512(str(i).encode()).hexdigest() for i in range(24))
    write(
        "app.py",
        f"class {long_name}:\n    def go(self):\n        pass\n"
        "class Short:\n    def run(self):\n        pass\n",
    )
    with ContextGraph.open(db_url) as graph:
        report = graph.sync([vault])
        assert (report.added, report.failed) == (1, [])
        names = {r.entity for r in graph.expand(["app.py"], max_nodes=50).results}
        assert {"Short", "run"} <= names
        # PostgreSQL leaves out the class and its method (whose key holds the class's name).
        assert (long_name in names) == (backend == "sqlite")


def test_a_sync_waiting_for_the_lock_gives_up_when_its_waiter_says_so(
    db_url: str, vault: Path, write: Writer
) -> None:
    write("a.md", "[[A]] [[B]]\n")

    class GiveUp(Exception):
        pass

    tries: list[float] = []

    def waiting() -> None:
        tries.append(time.monotonic())
        if len(tries) == 3:
            raise GiveUp
        time.sleep(0.01)

    with ContextGraph.open(db_url) as graph:
        graph.sync([vault])
        with lock_database(graph.engine), pytest.raises(GiveUp):  # another sync holds it
            run_sync(graph.engine, graph.settings, waiting=waiting)
        assert len(tries) == 3
        assert run_sync(graph.engine, graph.settings, waiting=waiting).unchanged == 1
        assert len(tries) == 3  # a free lock is taken at the first try
