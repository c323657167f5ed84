"""``watch`` under hostile use (a hunt, stop 42): the store still ends as a fresh sync's, and
the watcher neither dies on a bad name nor makes a stop signal wait for a long sync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import snapshot
from test_watch import REPO, Running, hits, wait_for

from contextgraph import ContextGraph
from contextgraph.sync.lock import lock_file
from contextgraph.watch import Watcher


@pytest.fixture
def watched(store: ContextGraph, vault: Path) -> Iterator[tuple[ContextGraph, Path]]:
    (vault / "a.md").write_text("Alpha note [[Alpha]]\n", encoding="utf-8")
    store.sync([vault])
    yield store, vault


def stored(graph: ContextGraph) -> set[str]:
    return {uri.removeprefix("memory://vault/") for uri in hits(graph, "note")}


def test_a_name_the_watcher_cannot_decode_does_not_end_it(
    watched: tuple[ContextGraph, Path],
) -> None:
    graph, vault = watched
    (vault / ".hidden").mkdir()
    with Running(graph) as running:
        fd = os.open(os.fsencode(vault) + b"/.hidden/\xff.bin", os.O_CREAT | os.O_WRONLY)
        os.close(fd)
        time.sleep(1.0)
        (vault / "later.md").write_text("later note [[Later]]\n", encoding="utf-8")
        wait_for(lambda: "later.md" in stored(graph))
        assert running.thread.is_alive()


def test_a_folder_named_like_a_file_moved_away_is_retracted(
    watched: tuple[ContextGraph, Path], tmp_path: Path
) -> None:
    graph, vault = watched
    (vault / "Node.js").mkdir()
    (vault / "Node.js" / "loop.md").write_text("event loop note [[libuv]]\n", encoding="utf-8")
    with Running(graph):
        wait_for(lambda: "Node.js/loop.md" in stored(graph))
        (vault / "Node.js").rename(tmp_path / "elsewhere")
        wait_for(lambda: "Node.js/loop.md" not in stored(graph))
        (vault / "Three.js").mkdir()
        (vault / "Three.js" / "x.md").write_text("scene note [[WebGL]]\n", encoding="utf-8")
        wait_for(lambda: "Three.js/x.md" in stored(graph))
        (vault / "Three.js" / "x.md").unlink()
        (vault / "Three.js").rmdir()
        (vault / "Three.js").write_text("now a file\n", encoding="utf-8")  # a folder, then a file
        wait_for(lambda: "Three.js/x.md" not in stored(graph))


class _Deaf(Watcher):
    """A watcher that loses its first batch of events, as an overflowed kernel queue does."""

    lost = False

    def _apply(self, changes, roots):  # type: ignore[no-untyped-def]
        if not self.lost:
            self.lost = True
            return False
        return super()._apply(changes, roots)


def test_changes_no_event_told_are_synced_by_the_next_rescan(
    watched: tuple[ContextGraph, Path], tmp_path: Path
) -> None:
    graph, vault = watched
    with Running(graph) as running:
        running.watcher.__class__ = _Deaf
        running.watcher.rescan_seconds = 1.0
        (vault / "lost.md").write_text("lost note [[Lost]]\n", encoding="utf-8")
        wait_for(lambda: "lost.md" in stored(graph))
    with ContextGraph.open(tmp_path / "fresh.db", settings=graph.settings) as fresh:
        fresh.sync([vault])
        assert snapshot(graph) == snapshot(fresh)


def test_a_change_made_while_the_watcher_catches_up_is_synced(
    watched: tuple[ContextGraph, Path],
) -> None:
    graph, vault = watched
    once: list[bool] = []

    class Busy(Watcher):
        def _catch_up(self, source):  # type: ignore[no-untyped-def]
            super()._catch_up(source)
            if not once:  # a change right after the catch-up's walk, before any new watch
                once.append(True)
                (vault / "during.md").write_text("during note [[During]]\n", encoding="utf-8")

    stop = threading.Event()
    busy = Busy(graph, debounce_ms=300, step_ms=50, poll_seconds=0.2)
    thread = threading.Thread(target=busy.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: "during.md" in stored(graph))
    finally:
        stop.set()
        thread.join(timeout=20)


def test_a_database_file_replaced_under_the_watcher_ends_the_watch(
    watched: tuple[ContextGraph, Path], db_path: Path
) -> None:
    graph, vault = watched
    running = Running(graph)
    running.thread.start()
    try:
        wait_for(lambda: any(s.startswith("watching") for s in running.states))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db_path}{suffix}").unlink(missing_ok=True)
        with ContextGraph.open(db_path) as fresh:  # rebuilt from scratch, at the same path
            fresh.sync([vault])
        (vault / "two.md").write_text("second note [[Beta]]\n", encoding="utf-8")
        running.thread.join(timeout=30)
        assert not running.thread.is_alive()
        assert running.watcher.gone is not None and "was replaced" in running.watcher.gone
        assert running.states[-1] == running.watcher.gone
    finally:
        running.stop.set()
        running.thread.join(timeout=20)


def test_a_stop_ends_a_wait_for_the_lock_another_sync_holds(
    watched: tuple[ContextGraph, Path], db_path: Path
) -> None:
    graph, _vault = watched
    held = lock_file(db_path, wait=True)  # another process's sync, holding on
    running = Running(graph)
    try:
        running.thread.start()
        time.sleep(2.0)  # armed, its catch-up sync waits for the lock ("watching" comes after)
        assert running.thread.is_alive() and not running.states
        running.stop.set()
        running.thread.join(timeout=10)
        assert not running.thread.is_alive(), "the watcher waited on for the lock"
    finally:
        os.close(held)
        running.stop.set()
        running.thread.join(timeout=20)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_cuts_a_long_sync_short(
    vault: Path, db_path: Path, tmp_path: Path, sig: int
) -> None:
    body = "".join(f"para {j} with [[K{j % 97}]] and `code`\n\n" for j in range(60))
    for i in range(3000):
        (vault / f"n{i}.md").write_text(f"n{i} [[W{i % 100}]]\n{body}", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CONTEXTGRAPH_DB": str(db_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "watch", str(vault)],
        env={**env, "CONTEXTGRAPH_BATCH_FILES": "100"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: db_path.exists() and _files(db_path) > 0, timeout=60)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err and "stopped" in err
    assert proc.returncode == (130 if sig == signal.SIGINT else 0), err
    with ContextGraph.open(db_path) as graph:
        assert _files(db_path) < 3000  # stopped in the middle, not once the sync was done
        assert graph.doctor().ok
        graph.sync()
        assert graph.stats().files == {"note": 3000}


def _files(db_path: Path) -> int:
    import sqlite3

    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM files").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is still being made
        return 0


def test_a_read_only_database_is_refused_in_one_line(
    store: ContextGraph, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.errors import ReadOnlyDatabase
    from contextgraph.store import db

    store.sync([vault])
    path = store.database_path
    assert path is not None
    monkeypatch.setattr(db, "_writable", lambda _path: False)  # a 0444 file, as root cannot
    stop, raised = threading.Event(), []

    def run() -> None:
        try:
            Watcher(graph, poll_seconds=0.2).run(stop)
        except ReadOnlyDatabase as exc:
            raised.append(str(exc))

    with ContextGraph.open(path) as graph:
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(timeout=10)
        stop.set()  # a watcher that went on regardless stops here
        thread.join(timeout=20)
    assert raised == [f"the database at {path} is read-only: cannot watch folders for changes"]


def test_a_batch_that_failed_is_tried_again_without_a_traceback(
    watched: tuple[ContextGraph, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A batch whose sync fails (a lock held past the retries, a full disk) says so in one
    line, and its paths are synced at the next poll: no event comes for them again."""
    import contextgraph.watch as watch_module

    graph, vault = watched
    real = watch_module.sync_paths
    failures = [1]

    def failing_once(*args: object, **kwargs: object) -> object:
        if failures:
            failures.pop()
            raise sqlite_locked()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(watch_module, "sync_paths", failing_once)
    with Running(graph) as running:
        (vault / "b.md").write_text("Bravo note [[Bravo]]\n", encoding="utf-8")
        wait_for(lambda: "b.md" in stored(graph))
    failed = [s for s in running.states if s.startswith("sync of vault failed")]
    assert failed == ["sync of vault failed: OperationalError: database is locked; trying again"]
    assert "Traceback" not in capsys.readouterr().err


