"""Several processes on one database (SPEC §3, §12): no "database is locked", nothing lost.

The soak itself lives in ``scripts/soak.py``; a short run of it is part of the default suite and a
longer one is marked ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import child_env, run_script, write_numbered_notes
from sqlalchemy import text

from contextgraph import ContextGraph, Settings, SyncInProgress
from contextgraph.cli import cli
from contextgraph.settings import parse_datetime
from contextgraph.store import db

REPO = Path(__file__).resolve().parents[1]


def _assert_clean(result: dict[str, Any]) -> None:
    assert result["errors"] == [] and result["error_count"] == 0, result["errors"]
    assert result["locked_errors"] == 0
    assert result["lost_reads"] == 0, result["lost_examples"]
    assert result["integrity"] == "ok"
    assert result["doctor_ok"] is True
    assert result["converged"] is True
    assert result["communities_converged"] is True, result["communities"]
    assert result["idle_after_final_sync"] is True
    assert result["ops"].get("sync", 0) >= 1
    assert result["ops"].get("read", 0) >= 1
    assert result["reads_acknowledged"] == result["ops"]["read"]


@pytest.mark.slow
def test_short_soak_surfaces_no_error_loses_no_read_and_converges(tmp_path: Path) -> None:
    argv = ["--writers", "2", "--readers", "2", "--seconds", "6", "--notes", "40"]
    result = run_script("soak", *argv, "--workdir", str(tmp_path / "soak"))
    _assert_clean(result)
    for kind in ("context", "expand", "search", "editor_edit"):
        assert result["ops"].get(kind, 0) >= 1, kind


@pytest.mark.slow
def test_long_soak_surfaces_no_error_loses_no_read_and_converges(tmp_path: Path) -> None:
    argv = ["--writers", "3", "--readers", "3", "--seconds", "30", "--notes", "200"]
    _assert_clean(run_script("soak", *argv, "--workdir", str(tmp_path / "soak")))


# -- reads during a sync ---------------------------------------------------------------------


@pytest.mark.engines("sqlite", "postgresql")
@pytest.mark.parametrize("busy_timeout_ms", [5000, 1], ids=["busy-timeout", "retry-loop"])
def test_reads_of_one_note_during_a_sync_never_see_database_is_locked(
    tmp_path: Path, busy_timeout_ms: int, db_url: str
) -> None:
    vault = tmp_path / "vault"
    database = db_url
    write_numbered_notes(vault, 160)
    with ContextGraph.open(database) as graph:
        graph.sync([vault])
    write_numbered_notes(vault, 160, tag="edited")  # every note changes: the sync rewrites them all
    target = "memory://vault/f0/note-0000.md"
    settings = Settings.from_env(busy_timeout_ms=busy_timeout_ms)
    graphs = [ContextGraph.open(database, settings=settings) for _ in range(2)]
    errors: list[str] = []
    acknowledged: list[float] = []
    overlapping = [0]
    lock = threading.Lock()
    # Batches of two files: about 80 write transactions for the readers to collide with.
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "--db", str(database), "sync", "--json"],
        env=child_env(CONTEXTGRAPH_BATCH_FILES="2", CONTEXTGRAPH_WORKERS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def loop(graph: ContextGraph) -> None:
        reads = 0
        while proc.poll() is None or reads < 5:
            before = time.time()
            try:
                graph.read(target)
            except Exception as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            reads += 1
            with lock:
                acknowledged.append(before)
                if proc.poll() is None:
                    overlapping[0] += 1

    threads = [threading.Thread(target=loop, args=(g,)) for g in graphs]
    for thread in threads:
        thread.start()
    _, err = proc.communicate(timeout=300)
    for thread in threads:
        thread.join(60)
    for graph in graphs:
        graph.close()
    assert proc.returncode == 0, err
    assert errors == []
    assert overlapping[0] > 0
    with ContextGraph.open(database) as graph:
        with db.read(graph.engine) as conn:
            last = conn.execute(
                text("SELECT last_accessed FROM files WHERE path = 'f0/note-0000.md'")
            ).scalar_one()
        assert last is not None and last >= max(acknowledged)
        assert graph.doctor().ok
        assert "edited" in graph.read(target).content  # the sync's update landed too


# -- one sync at a time ----------------------------------------------------------------------

_HOLD_SYNC_LOCK = """
import sys, time
from pathlib import Path
from contextgraph.sync.run import sync_lock
with sync_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def lock_holder(db_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the database's sync lock (as a running sync does) for 30 s."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_SYNC_LOCK, str(db_path), "30"],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_sync_without_wait_raises_sync_in_progress_while_another_process_syncs(
    db_path: Path, vault: Path, lock_holder: subprocess.Popen[str]
) -> None:
    (vault / "a.md").write_text("[[Alpha]] [[Beta]]", encoding="utf-8")
    with ContextGraph.open(db_path) as graph:
        with pytest.raises(SyncInProgress):
            graph.sync([vault], wait=False)
        runner = CliRunner()
        result = runner.invoke(cli, ["--db", str(db_path), "sync", str(vault), "--no-wait"])
        assert result.exit_code == 1
        assert "running" in result.output
        assert "Traceback" not in result.output
        lock_holder.kill()
        lock_holder.wait()
        report = graph.sync(wait=False)
        assert report.added == 1


def test_a_waiting_sync_starts_when_the_other_process_releases_the_lock(
    db_path: Path, vault: Path
) -> None:
    (vault / "a.md").write_text("[[Alpha]] [[Beta]]", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_SYNC_LOCK, str(db_path), "1.5"],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    started = time.monotonic()
    with ContextGraph.open(db_path) as graph:
        report = graph.sync([vault])
    waited = time.monotonic() - started
    proc.wait(30)
    assert report.added == 1
    assert waited >= 0.5


