"""No child outlives its parent: a sync killed mid-extraction leaves no worker behind (SPEC §12)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if fields[0] == "Z":  # a zombie is dead; it only waits for its parent to reap it
        return None
    return int(fields[1])


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _ppid(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _alive(pid: int) -> bool:
    return _ppid(pid) is not None


def _big_vault(root: Path, files: int = 3000) -> None:
    root.mkdir()
    body = " ".join(f"[[Concept {i}]] some words around it" for i in range(60))
    for i in range(files):
        (root / f"note-{i:05d}.md").write_text(f"# Note {i}\n\n{body} [[Only {i}]]\n")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_sync_killed_mid_extraction_leaves_no_worker_behind(
    tmp_path: Path, sig: signal.Signals
) -> None:
    vault = tmp_path / "vault"
    _big_vault(vault)
    env = {**os.environ, "CONTEXTGRAPH_WORKERS": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "--db", str(tmp_path / "g.db"), "sync", str(vault)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            workers = _descendants(proc.pid)
            if len(workers) >= 3:  # two extraction workers and the resource tracker
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the sync ended before its workers were seen"
        assert len(workers) >= 2, workers
        _kill_and_expect_none_outlive(proc, sig, workers)
    finally:
        _end_all(proc, workers)


def _kill_and_expect_none_outlive(
    proc: subprocess.Popen[bytes], sig: signal.Signals, children: set[int]
) -> None:
    """Send ``sig`` to the sync ``proc``; every one of ``children`` must be gone soon after."""
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in children):
        time.sleep(0.1)
    survivors = {p for p in children if _alive(p)}
    assert not survivors, f"processes outlived the killed sync: {survivors}"


def _end_all(proc: subprocess.Popen[bytes], children: set[int]) -> None:
    """Whatever a test saw: end ``proc`` and every process of its that is left."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in _descendants(proc.pid) | children:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_watch_parent_exits_a_process_whose_parent_is_gone() -> None:
    code = (
        "import os, time\n"
        "from contextgraph.sync.workers import watch_parent\n"
        "watch_parent(os.getppid() + 10_000_000)\n"  # not our parent: as if it had died
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], timeout=30)
    assert result.returncode == 1
    assert time.monotonic() - started < 20


SLOW_SITE = """\
import multiprocessing, os, time
import contextgraph.sync.ingest as ingest

_prepare = ingest.prepare

def prepare(job):
    with open(os.environ["EXTRACTED_LOG"], "a", encoding="utf-8") as out:
        out.write(multiprocessing.current_process().name + "\\n")
    time.sleep(0.005)  # slower than the writer: it waits, and a helper starts
    return _prepare(job)

ingest.prepare = prepare
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core extracts in-process")
def test_a_sync_killed_while_a_helper_extracts_leaves_no_process_behind(tmp_path: Path) -> None:
    from contextgraph.sync.workers import HELPER

    vault = tmp_path / "vault"
    _big_vault(vault, files=1500)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_SITE, encoding="utf-8")
    log = tmp_path / "extracted.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGRAPH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env["EXTRACTED_LOG"] = str(log)
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "--db", str(tmp_path / "g.db"), "sync", str(vault)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and HELPER in log.read_text(encoding="utf-8"):
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the sync ended before a helper was seen"
        children = _descendants(proc.pid)
        assert len(children) >= 3, children  # a worker, a helper and the resource tracker
        _kill_and_expect_none_outlive(proc, signal.SIGKILL, children)
    finally:
        _end_all(proc, children)


@pytest.mark.skipif(not hasattr(os, "nice"), reason="POSIX scheduling priority")
def test_a_helper_runs_at_a_lower_priority_than_the_sync_and_a_worker_does_not() -> None:
    from contextgraph.sync.workers import HELPER, HELPER_NICENESS, WORKER, process_pool

    ours = os.nice(0)
    for name, expected in ((WORKER, ours), (HELPER, min(19, ours + HELPER_NICENESS))):
        pool = process_pool(1, name)
        try:
            assert pool.submit(os.nice, 0).result(timeout=60) == expected, name
        finally:
            pool.shutdown()
