"""The database file itself: literal paths, in-memory, read-only, damaged, missing (SPEC §12)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import NOW, Writer

from contextgraph import ContextGraph
from contextgraph.cli import cli
from contextgraph.errors import CorruptDatabase, DatabaseError, ReadOnlyDatabase
from contextgraph.store import db as dbmod

AS_NOBODY = ("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups")
SQL_WORDS = ("SELECT", "UPDATE", "INSERT", "[SQL:", "parameters:")


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("CONTEXTGRAPH_NOW", NOW)
    return CliRunner()


def run(runner: CliRunner, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and not any(w in err for w in SQL_WORDS)


def doctor_ok(runner: CliRunner, database: Path | str) -> bool:
    code, out, _ = run(runner, "--db", str(database), "doctor", "--json")
    return code == 0 and json.loads(out)["ok"] is True


@pytest.fixture
def notes(vault: Path, write: Writer) -> Path:
    write("a.md", "[[Alpha]] and [[Beta]]")
    write("b.md", "[[Alpha]] with [[Gamma]]")
    return vault


# -- literal paths and :memory: (bug 1) ------------------------------------------------------


@pytest.mark.parametrize("name", ["50%.db", "a:b.db", "my%20notes.db", "100%%.db", "x%(y)s.db"])
def test_db_paths_are_taken_literally(
    runner: CliRunner, tmp_path: Path, notes: Path, name: str
) -> None:
    folder = tmp_path / "dbs"
    folder.mkdir()
    target = folder / name
    code, _, err = run(runner, "--db", str(target), "sync", str(notes), "--json")
    assert code == 0, err
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        name,
        f"{name}.sync.lock",
    ]
    code, out, err = run(runner, "--db", str(target), "context", "Alpha", "--json")
    assert code == 0, err
    assert {r["name"] for r in json.loads(out)["directRelations"]} == {"beta", "gamma"}
    assert doctor_ok(runner, target)


def test_memory_is_an_in_memory_database_never_a_file(
    tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = set(os.listdir(tmp_path))
    with ContextGraph.open(":memory:") as graph:
        assert graph.database_path is None
        report = graph.sync([notes])
        assert report.added == 2
        assert {r.name for r in graph.build_context("Alpha").direct_relations} == {"beta", "gamma"}
        assert graph.search("Gamma").total == 1
        assert graph.doctor().ok
        assert graph.stats().as_dict()["files"] == {"note": 2}
    with ContextGraph.open(":memory:") as other:  # private: a second one is empty
        assert other.sources() == []
    assert set(os.listdir(tmp_path)) == before


def test_cli_memory_database_creates_no_file(
    runner: CliRunner, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = set(os.listdir(tmp_path))
    code, out, err = run(runner, "--db", ":memory:", "sync", str(notes), "--json")
    assert code == 0, err
    assert json.loads(out)["files"]["added"] == 2
    assert set(os.listdir(tmp_path)) == before


def test_repository_holds_no_memory_file() -> None:
    assert not (Path(__file__).resolve().parents[1] / ":memory:").exists()


def test_empty_db_option_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    code, _, err = run(runner, "--db", "", "stats")
    assert code == 2 and "database path is empty" in err
    code, _, err = run(runner, "stats", "--db", "")
    assert code == 2


# -- no database yet (rough edge) -----------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("context", "foo"),
        ("expand", "foo"),
        ("search", "foo"),
        ("read", "foo"),
        ("visualize", "foo"),
        ("communities",),
        ("stats",),
        ("doctor",),
        ("sources",),
        ("sources", "remove", "foo"),
        ("db", "current"),
    ],
)
def test_a_query_on_a_missing_database_says_so_and_creates_nothing(
    runner: CliRunner, tmp_path: Path, args: tuple[str, ...]
) -> None:
    target = tmp_path / "typo" / "x.db"
    code, out, err = run(runner, "--db", str(target), *args)
    assert code == 1
    assert out == ""
    assert f"no database at {target}" in err and one_line(err)
    assert not (tmp_path / "typo").exists()


def test_library_open_without_create_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="no database at"):
        ContextGraph.open(tmp_path / "none.db", create=False)
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("kind", ["folder", "text file"])
def test_db_that_is_a_folder_or_not_a_database_is_one_line(
    runner: CliRunner, tmp_path: Path, kind: str
) -> None:
    if kind == "folder":
        target = tmp_path / "etc"
        target.mkdir()
        (target / "passwd").write_text("x")
    else:
        target = tmp_path / "README.md"
        target.write_text("# Not a database\n\nJust text, long enough to fill a header.\n" * 10)
    before = target.read_text() if target.is_file() else None
    for args in (("context", "x"), ("stats",), ("sync", str(tmp_path)), ("search", "x")):
        code, _out, err = run(runner, "--db", str(target), *args)
        assert code == 1, (args, err)
        assert one_line(err), err
        assert "unexpected error" not in err
    if before is not None:
        assert target.read_text() == before  # nothing written into the user's file


# -- damaged database (bug 5) ---------------------------------------------------------------


def _damaged(tmp_path: Path, notes: Path, how: str) -> Path:
    target = tmp_path / "damaged.db"
    if how == "not a database":
        target.write_bytes(os.urandom(64 * 1024))
        return target
    with ContextGraph.open(target) as graph:
        graph.sync([notes])
    with ContextGraph.open(target) as graph, graph.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")  # into the main file
    data = bytearray(target.read_bytes())
    page = 4096
    for start in range(2 * page, len(data), page):  # keep the header, smash every other page
        data[start + 8 : start + page] = b"\xa5" * (page - 8)
    target.write_bytes(bytes(data))
    return target


@pytest.mark.parametrize("how", ["not a database", "malformed pages"])
def test_doctor_diagnoses_a_damaged_database(
    runner: CliRunner, tmp_path: Path, notes: Path, how: str
) -> None:
    target = _damaged(tmp_path, notes, how)
    code, out, err = run(runner, "--db", str(target), "doctor")
    assert code == 1
    (line,) = out.splitlines()  # the integrity problem, said once
    assert line.startswith("integrity_check: ") and line != "integrity_check: ok"
    assert "unexpected error" not in err and "Traceback" not in err
    code, out, err = run(runner, "--db", str(target), "doctor", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and report["integrityCheck"] != "ok" and report["problems"]
    report = ContextGraph.diagnose(target)
    assert not report.ok


@pytest.mark.parametrize("how", ["not a database", "malformed pages"])
def test_other_commands_on_a_damaged_database_are_one_line(
    runner: CliRunner, tmp_path: Path, notes: Path, how: str
) -> None:
    target = _damaged(tmp_path, notes, how)
    for args in (
        ("context", "alpha"),
        ("context", "alpha", "--depth", "3", "--json"),
        ("expand", "alpha"),
        ("search", "alpha"),
        ("read", "a.md"),
        ("stats",),
        ("communities",),
        ("sync",),
    ):
        code, _out, err = run(runner, "--db", str(target), *args)
        if code == 0:  # a query may not touch a damaged page; then its answer must be sound
            continue
        assert code == 1, (args, err)
        assert one_line(err), (args, err)
        assert "unexpected error" not in err


def test_library_raises_corrupt_database_for_a_non_database(tmp_path: Path) -> None:
    target = tmp_path / "junk.db"
    target.write_bytes(b"\x00junk" * 1000)
    with pytest.raises(CorruptDatabase, match="damaged or not a database"):
        ContextGraph.open(target)


# -- read-only database (bug 4) -------------------------------------------------------------


@pytest.fixture
def read_only_db(
    runner: CliRunner, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A synced database, then made 0444 in a 0555 folder, seen as by a user who cannot write."""
    folder = tmp_path / "ro"
    folder.mkdir()
    target = folder / "graph.db"
    assert run(runner, "--db", str(target), "sync", str(notes))[0] == 0
    for extra in folder.iterdir():
        if extra != target:
            extra.unlink()
    target.chmod(0o444)
    folder.chmod(0o555)
    # The tests run as root, who may write anything: simulate the non-root user's view.
    monkeypatch.setattr(dbmod, "_writable", lambda path: False)
    yield target
    folder.chmod(0o755)