# -- a writer holding the lock -----------------------------------------------------------------

_HOLD_WRITE_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE files SET size = size")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
conn.close()
"""


def _hold_write_lock(database: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_WRITE_LOCK, str(database), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.parametrize("busy_timeout_ms", [5000, 50], ids=["busy-timeout", "retry-loop"])
def test_a_read_waits_for_a_writer_holding_the_lock_and_succeeds(
    db_path: Path, vault: Path, busy_timeout_ms: int
) -> None:
    (vault / "a.md").write_text("[[Alpha]] [[Beta]]", encoding="utf-8")
    settings = Settings.from_env(busy_timeout_ms=busy_timeout_ms)
    with ContextGraph.open(db_path, settings=settings) as graph:
        graph.sync([vault])
        waits_before = db.lock_stats.waits
        proc = _hold_write_lock(db_path, 2.0)
        started = time.monotonic()
        before = time.time()
        note = graph.read("a.md")
        waited = time.monotonic() - started
        proc.wait(30)
        assert proc.returncode == 0
        assert waited >= 1.0  # it really waited for the writer ...
        assert note.content == "[[Alpha]] [[Beta]]"  # ... and then succeeded
        assert db.lock_stats.waits > waits_before
        with db.read(graph.engine) as conn:
            stored = conn.execute(text("SELECT last_accessed FROM files")).scalar_one()
        assert stored is not None and stored >= before


def test_queries_do_not_wait_for_a_writer_holding_the_lock(db_path: Path, vault: Path) -> None:
    (vault / "a.md").write_text("[[Alpha]] [[Beta]] words to find", encoding="utf-8")
    (vault / "b.md").write_text("[[Alpha]] [[Gamma]]", encoding="utf-8")
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
        proc = _hold_write_lock(db_path, 3.0)
        try:
            started = time.monotonic()
            assert [r.name for r in graph.build_context("Alpha").direct_relations] == [
                "beta",
                "gamma",
            ]
            assert graph.expand(["alpha"]).results
            assert graph.search("words").total == 1
            assert "flowchart" in graph.visualize("alpha")
            assert graph.doctor().ok
            assert time.monotonic() - started < 1.5  # WAL: readers never wait for the writer
        finally:
            proc.wait(30)


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path: Path) -> None:
    database = tmp_path / "new.db"
    procs = [
        subprocess.Popen(
            # `init` creates the database (query commands refuse a missing one, SPEC §12)
            [sys.executable, "-m", "contextgraph", "--db", str(database), "init"],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = [(p.wait(120), p.stderr.read() if p.stderr else "") for p in procs]
    for proc in procs:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert outcomes == [(0, "")] * 2
    with ContextGraph.open(database) as graph:
        assert db.current_revision(graph.engine) == db.SCHEMA_HEAD


# -- answers cached in one process follow what other processes write ---------------------------

NOW = "2026-11-30T12:00:00+00:00"


_CHANGE_THEN_ASK = """
import json, sys
from contextgraph import ContextGraph, Settings
from contextgraph.settings import parse_datetime
database, action, now = sys.argv[1], sys.argv[2], parse_datetime(sys.argv[3])
with ContextGraph.open(database, settings=Settings.from_env(now=now)) as graph:
    if action == "sync":
        graph.sync()
    else:
        graph.read(action)
    print(json.dumps(graph.build_context("alpha").as_dict()))
"""


def _change_then_ask(database: Path | str, action: str) -> dict[str, Any]:
    """In a fresh process (nothing cached): ``sync`` or ``read`` a note, then BuildContext."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHANGE_THEN_ASK, str(database), action, NOW],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.engines("sqlite", "postgresql")
def test_a_cached_answer_follows_reads_and_syncs_of_other_processes(
    db_url: str, vault: Path
) -> None:
    old = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
    for name, body in (("a.md", "[[Alpha]] [[Beta]]"), ("b.md", "[[Alpha]] [[Gamma]]")):
        (vault / name).write_text(body, encoding="utf-8")
        os.utime(vault / name, (old, old))
    settings = Settings.from_env(now=parse_datetime(NOW))
    with ContextGraph.open(db_url, settings=settings) as graph:
        graph.sync([vault])

        def warm() -> dict[str, Any]:
            answer: dict[str, Any] = json.loads(json.dumps(graph.build_context("alpha").as_dict()))
            return answer

        first = warm()
        assert {r["name"]: r["decayWeight"] < 0.1 for r in first["directRelations"]} == {
            "beta": True,
            "gamma": True,
        }
        cold = _change_then_ask(db_url, "a.md")  # another process reads a.md: it is fresh now
        assert warm() == cold
        assert {r["name"]: r["decayWeight"] for r in warm()["directRelations"]}["beta"] == 1.0
        (vault / "b.md").write_text("[[Alpha]] [[Delta]] edited", encoding="utf-8")
        cold = _change_then_ask(db_url, "sync")  # another process syncs an edit
        assert warm() == cold
        assert {r["name"] for r in warm()["directRelations"]} == {"beta", "delta"}


def test_a_database_rebuilt_at_the_same_path_is_not_answered_from_the_old_one(
    db_path: Path, vault: Path
) -> None:
    """Drop the database and sync again (as after a corrupt or deleted file): a process that
    answered from the old file must not serve those answers for the new one."""
    note = vault / "a.md"
    note.write_text("[[Alpha]] [[Beta]]", encoding="utf-8")
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
        assert [r.name for r in graph.build_context("alpha").direct_relations] == ["beta"]
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    note.write_text("[[Alpha]] [[Gamma]]", encoding="utf-8")
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
        assert [r.name for r in graph.build_context("alpha").direct_relations] == ["gamma"]