def sqlite_locked() -> Exception:
    import sqlite3

    from sqlalchemy.exc import OperationalError

    return OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))


def test_a_second_save_within_one_clock_tick_is_read(watched: tuple[ContextGraph, Path]) -> None:
    """Two saves of the same size within one tick of a coarse clock (FAT, SMB) leave size and
    mtime as stored: the watcher, told the file changed, reads it anyway."""
    graph, vault = watched
    note = vault / "a.md"
    with Running(graph):
        note.write_text("Draft note [[Alpha]] [[Draft]]\n", encoding="utf-8")
        wait_for(lambda: graph.read("a.md").concepts == ("alpha", "draft"))
        stat = note.stat()
        note.write_text("Final note [[Alpha]] [[Final]]\n", encoding="utf-8")  # same size
        os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
        wait_for(lambda: graph.read("a.md").concepts == ("alpha", "final"))


def test_a_note_saved_as_its_folder_is_renamed_keeps_its_place_and_history(
    watched: tuple[ContextGraph, Path], tmp_path: Path
) -> None:
    """The OS reports a change inside a renamed folder under the folder's old path; synced,
    it retracted a note that still exists, and its read history with it. The source is set
    aside instead, as a sync would, and comes back whole with its folder."""
    from sqlalchemy import text

    from contextgraph.store import db

    graph, vault = watched
    graph.read("a.md")  # read history to keep

    def files() -> dict[str, object]:
        with db.read(graph.engine) as conn:
            return dict(conn.execute(text("SELECT path, last_accessed FROM files")).all())

    read_at = files()["a.md"]
    assert read_at is not None
    moved = tmp_path / "moved"
    with Running(graph):
        vault.rename(moved)
        with (moved / "a.md").open("a", encoding="utf-8") as note:
            note.write("edited while its folder moved [[Edited]]\n")
        time.sleep(2.5)  # past the debounced batch of the edit (0.8 s) and a poll
        assert files() == {"a.md": read_at}
        moved.rename(vault)
        wait_for(lambda: graph.search("edited").total == 1)
    assert files() == {"a.md": read_at}