READS = [
    ("context", "Alpha", "--json"),
    ("context", "Alpha", "--depth", "3"),
    ("expand", "alpha", "--json"),
    ("search", "Alpha", "--json"),
    ("stats", "--json"),
    ("doctor", "--json"),
    ("communities", "--json"),
    ("sources", "--json"),
    ("visualize", "alpha"),
    ("db", "current"),
]


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_every_read_works_on_a_read_only_database(
    runner: CliRunner, read_only_db: Path, args: tuple[str, ...]
) -> None:
    code, out, err = run(runner, "--db", str(read_only_db), *args)
    assert code == 0, err
    if "--json" in args:
        json.loads(out)


def test_every_sqlite_connection_reads_through_mmap(tmp_path: Path, read_only_db: Path) -> None:
    for path in (tmp_path / "rw.db", read_only_db):
        with ContextGraph.open(path) as graph, dbmod.read(graph.engine) as conn:
            assert conn.exec_driver_sql("PRAGMA mmap_size").scalar_one() == dbmod.MMAP_BYTES
            # A negative cache_size is KiB: the bounded page cache every connection gets.
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar_one() == -dbmod.CACHE_KIB


@pytest.mark.parametrize(
    "args",
    [("sync",), ("read", "a.md"), ("communities", "--rebuild"), ("sources", "remove", "vault")],
    ids=lambda a: " ".join(a),
)
def test_a_write_to_a_read_only_database_is_one_clear_line(
    runner: CliRunner, read_only_db: Path, args: tuple[str, ...]
) -> None:
    before = read_only_db.read_bytes()
    code, _out, err = run(runner, "--db", str(read_only_db), *args)
    assert code == 1
    assert "read-only" in err and one_line(err), err
    assert "Alpha" not in err  # no note text either
    assert read_only_db.read_bytes() == before


