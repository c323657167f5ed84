"""``watch`` (SPEC §14): the store follows the folders as files change, one sync at a time."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import snapshot

from contextgraph import ContextGraph
from contextgraph.watch import Batch, Watcher

REPO = Path(__file__).resolve().parents[1]


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for the watcher")


class Running:
    """A watcher on a thread, with every batch and state message it reported."""

    def __init__(self, graph: ContextGraph, **options: object) -> None:
        self.batches: list[Batch] = []
        self.states: list[str] = []
        self.stop = threading.Event()
        self.watcher = Watcher(
            graph,
            debounce_ms=int(options.get("debounce_ms", 800)),  # type: ignore[call-overload]
            step_ms=50,
            poll_seconds=0.2,
            on_batch=self.batches.append,
            on_state=self.states.append,
        )
        self.thread = threading.Thread(target=self.watcher.run, args=(self.stop,), daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        wait_for(lambda: any(s.startswith(("watching", "another")) for s in self.states))
        time.sleep(0.2)  # let the OS watch settle before the test changes files
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=20)
        assert not self.thread.is_alive(), "the watcher did not stop"


def hits(graph: ContextGraph, query: str) -> list[str]:
    return [h.uri for h in graph.search(query).hits]


@pytest.fixture
def watched(store: ContextGraph, vault: Path) -> Iterator[tuple[ContextGraph, Path]]:
    (vault / "a.md").write_text("Alpha note [[Alpha]]\n", encoding="utf-8")
    store.sync([vault])
    yield store, vault


def test_an_editor_style_save_is_visible(watched: tuple[ContextGraph, Path]) -> None:
    graph, vault = watched
    with Running(graph):
        tmp = vault / ".a.md.swp"
        tmp.write_text("Alpha note rewritten [[Alpha]] [[Saved]]\n", encoding="utf-8")
        os.replace(tmp, vault / "a.md")  # how vim, VS Code and most editors save
        wait_for(lambda: hits(graph, "rewritten") == ["memory://vault/a.md"])
        assert graph.read("a.md").concepts == ("alpha", "saved")


def test_a_rename_is_a_rename_that_keeps_the_read_time(
    watched: tuple[ContextGraph, Path],
) -> None:
    graph, vault = watched
    before = graph.read("a.md", now="2026-11-29T00:00:00+00:00").last_accessed
    with Running(graph) as running:
        (vault / "a.md").rename(vault / "b.md")
        wait_for(lambda: hits(graph, "alpha") == ["memory://vault/b.md"])
        assert sum(b.report.renamed for b in running.batches) == 1
        assert sum(b.report.added for b in running.batches) == 0
    assert graph.read("b.md", now="2020-01-01T00:00:00+00:00").last_accessed == before


@pytest.mark.slow
def test_a_burst_of_a_thousand_files_is_a_batch_not_a_thousand_syncs(
    watched: tuple[ContextGraph, Path],
) -> None:
    graph, vault = watched
    burst = vault / "burst"
    burst.mkdir()
    with Running(graph, debounce_ms=1600) as running:
        for i in range(1000):
            (burst / f"n{i}.md").write_text(f"burst note {i} [[Burst]] [[B{i % 10}]]\n")
        wait_for(lambda: graph.search("burst").total == 1000, timeout=60)
        assert len(running.batches) <= 5, [b.paths for b in running.batches]
    assert graph.doctor().ok


def test_a_folder_deleted_and_recreated_is_followed(watched: tuple[ContextGraph, Path]) -> None:
    graph, vault = watched
    (vault / "sub").mkdir()
    (vault / "sub" / "x.md").write_text("Inner [[Inner]]\n")
    graph.sync()
    with Running(graph):
        shutil.rmtree(vault / "sub")
        wait_for(lambda: hits(graph, "inner") == [])
        (vault / "sub").mkdir()
        (vault / "sub" / "y.md").write_text("Reborn [[Inner]]\n")
        wait_for(lambda: hits(graph, "reborn") == ["memory://vault/sub/y.md"])
        # the source folder itself: gone, then back with other notes
        shutil.rmtree(vault)
        time.sleep(0.5)
        vault.mkdir()
        (vault / "fresh.md").write_text("Fresh start [[Fresh]]\n")
        wait_for(lambda: hits(graph, "fresh") == ["memory://vault/fresh.md"])
        wait_for(lambda: hits(graph, "reborn") == [])


def test_a_source_folder_that_goes_away_is_said_once_and_watched_again_when_back(
    watched: tuple[ContextGraph, Path], tmp_path: Path
) -> None:
    graph, vault = watched
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.md").write_text("Other note [[Other]]\n", encoding="utf-8")
    graph.sync([other], name="other")

    def gone_lines(states: list[str]) -> list[str]:
        return [s for s in states if s.startswith("the folder of source 'other'")]

    with Running(graph) as running:
        moved = tmp_path / "moved"
        other.rename(moved)
        wait_for(lambda: len(gone_lines(running.states)) == 1)
        assert f"({other}) is gone" in gone_lines(running.states)[0]
        (vault / "b.md").write_text("Beta note [[Beta]]\n", encoding="utf-8")  # still watched
        wait_for(lambda: hits(graph, "beta") == ["memory://vault/b.md"])
        assert hits(graph, "other") == ["memory://other/o.md"]  # kept, as a sync keeps it
        assert len(gone_lines(running.states)) == 1  # said once, not at every poll
        moved.rename(other)
        (other / "p.md").write_text("Pleased note [[Other]]\n", encoding="utf-8")
        wait_for(lambda: hits(graph, "pleased") == ["memory://other/p.md"])
        shutil.rmtree(other)
        wait_for(lambda: len(gone_lines(running.states)) == 2)  # gone again: said again


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_checkout_of_another_branch_leaves_the_store_as_a_fresh_sync(
    watched: tuple[ContextGraph, Path], tmp_path: Path
) -> None:
    graph, vault = watched

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=vault,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "main")
    git("checkout", "-q", "-b", "other")
    (vault / "a.md").write_text("Alpha on the other branch [[Alpha]] [[Branch]]\n")
    for i in range(20):
        (vault / "docs" / f"d{i}").mkdir(parents=True, exist_ok=True)
        (vault / "docs" / f"d{i}" / "n.md").write_text(f"Doc {i} [[Docs]] [[D{i}]]\n")
    git("add", "-A")
    git("commit", "-q", "-m", "other")
    git("checkout", "-q", "main")
    graph.sync()
    with Running(graph):
        git("checkout", "-q", "other")
        wait_for(lambda: graph.search("doc").total == 20 and hits(graph, "branch") != [])
        time.sleep(1.0)  # any straggling event
        fresh = ContextGraph.open(tmp_path / "fresh.db")
        fresh.sync([vault])
        assert snapshot(graph) == snapshot(fresh)
        git("checkout", "-q", "main")
        wait_for(lambda: graph.search("doc").total == 0)
        time.sleep(1.0)
        fresh.close()
        fresh = ContextGraph.open(tmp_path / "fresh2.db")
        fresh.sync([vault])
        assert snapshot(graph) == snapshot(fresh)
        fresh.close()


@pytest.mark.engines("sqlite", "postgresql")
def test_a_second_watcher_stands_by_and_takes_over(
    watched: tuple[ContextGraph, Path], db_url: str
) -> None:
    """A file lock beside an SQLite file; a session-level advisory lock on a PostgreSQL
    server (where two watchers both synced every change before)."""
    graph, vault = watched
    other = ContextGraph.open(db_url)
    first = Running(graph)
    with first:
        second = Running(other)
        with second:
            assert "another watcher is active on this database: standing by" in second.states
            (vault / "c.md").write_text("Charlie [[C]]\n")
            wait_for(lambda: hits(graph, "charlie") != [])
            time.sleep(0.5)
            assert second.batches == [], "the standing-by watcher synced too"
            first.stop.set()
            first.thread.join(timeout=20)
            wait_for(lambda: any("taking over" in s for s in second.states))
            wait_for(lambda: any(s.startswith("watching") for s in second.states))
            time.sleep(0.3)
            (vault / "d.md").write_text("Delta [[D]]\n")
            wait_for(lambda: hits(graph, "delta") != [])
    other.close()


def test_a_new_source_registered_elsewhere_is_watched_too(
    watched: tuple[ContextGraph, Path], tmp_path: Path
) -> None:
    graph, _vault = watched
    second = tmp_path / "second"
    second.mkdir()
    with Running(graph) as running:
        graph.sync([second])
        wait_for(lambda: any("second" in s for s in running.states))
        time.sleep(0.3)
        (second / "s.md").write_text("Second source [[S]]\n")
        wait_for(lambda: hits(graph, "second") == ["memory://second/s.md"])


# -- the command -----------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to list children")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_the_watch_command_stops_cleanly_on_a_signal(
    vault: Path, db_path: Path, tmp_path: Path, sig: int, code: int
) -> None:
    (vault / "a.md").write_text("Alpha [[A]]\n")
    proc = _watch_command(vault, db_path, tmp_path)
    try:
        graph = ContextGraph.open(db_path)
        wait_for(lambda: db_path.exists() and graph.sources() != [] and hits(graph, "alpha") != [])
        # a burst big enough for the process pool, so a sync with children may be running
        for i in range(500):
            (vault / f"n{i}.md").write_text(f"note {i} [[N]]\n")
        time.sleep(0.5)
        children = _children(proc.pid)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert "stopped" in err
    # Workers and the resource tracker notice their parent is gone within moments (a death
    # signal, a watchdog, a closed pipe); none may linger past that.
    wait_for(
        lambda: all(
            not os.path.exists(f"/proc/{child}") or _is_zombie_of_other(child) for child in children
        ),
        timeout=10.0,
    )
    assert graph.doctor().ok
    graph.close()


def _watch_command(vault: Path, db_path: Path, cwd: Path) -> subprocess.Popen[str]:
    """``contextgraph watch VAULT`` in a process of its own, its output piped."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CONTEXTGRAPH_DB": str(db_path)}
    return subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "watch", str(vault), "--debounce-ms", "300"],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _is_zombie_of_other(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_the_watch_command_says_which_files_failed_and_why(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    (vault / "a.md").write_text("Alpha [[A]]\n")
    proc = _watch_command(vault, db_path, tmp_path)
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.extend(proc.stdout or []), daemon=True),
        threading.Thread(target=lambda: err.extend(proc.stderr or []), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        wait_for(lambda: any(line.startswith("watching") for line in err))
        (vault / "bad.md").write_bytes(b"binary \x00 note [[B]]\n")
        wait_for(lambda: any("failed: vault/bad.md" in line for line in err))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    for reader in readers:
        reader.join(timeout=10)
    assert any(line.startswith("synced vault: 1 failed") for line in out), out
    assert [line for line in err if line.startswith("failed:")] == [
        "failed: vault/bad.md: binary file (contains NUL bytes)\n"
    ]
