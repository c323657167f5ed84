"""A sync that changes nothing, answered before the CLI loads (contextgraph.sync.unchanged):
whenever it answers, the full sync's report; whenever the full sync would write, no answer."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import Writer, child_env, snapshot

from contextgraph import ContextGraph
from contextgraph.__main__ import unchanged_sync
from contextgraph.cli import cli
from contextgraph.errors import SyncInProgress
from contextgraph.launch import plain_sync
from contextgraph.store import db, meta
from contextgraph.sync import unchanged
from contextgraph.sync.lock import (
    database_files,
    drop_handed,
    hand_over,
    handed_scan,
    lock_file,
    sync_lock,
)
from contextgraph.sync.scan import ScanResult

Run = Callable[..., tuple[int | None, str, str]]


@pytest.fixture
def synced(db_path: Path, vault: Path, write: Writer, tmp_path: Path) -> Path:
    """Two sources synced: notes, a code file, a binary note (failed on every sync)."""
    write("a.md", "[[Alpha]] and [[Beta]] and [[Gamma]]", created="2026-11-01")
    write("deep/b.md", "[[Beta]] with [[Gamma]]\n\n```\n[[Not a link]]\n```\n")
    write("code/m.py", "import os\n\n\nclass K:\n    def f(self):\n        return os.sep\n")
    (vault / "broken.md").write_bytes(b"[[Alpha]]\x00\x01")
    other = tmp_path / "other"
    other.mkdir()
    write("c.md", "[[Delta]] [[Alpha]]", root=other)
    code = CliRunner().invoke(cli, ["--db", str(db_path), "sync", str(vault), str(other)])
    assert code.exit_code == 0, code.output
    return db_path


@pytest.fixture
def full(db_path: Path) -> Run:
    """The CLI's own sync (click, SQLAlchemy)."""

    def run(*args: str) -> tuple[int | None, str, str]:
        result = CliRunner().invoke(cli, ["--db", str(db_path), *args])
        return result.exit_code, result.stdout, result.stderr

    return run