def test_library_read_only_database_refuses_writes_with_its_own_error(read_only_db: Path) -> None:
    with ContextGraph.open(read_only_db) as graph:
        assert graph.read_only
        assert graph.build_context("alpha").direct_relations
        with pytest.raises(ReadOnlyDatabase):
            graph.sync()
        with pytest.raises(ReadOnlyDatabase):
            graph.read("a.md")


def _nobody_can_run_python() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(
        [
            "setpriv",
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            sys.executable,
            "-c",
            "import contextgraph",
        ],
        capture_output=True,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _nobody_can_run_python(), reason="needs root, setpriv and user 65534")
def test_read_only_database_as_a_real_non_root_user(notes: Path) -> None:
    """The same, for real: a non-root user (setpriv to uid 65534) on a 0444 file in a 0555
    folder with no -wal/-shm beside it."""
    base = Path(tempfile.mkdtemp(prefix="cg-ro-"))
    try:
        base.chmod(0o755)
        vault = base / "vault"
        shutil.copytree(notes, vault)
        target = base / "ro" / "graph.db"
        with ContextGraph.open(target) as graph:
            graph.sync([vault])
        for extra in target.parent.iterdir():
            if extra != target:
                extra.unlink()
        for p in [vault, *vault.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        target.chmod(0o444)
        target.parent.chmod(0o555)

        def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    "setpriv",
                    "--reuid",
                    "65534",
                    "--regid",
                    "65534",
                    "--clear-groups",
                    sys.executable,
                    "-m",
                    "contextgraph",
                    "--db",
                    str(target),
                    *args,
                ],
                capture_output=True,
                text=True,
                env={**os.environ, "HOME": str(base), "CONTEXTGRAPH_NOW": NOW},
                cwd=base,
            )

        for args in READS:
            result = as_nobody(*args)
            assert result.returncode == 0, (args, result.stderr)
        for args in (("sync",), ("read", "a.md")):
            result = as_nobody(*args)
            assert result.returncode == 1, (args, result.stderr)
            assert "read-only" in result.stderr and one_line(result.stderr), result.stderr
        assert sorted(p.name for p in target.parent.iterdir()) == ["graph.db"]
        assert stat.S_IMODE(target.stat().st_mode) == 0o444
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(base)


# -- a database of another application --------------------------------------------------------


def _foreign(tmp_path: Path, *, revision: str | None = None) -> Path:
    """An SQLite file some other program made: its own tables, rollback journal."""
    import sqlite3

    target = tmp_path / "places.sqlite"
    conn = sqlite3.connect(target)
    conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org/')")
    if revision is not None:  # another application that also keeps Alembic's table
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.execute("INSERT INTO alembic_version VALUES (?)", (revision,))
    conn.commit()
    conn.close()
    return target


@pytest.mark.parametrize("revision", [None, "abc123"], ids=["no-alembic", "unknown-revision"])
def test_a_database_of_another_application_is_refused_and_left_untouched(
    runner: CliRunner, tmp_path: Path, notes: Path, revision: str | None
) -> None:
    target = _foreign(tmp_path, revision=revision)
    before = target.read_bytes()
    for args in (
        ("search", "x"),
        ("context", "x"),
        ("stats", "--json"),
        ("doctor",),
        ("sources",),
        ("init",),
        ("db", "upgrade"),
        ("sync", str(notes)),
    ):
        code, _out, err = run(runner, "--db", str(target), *args)
        assert code == 1, (args, err)
        assert one_line(err), (args, err)
        assert "unexpected error" not in err and "contextgraph" in err, (args, err)
    assert target.read_bytes() == before  # no schema, no WAL switch: not one byte
    assert not (tmp_path / "places.sqlite-wal").exists()
    with pytest.raises(DatabaseError, match=r"another application|does not know"):
        ContextGraph.open(target)
    assert target.read_bytes() == before


def test_an_empty_sqlite_file_still_becomes_a_contextgraph_database(tmp_path: Path) -> None:
    import sqlite3

    target = tmp_path / "empty.db"
    sqlite3.connect(target).execute("PRAGMA user_version = 7").connection.close()
    with ContextGraph.open(target) as graph:
        assert graph.revision() == dbmod.SCHEMA_HEAD


def test_db_upgrade_to_an_unknown_revision_is_one_line(runner: CliRunner, db_path: Path) -> None:
    assert run(runner, "--db", str(db_path), "init")[0] == 0
    for revision in ("nonesuch", "", "   ", "memory://x"):
        code, _out, err = run(runner, "--db", str(db_path), "db", "upgrade", revision)
        assert code in (1, 2), (revision, err)
        assert one_line(err) and "unexpected error" not in err, (revision, err)
    assert doctor_ok(runner, db_path)


# -- a hunt of the database files (stop 43) ---------------------------------------------------


def _crashed_in_wal(target: Path, tables: list[str], revision: str | None = None) -> None:
    """A WAL-mode database whose last transactions are only in its -wal (a crash)."""
    script = [
        "import os, sqlite3, sys",
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)",
        "c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0')",
        *[f"c.execute('CREATE TABLE {t} (id INTEGER PRIMARY KEY, v TEXT)')" for t in tables],
    ]
    if revision is not None:
        script += [
            "c.execute('CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)')",
            f"c.execute(\"INSERT INTO alembic_version VALUES ('{revision}')\")",
        ]
    script.append("os._exit(0)")  # no close: the -wal stays, uncheckpointed
    subprocess.run([sys.executable, "-c", "\n".join(script), str(target)], check=True)


@pytest.mark.parametrize(
    ("tables", "revision"),
    [(["moz_places"], None), (["sources", "files", "entities", "mentions", "meta"], "0099_x")],
    ids=["another-application", "newer-revision"],
)
def test_a_refused_database_left_with_a_wal_is_not_written(
    runner: CliRunner, tmp_path: Path, tables: list[str], revision: str | None
) -> None:
    target = tmp_path / "other.db"
    _crashed_in_wal(target, tables, revision)
    wal = target.with_name("other.db-wal")
    before, log = target.read_bytes(), wal.read_bytes()
    for args in (("stats",), ("search", "x"), ("db", "current")):
        code, _out, err = run(runner, "--db", str(target), *args)
        assert code == 1 and one_line(err), (args, err)
    assert target.read_bytes() == before  # the log was not copied into the file
    assert wal.read_bytes() == log


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_database_path_that_is_not_a_regular_file_is_refused_and_nothing_made_beside(
    runner: CliRunner, tmp_path: Path, notes: Path, kind: str
) -> None:
    target = tmp_path / "graph.db"
    if kind == "fifo":
        os.mkfifo(target)
    else:  # a character device like /dev/null: SQLite made graph.db-journal beside it
        try:
            os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except OSError as exc:
            pytest.skip(f"cannot make a device here: {exc}")
    for args in (("stats",), ("sync", str(notes))):
        code, _out, err = run(runner, "--db", str(target), *args)
        assert code == 1 and one_line(err), (args, err)
        assert "is not a regular file" in err, err
    assert sorted(p.name for p in tmp_path.glob("graph.db*")) == ["graph.db"]