@pytest.fixture
def fast(db_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    """The entry point's answer before the CLI loads (None: it left the sync to the CLI)."""

    def run(*args: str) -> tuple[int | None, str, str]:
        capsys.readouterr()
        code = unchanged_sync(["--db", str(db_path), *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _timeless(out: str) -> str:
    """A report without its timings: the text's ``time:`` line, the JSON's ``seconds``."""
    if out.startswith("{"):
        data = json.loads(out)
        assert list(data.pop("seconds")) == [
            "lock",
            "scan",
            "files",
            "codegraph",
            "communities",
            "weights",
            "total",
        ]
        return json.dumps(data)
    assert out.splitlines()[-1].startswith("time: lock ")
    return "\n".join(out.splitlines()[:-1])


@pytest.mark.parametrize(
    "args",
    [
        ("sync",),
        ("sync", "--json"),
        ("sync", "--no-wait"),
        ("sync", "{vault}"),
        ("sync", "{vault}/", "--json"),
        ("sync", "{other}", "{vault}", "{other}"),
    ],
)
def test_a_sync_that_changes_nothing_reports_what_the_full_sync_does(
    synced: Path, vault: Path, tmp_path: Path, fast: Run, full: Run, args: tuple[str, ...]
) -> None:
    args = tuple(a.format(vault=vault, other=tmp_path / "other") for a in args)
    code, out, err = fast(*args)
    assert code == 0
    expected = full(*args)
    assert expected[0] == 0
    assert _timeless(out) == _timeless(expected[1])
    assert err == expected[2]
    if "--json" in args:
        assert {"source": "vault", "path": "broken.md"}.items() <= json.loads(out)["failed"][
            0
        ].items()
    else:
        assert "failed: vault/broken.md: binary file" in err


def test_a_relative_path_and_a_home_path_name_their_source(
    synced: Path, vault: Path, fast: Run, full: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(vault / "deep")
    code, out, _ = fast("sync", "..", "--json")
    assert code == 0 and json.loads(out)["sources"] == ["vault"]
    monkeypatch.setenv("HOME", str(vault.parent))
    code, out, _ = fast("sync", "~/vault", "--json")
    assert code == 0 and _timeless(out) == _timeless(full("sync", "~/vault", "--json")[1])


def test_scan_problems_and_files_too_large_fail_alike(
    synced: Path, vault: Path, fast: Run, full: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTGRAPH_MAX_FILE_BYTES", "100")
    assert full("sync")[0] == 0  # its files stored under that limit (another extraction key)
    (vault / "big.md").write_text("[[Alpha]] " * 50, encoding="utf-8")
    os.mkdir(os.path.join(os.fsencode(vault), b"bad\xffname"))
    code, out, err = fast("sync")
    assert code == 0
    assert "big.md: larger than 100 bytes" in err and "not valid UTF-8" in err
    expected = full("sync")
    assert (_timeless(out), err) == (_timeless(expected[1]), expected[2])


@pytest.mark.parametrize(
    "change",
    [
        "touch",
        "edit",
        "delete",
        "new note",
        "new failing files past the limit",
        "a new note among failing files",
        "source folder gone",
    ],
)
def test_a_sync_with_work_to_do_is_left_to_the_cli(
    synced: Path, vault: Path, fast: Run, full: Run, change: str
) -> None:
    a = vault / "a.md"
    if change == "touch":
        os.utime(a, ns=(a.stat().st_atime_ns, a.stat().st_mtime_ns + 1_000_000_000))
    elif change == "edit":
        a.write_text(a.read_text(encoding="utf-8") + " [[Epsilon]]", encoding="utf-8")
    elif change == "delete":
        a.unlink()
    elif change == "new note":
        (vault / "new.md").write_text("[[Zeta]]", encoding="utf-8")
    elif change.startswith("new failing"):
        for i in range(unchanged.MAX_READS):
            (vault / f"bin{i}.md").write_bytes(b"\x00")
    elif change.startswith("a new note among"):
        (vault / "bin.md").write_bytes(b"\x00")
        (vault / "zz.md").write_text("[[Zeta]]", encoding="utf-8")
    else:
        vault.rename(vault.with_name("moved"))
    assert fast("sync") == (None, "", "")
    code, out, _ = full("sync", "--json")
    gone = change == "source folder gone"
    assert code == (1 if gone else 0) and json.loads(out)["missingSources"] == (
        ["vault"] if gone else []
    )
    # Once the full sync has stored the change, the next one changes nothing, and is answered
    # (but while many failing files, or a missing folder, are still there).
    answered = fast("sync")
    if gone or change.startswith("new failing"):
        assert answered == (None, "", "")
    else:
        assert answered[0] == 0 and _timeless(answered[1]) == _timeless(full("sync")[1])


def test_whatever_the_full_run_must_decide_is_left_to_it(
    synced: Path, vault: Path, tmp_path: Path, fast: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = tmp_path / "new"
    new.mkdir()
    assert fast("sync", str(new)) == (None, "", "")  # a folder to register
    assert fast("sync", str(tmp_path / "nowhere")) == (None, "", "")
    assert fast("sync", str(vault), "--name", "vault") == (None, "", "")
    assert fast("sync", "--help") == (None, "", "")
    assert fast("stats") == (None, "", "")
    assert unchanged_sync(["--db", ":memory:", "sync"]) is None
    assert unchanged_sync(["--db", "postgresql://nobody@localhost/x", "sync"]) is None
    assert unchanged_sync(["--db", str(tmp_path / "missing.db"), "sync", str(vault)]) is None
    assert not (tmp_path / "missing.db").exists()
    for name, value in (
        ("CONTEXTGRAPH_FULL_SYNC", "1"),
        ("CONTEXTGRAPH_WEIGHTS_MIN_NOTES", "2"),
        ("CONTEXTGRAPH_GRACE_DAYS", "not a number"),
    ):
        monkeypatch.setenv(name, value)
        assert fast("sync") == (None, "", ""), name
        monkeypatch.delenv(name)
    assert fast("sync")[0] == 0


def test_a_running_sync_a_stale_mark_or_an_old_schema_leave_it_to_the_cli(
    synced: Path, fast: Run
) -> None:
    with sync_lock(synced, wait=False):
        assert fast("sync") == (None, "", "")
        assert fast("sync", "--no-wait") == (None, "", "")
    graph = ContextGraph.open(synced)
    with db.write(graph.engine) as conn:
        meta.mark_stale(conn, meta.COMMUNITIES)
    assert fast("sync") == (None, "", "")
    report = graph.sync()
    assert report.communities is not None
    graph.close()
    assert fast("sync")[0] == 0
    with sqlite3.connect(synced) as older:
        older.execute("UPDATE alembic_version SET version_num = '0006_older'")
    older.close()
    assert fast("sync") == (None, "", "")
    conn = sqlite3.connect(synced, isolation_level=None)
    conn.execute("UPDATE alembic_version SET version_num = ?", (db.SCHEMA_HEAD,))
    assert fast("sync")[0] == 0
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    conn.close()
    assert fast("sync") == (None, "", "")


def test_its_sql_is_the_text_of_the_statements_it_copies() -> None:
    from sqlalchemy import column, select, table

    from contextgraph.graph.stats import _COUNTS
    from contextgraph.store.sources import _SOURCE_ROWS
    from contextgraph.store.sqlcore import _Compiled
    from contextgraph.sync.apply import _source_files_query

    statements = {
        "revision": select(table("alembic_version", column("version_num")).c.version_num),
        "sources": _SOURCE_ROWS,
        "meta_value": meta._get_statement(),
        "stale_marks": meta.stale_marks_statement(),
        "files": _source_files_query(),
        **{
            name: _COUNTS[name]()
            for name in ("entities_by_kind", "relations_by_type", "latest_run", "concept_relations")
        },
    }
    assert sorted(statements) == sorted(unchanged.SQL)
    for name, statement in statements.items():
        compiled = _Compiled(statement)
        assert unchanged.SQL[name] == (compiled.sql, compiled.constants), name


def test_the_command_line_is_read_as_click_would_or_not_at_all() -> None:
    assert plain_sync(["sync"]) == (None, [], False)
    assert plain_sync(["--db", "x.db", "sync", "a", "--json", "b"]) == ("x.db", ["a", "b"], True)
    assert plain_sync(["sync", "--db=y.db", "--no-wait", "a"]) == ("y.db", ["a"], False)
    for argv in (
        [],
        ["stats"],
        ["--json", "sync"],
        ["sync", "--name", "n", "a"],
        ["sync", "--", "a"],
        ["sync", "-h"],
        ["sync", ""],
        ["sync", "--db"],
        ["--db=", "sync"],
        ["sync", "--progress"],
    ):
        assert plain_sync(argv) is None, argv


def test_the_entry_point_answers_without_loading_sqlalchemy_or_click(synced: Path) -> None:
    env = {**os.environ, "CONTEXTGRAPH_NO_RESIDENT": "1"}
    probe = (
        "import sys\n"
        "from contextgraph.__main__ import unchanged_sync\n"
        "code = unchanged_sync(sys.argv[1:])\n"
        "print(code, sorted(m for m in ('sqlalchemy', 'click', 'alembic') if m in sys.modules),"
        " file=sys.stderr)\n"
    )
    args = ["--db", str(synced), "sync"]
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, check=True
    )
    assert done.stderr.splitlines()[-1] == "0 []"
    command = [sys.executable, "-m", "contextgraph", *args, "--json"]
    answered = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    env["CONTEXTGRAPH_FULL_SYNC"] = "1"
    ran = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert _timeless(answered.stdout) == _timeless(ran.stdout)
    assert json.loads(ran.stdout)["files"]["failed"] == 1


def _copy_database(source: Path, target: Path) -> Path:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return target


def _counting_scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The roots the full sync walks from now on (``sync.run``'s ``scan``), and ``read`` for
    each source whose stored files it reads (``stored_files``)."""
    from contextgraph.sync import run

    walked: list[str] = []
    walk, stored = run.scan, run.stored_files

    def counted(root: Path, **kwargs: Any) -> Any:
        walked.append(Path(root).name)
        return walk(root, **kwargs)

    def read(conn: Any, source_id: int, paths: Any = None) -> Any:
        walked.append("read")
        return stored(conn, source_id, paths)

    monkeypatch.setattr(run, "scan", counted)
    monkeypatch.setattr(run, "stored_files", read)
    return walked


def _lock_is_free(database: Path) -> bool:
    try:
        fd = lock_file(database, wait=False)
    except SyncInProgress:
        return False
    os.close(fd)
    return True


@pytest.mark.parametrize("edited", ["vault/a.md", "other/c.md"])
def test_a_check_that_finds_work_hands_its_lock_and_scans_to_the_sync(
    synced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: str
) -> None:
    """Whichever source has the change ("other" is checked first), the check walks both."""
    twin = _copy_database(synced, tmp_path / "twin.db")
    a = tmp_path / edited
    a.write_text(a.read_text(encoding="utf-8") + " [[Epsilon]]", encoding="utf-8")
    assert unchanged.unchanged_report(synced, [], hand_over_to_sync=True) is None
    assert not _lock_is_free(synced)  # held for the sync that runs next: none can come between
    walked = _counting_scans(monkeypatch)
    with ContextGraph.open(synced) as graph:
        report = graph.sync(wait=False)  # the lock handed over: never "a sync is running"
        handed = snapshot(graph)
    assert walked == []  # the check walked both folders and read their stored files
    assert _lock_is_free(synced)
    with ContextGraph.open(twin) as graph:
        plain = graph.sync()  # the same change, synced without a check before it
        assert snapshot(graph) == handed
    assert walked == ["other", "read", "vault", "read"]
    ran, expected = report.as_dict(), plain.as_dict()
    seconds = ran.pop("seconds")
    expected.pop("seconds")
    assert ran == expected and ran["files"]["updated"] == 1
    assert seconds["scan"] <= seconds["total"]  # the check's walks count as the sync's


def test_a_handed_lock_goes_to_a_sync_of_its_own_file_only(
    synced: Path, vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (vault / "new.md").write_text("[[Zeta]]", encoding="utf-8")
    other = _copy_database(synced, tmp_path / "other.db")
    assert unchanged.unchanged_report(synced, [], hand_over_to_sync=True) is None
    walked = _counting_scans(monkeypatch)
    try:
        with ContextGraph.open(other) as graph:  # another database: its own lock, its own walk
            assert graph.sync(wait=False).added == 1
        assert walked == ["other", "read", "vault", "read"]
        assert not _lock_is_free(synced)
        # The same database by another path: its lock taken over (never waited for), and
        # its walks with it.
        alias = tmp_path / "alias"
        alias.symlink_to(synced.parent, target_is_directory=True)
        with ContextGraph.open(alias / synced.name) as graph:
            assert graph.sync(wait=False).added == 1
        assert walked == ["other", "read", "vault", "read"]
        assert _lock_is_free(synced)
    finally:
        drop_handed()
    # Left, and never taken: dropping it frees the lock.
    (vault / "newer.md").write_text("[[Eta]]", encoding="utf-8")
    assert unchanged.unchanged_report(synced, [], hand_over_to_sync=True) is None
    assert not _lock_is_free(synced)
    drop_handed()
    assert _lock_is_free(synced)


def test_the_cli_walks_each_folder_once_when_its_check_finds_work(
    synced: Path, vault: Path, tmp_path: Path
) -> None:
    twin = _copy_database(synced, tmp_path / "twin.db")
    a = vault / "a.md"
    a.write_text(a.read_text(encoding="utf-8") + " [[Epsilon]]", encoding="utf-8")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        "import contextgraph.sync.scan as scan\n"
        "walked = []\n"
        "_scan = scan.scan\n"
        "def counted(root, **kwargs):\n"
        "    walked.append(str(root))\n"
        "    return _scan(root, **kwargs)\n"
        "scan.scan = counted\n"
        "atexit.register(lambda: print('walked', len(walked), file=sys.stderr))\n",
        encoding="utf-8",
    )
    env = {**os.environ, "CONTEXTGRAPH_NO_RESIDENT": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    outs = []
    for database, extra in ((synced, {}), (twin, {"CONTEXTGRAPH_FULL_SYNC": "1"})):
        done = subprocess.run(
            [sys.executable, "-m", "contextgraph", "--db", str(database), "sync", "--json"],
            capture_output=True,
            text=True,
            env={**env, **extra},
            cwd=tmp_path,
            check=True,
        )
        outs.append((_timeless(done.stdout), done.stderr.splitlines()[-1]))
    # Two folders: the check walks both, and the sync takes them; without the check, the
    # sync walks them itself. Either way the same report.
    assert outs[0] == (outs[1][0], "walked 2") and outs[1][1] == "walked 2"
    assert json.loads(outs[0][0])["files"]["updated"] == 1


def test_a_handed_walk_is_given_once_and_only_for_the_same_exclusions(db_path: Path) -> None:
    own = database_files(db_path)
    walk = ScanResult(files=[], problems=[("x.md", "binary file")])
    handed = (walk, 0.25, [(7, "a.md", "note", 3, 10, "ab")])
    hand_over(lock_file(db_path, wait=False), own, {(1, "/notes"): handed})
    assert handed_scan(1, Path("/notes"), own) is None  # no sync holds the handed lock yet
    with sync_lock(db_path, wait=False):
        assert handed_scan(1, Path("/notes"), own[1:]) is None
        assert handed_scan(2, Path("/notes"), own) is None
        assert handed_scan(1, Path("/notes"), own) == handed
        assert handed_scan(1, Path("/notes"), own) is None
    assert _lock_is_free(db_path)


def test_paths_the_os_refuses_go_to_the_full_run_without_a_traceback(tmp_path: Path) -> None:
    from contextgraph.__main__ import prestart_cold_load

    long_name = "x" * 300  # over NAME_MAX: every call on it fails with ENAMETOOLONG
    folder = tmp_path / "notes"
    folder.mkdir()
    for argv in (
        ["--db", str(tmp_path / f"{long_name}.db"), "sync", str(folder)],
        ["--db", str(tmp_path / "g.db"), "sync", str(tmp_path / long_name)],
        ["--db", str(tmp_path / "g.db"), "sync", "~nosuchuser-contextgraph/notes"],
    ):
        assert unchanged_sync(argv) is None, argv
        assert prestart_cold_load(argv) is False, argv


@pytest.mark.parametrize("redirect", [">/dev/full", ">&-"], ids=["disk full", "closed"])
def test_an_answer_that_cannot_be_written_is_one_line_or_nothing(
    tmp_path: Path, redirect: str
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("[[Alpha]] [[Beta]]\n", encoding="utf-8")
    database = tmp_path / "g.db"
    env = child_env(CONTEXTGRAPH_NO_RESIDENT="1")
    command = f'"{sys.executable}" -m contextgraph --db "{database}" sync "{folder}"'
    assert subprocess.run(command, shell=True, env=env, capture_output=True).returncode == 0
    done = subprocess.run(
        f"{command} {redirect}", shell=True, env=env, capture_output=True, text=True
    )
    if redirect == ">&-":  # as the CLI does: nothing to write to, nothing said
        assert (done.returncode, done.stderr) == (0, "")
    else:
        assert done.returncode == 1
        assert done.stderr == "Error: cannot write the answer: No space left on device\n"