@pytest.mark.parametrize("journal", ["wal", "rollback"])
def test_a_cli_sync_of_another_applications_database_changes_no_file(
    tmp_path: Path, notes: Path, journal: str
) -> None:
    # The CLI's first try, the no-change check that runs before the library loads, opened the
    # file read-write: SQLite copied the other program's -wal into it as it closed, and the
    # lock file was left beside it.
    from helpers import child_env

    from contextgraph.__main__ import unchanged_sync

    if journal == "wal":
        target = tmp_path / "other.db"
        _crashed_in_wal(target, ["moz_places"])
    else:
        target = _foreign(tmp_path)

    def files() -> dict[str, bytes]:  # -shm is a reader's shared memory: any reader writes it
        found = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        return {k: b"" if k.endswith("-shm") else v for k, v in found.items()}

    before = files()
    assert unchanged_sync(["--db", str(target), "sync", str(notes)]) is None
    done = subprocess.run(
        [sys.executable, "-m", "contextgraph", "--db", str(target), "sync", str(notes)],
        env=child_env(CONTEXTGRAPH_NO_RESIDENT="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "another application" in done.stderr, done.stderr
    assert files() == before  # the file and its -wal as they were, and no lock file beside
    code, _out, err = run(CliRunner(), "--db", str(target), "stats")
    assert code == 1 and "another application" in err, err
    assert files() == before


@pytest.mark.parametrize("revision", [None, "0099_future"], ids=["foreign", "newer"])
def test_a_refused_database_keeps_its_journal_mode(
    runner: CliRunner, tmp_path: Path, revision: str | None
) -> None:
    import sqlite3

    target = tmp_path / "other.db"
    conn = sqlite3.connect(target)
    for name in ("sources", "files", "entities", "mentions", "meta", "their_own"):
        conn.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY)")
    if revision is not None:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.execute("INSERT INTO alembic_version VALUES (?)", (revision,))
    conn.commit()
    conn.close()
    before = target.read_bytes()
    code, _out, err = run(runner, "--db", str(target), "stats")
    assert code == 1 and one_line(err), err
    assert target.read_bytes() == before  # still in rollback mode: its header unchanged


def test_a_read_only_database_whose_wal_cannot_be_read_is_refused_not_misread(
    runner: CliRunner, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    target = tmp_path / "ro" / "graph.db"
    assert run(runner, "--db", str(target), "sync", str(notes))[0] == 0
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("DELETE FROM sources")  # committed, in the -wal only once the shm is gone
    target.with_name("graph.db-shm").unlink()
    monkeypatch.setattr(dbmod, "_writable", lambda path: False)
    monkeypatch.setattr(dbmod.os, "access", lambda path, mode: False)
    code, _out, err = run(runner, "--db", str(target), "stats")
    conn.close()
    assert code == 1 and one_line(err) and "write-ahead log" in err, err


def test_a_read_only_database_at_a_path_that_is_not_utf8_is_read(
    runner: CliRunner, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    target = folder / "graph.db"
    assert run(runner, "--db", str(target), "sync", str(notes))[0] == 0
    monkeypatch.setattr(dbmod, "_writable", lambda path: False)
    code, out, err = run(runner, "--db", str(target), "stats", "--json")
    assert code == 0, err
    assert json.loads(out)["files"] == {"note": 2}


def test_a_path_starting_with_a_tilde_and_a_name_is_literal(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _out, err = run(runner, "--db", "~nobody-has-this-name.db", "init")
    assert code == 0, err
    assert (tmp_path / "~nobody-has-this-name.db").exists()


def test_every_query_works_on_a_database_at_a_path_that_is_not_utf8(
    runner: CliRunner, tmp_path: Path, notes: Path
) -> None:
    target = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9")) / "graph.db"
    assert run(runner, "--db", str(target), "sync", str(notes))[0] == 0
    for args in READS:
        code, _out, err = run(runner, "--db", str(target), *args)
        assert code == 0, (args, err)
    code, out, _err = run(runner, "--db", str(target), "stats", "--json")
    assert json.loads(out)["database"].endswith("/caf\ufffd/graph.db")


@pytest.mark.parametrize(
    ("given", "memory"),
    [
        (":memory:", True),
        ("sqlite://", True),
        ("postgresql://me@dbhost/", False),  # the server's default database: not in memory
        ("postgresql://me@dbhost", False),
        ("postgresql://me@dbhost/notes", False),
    ],
)
def test_only_sqlite_urls_can_name_an_in_memory_database(given: str, memory: bool) -> None:
    from contextgraph.store import db

    assert db.is_memory(db.database_url(given)) is memory
