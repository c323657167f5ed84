"""A sync's worker processes never hang it and never lose it to one bad file (SPEC §3, §12).

Each test runs the sync in a child process: a ``sitecustomize.py`` put on its ``PYTHONPATH``
reaches that process tree only (the workers inherit the environment), and there it makes the
extraction of chosen files kill the worker (SIGKILL), or keeps every worker from starting.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import textwrap
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pytest

from contextgraph import ContextGraph, Settings
from contextgraph.sync.workers import CHUNK, HELPER, MAX_CHUNK, WORKER, chunk_bounds
from tests.helpers import child_env, snapshot

FILES = 450  # over POOL_THRESHOLD: the sync extracts in worker processes
KILL_ON = ("note-00040.md", "note-00311.md")  # in different chunks of the pool


def _vault(root: Path, files: int = FILES) -> Path:
    root.mkdir()
    for i in range(files):
        (root / f"note-{i:05d}.md").write_text(
            f"# Note {i}\n\n[[Topic {i % 17}]] and [[Topic {(i * 7) % 23}]] [[Only {i}]]\n",
            encoding="utf-8",
        )
    return root


def _site(folder: Path, body: str) -> Path:
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return folder


def _killing_site(folder: Path, names: tuple[str, ...]) -> Path:
    """Make ``prepare`` SIGKILL its own (worker) process on the files called ``names``."""
    return _site(
        folder,
        f"""
        import os, signal
        import contextgraph.sync.ingest as ingest

        _prepare = ingest.prepare

        def prepare(job):
            if os.path.basename(job.path) in {names!r}:
                os.kill(os.getpid(), signal.SIGKILL)
            return _prepare(job)

        ingest.prepare = prepare
        """,
    )


def _cli_sync(
    database: Path, vault: Path | list[Path], site: Path | None, timeout: float = 300
) -> Any:
    env = child_env(CONTEXTGRAPH_WORKERS="2")
    if site is not None:
        env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    folders = [str(folder) for folder in (vault if isinstance(vault, list) else [vault])]
    done = subprocess.run(
        [sys.executable, "-m", "contextgraph", "--db", str(database), "sync", "--json", *folders],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout)


def _inline_store(database: Path, vault: Path, name: str = "vault") -> dict[str, object]:
    with ContextGraph.open(database, settings=Settings(workers=1)) as graph:
        graph.sync([vault], name=name)
        return snapshot(graph)


def _sync_in_a_child(database: str, vault: str) -> None:
    with ContextGraph.open(database) as graph:
        graph.sync([vault])


LIBRARY_SYNC = """\
import sys
from contextgraph import ContextGraph

if __name__ == "__main__":
    with ContextGraph.open(sys.argv[1]) as graph:
        graph.sync([sys.argv[2]])
"""


def test_a_cold_load_starts_its_workers_before_or_while_it_scans(tmp_path: Path) -> None:
    """Into an empty store every file found is read. A CLI sync into a database yet to be
    created starts its pool before it loads the library, once a walk has found enough files
    for one; the library's sync starts it once its scan has found them, before the scan ends.
    A later sync of as many changed files starts its pool as before, when its jobs are known;
    a cold load of few files starts none. The store is the same either way."""
    vault = _vault(tmp_path / "vault")
    log = tmp_path / "events.log"
    site = _site(
        tmp_path / "site",
        f"""
        import contextgraph.sync.scan as scan_module
        import contextgraph.sync.workers as workers

        def log(event):
            with open({str(log)!r}, "a", encoding="utf-8") as out:
                out.write(event + "\\n")

        _scan, _started = scan_module.scan, workers.started_pool

        def scan(*args, **kwargs):
            log("walk")
            result = _scan(*args, **kwargs)
            log("scanned")
            return result

        def started_pool(count):
            log("pool started early")
            return _started(count)

        scan_module.scan, workers.started_pool = scan, started_pool
        import contextgraph.sync.run as run  # after the patches: it takes scan by name
        run.scan = scan
        """,
    )
    first = _cli_sync(tmp_path / "g.db", vault, site)
    assert first["files"]["added"] == FILES
    # The CLI's walk that counts (ended once it found enough), the pool, then the sync's scan.
    events = log.read_text(encoding="utf-8").splitlines()
    assert events == ["walk", "pool started early", "walk", "scanned"]
    with ContextGraph.open(tmp_path / "g.db") as graph:
        assert snapshot(graph) == _inline_store(tmp_path / "inline.db", vault)

    log.unlink()
    script = tmp_path / "library_sync.py"
    script.write_text(LIBRARY_SYNC, encoding="utf-8")
    env = child_env(CONTEXTGRAPH_WORKERS="2")
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "library.db"), str(vault)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert log.read_text(encoding="utf-8").splitlines() == ["walk", "pool started early", "scanned"]
    with ContextGraph.open(tmp_path / "library.db") as graph:
        assert snapshot(graph) == _inline_store(tmp_path / "inline2.db", vault)

    log.unlink()
    for note in vault.iterdir():
        note.write_text(note.read_text(encoding="utf-8") + "[[Edited]]\n", encoding="utf-8")
    again = _cli_sync(tmp_path / "g.db", vault, site)
    assert again["files"]["updated"] == FILES
    events = log.read_text(encoding="utf-8").splitlines()  # the CLI's no-change check scans
    assert events and set(events) == {"walk", "scanned"}

    log.unlink()
    few = _vault(tmp_path / "few", files=20)
    assert _cli_sync(tmp_path / "few.db", few, site)["files"]["added"] == 20
    assert "pool started early" not in log.read_text(encoding="utf-8").splitlines()


def test_a_file_that_kills_its_worker_is_reported_failed_and_the_sync_goes_on(
    tmp_path: Path,
) -> None:
    vault = _vault(tmp_path / "vault")
    site = _killing_site(tmp_path / "site", KILL_ON)
    report = _cli_sync(tmp_path / "g.db", vault, site)
    reason = f"its extraction killed the worker process (signal {int(signal.SIGKILL)})"
    assert report["failed"] == [{"source": "vault", "path": p, "reason": reason} for p in KILL_ON]
    assert report["files"]["added"] == FILES - len(KILL_ON)
    assert report["warnings"] == []
    # The store is exactly what a sync without the two files gives.
    without = tmp_path / "without"
    without.mkdir()
    for path in sorted(vault.iterdir()):
        if path.name not in KILL_ON:
            (without / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    with ContextGraph.open(tmp_path / "g.db") as graph:
        assert snapshot(graph) == _inline_store(tmp_path / "expected.db", without)
    # Once the files no longer kill anything, the next sync takes them: it converges.
    again = _cli_sync(tmp_path / "g.db", vault, None)
    assert again["failed"] == []
    assert again["files"]["added"] == len(KILL_ON)
    with ContextGraph.open(tmp_path / "g.db") as graph:
        assert snapshot(graph) == _inline_store(tmp_path / "inline.db", vault)


def test_workers_that_cannot_start_leave_the_extraction_to_the_sync_itself(
    tmp_path: Path,
) -> None:
    vault = _vault(tmp_path / "vault")
    site = _site(
        tmp_path / "site",
        """
        import os, sys
        if "--multiprocessing-fork" in sys.argv:  # a spawned child: dies before it is of use
            os._exit(3)
        """,
    )
    report = _cli_sync(tmp_path / "g.db", vault, site)
    assert report["failed"] == []
    assert report["files"]["added"] == FILES
    [warning] = report["warnings"]
    assert warning["path"] == "."
    assert warning["reason"].startswith(
        "worker processes could not be used: a worker process ended while starting (exit code 3)"
    )
    with ContextGraph.open(tmp_path / "g.db") as graph:
        assert snapshot(graph) == _inline_store(tmp_path / "inline.db", vault)


UNGUARDED = """\
import json, sys
from contextgraph import ContextGraph

report = ContextGraph.open(sys.argv[1]).sync([sys.argv[2]])
print(json.dumps(report.as_dict()))
"""


def test_an_unguarded_script_that_syncs_does_not_hang(tmp_path: Path) -> None:
    """Spawned workers re-import the main script: its top-level sync must fail there at once."""
    vault = _vault(tmp_path / "vault")
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "g.db"), str(vault)],
        env=child_env(CONTEXTGRAPH_WORKERS="2"),
        capture_output=True,
        text=True,
        timeout=240,  # it used to hang for ever: each worker waited for the sync lock
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'put that code under `if __name__ == "__main__":`' in done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == []
    assert report["files"]["added"] == FILES
    [warning] = report["warnings"]
    assert warning["reason"].startswith(
        "worker processes could not be used: a worker process ended while starting (exit code 1)"
    )
    assert 'guard that code with `if __name__ == "__main__":`' in warning["reason"]
    with ContextGraph.open(tmp_path / "g.db") as graph:
        assert snapshot(graph) == _inline_store(tmp_path / "inline.db", vault)


def test_a_guarded_script_still_extracts_in_worker_processes(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "vault")
    script = tmp_path / "guarded.py"
    body = UNGUARDED.split("\n\n", 1)[1]
    script.write_text(
        UNGUARDED.split("\n\n", 1)[0]
        + '\n\nif __name__ == "__main__":\n'
        + textwrap.indent(body, "    "),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "g.db"), str(vault)],
        env=child_env(CONTEXTGRAPH_WORKERS="2"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    report = json.loads(done.stdout)
    assert (report["failed"], report["warnings"]) == ([], [])
    assert report["files"]["added"] == FILES


def test_a_worker_process_past_its_start_up_may_sync(tmp_path: Path) -> None:
    """Only a process still starting is refused: a multiprocessing child's own work may sync."""
    vault = _vault(tmp_path / "vault", files=3)
    child = get_context("spawn").Process(
        target=_sync_in_a_child, args=(str(tmp_path / "g.db"), str(vault))
    )
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    with ContextGraph.open(tmp_path / "g.db") as graph:
        assert snapshot(graph) == _inline_store(tmp_path / "inline.db", vault)


ORDER = """\
import json, os, sys
from contextgraph.sync.ingest import Job, prepare
from contextgraph.sync.workers import prepare_in_pool

if __name__ == "__main__":
    root = sys.argv[1]
    jobs = [Job(n, os.path.join(root, n), "note", None, 10**6) for n in sorted(os.listdir(root))]
    notes = []
    got = [tuple(p) for p in prepare_in_pool(jobs, 2, notes.append)]
    killed = set(sys.argv[2:])
    want = [tuple(prepare(j)) for j in jobs if j.path not in killed]
    print(json.dumps({"paths": [p[0] for p in got], "notes": notes,
                      "same": [p for p in got if p[0] not in killed] == want,
                      "failed": [(p[0], p[3]) for p in got if p[2] == "failed"]}))
"""


def test_chunks_shrink_toward_the_end_of_a_large_extraction() -> None:
    for count in (0, 1, 31, 450, 1024, 1025, 4138, 13415, 100_000):
        bounds = chunk_bounds(count)
        sizes = [end - start for start, end in itertools.pairwise(bounds)]
        assert bounds[0] == 0 and bounds[-1] == count and all(size > 0 for size in sizes)
        assert all(CHUNK <= size <= MAX_CHUNK for size in sizes[:-1])
        assert sizes == sorted(sizes, reverse=True)
        if count <= 1024:
            assert sizes[:-1] == [CHUNK] * (len(sizes) - 1)  # a small sync: as before
        else:
            assert sizes[-2] == CHUNK  # what is left at the end goes in small chunks
    assert chunk_bounds(13415)[1] == MAX_CHUNK


# 1,300 files: chunks of 41, 39, ... (chunk_bounds), a killed file's chunk is not 32 long.
@pytest.mark.parametrize("files", [FILES, 1300])
def test_results_reach_the_writer_in_job_order_when_the_pool_broke(
    tmp_path: Path, files: int
) -> None:
    vault = _vault(tmp_path / "vault", files)
    site = _killing_site(tmp_path / "site", KILL_ON)
    script = tmp_path / "order.py"
    script.write_text(ORDER, encoding="utf-8")
    env = child_env()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    done = subprocess.run(
        [sys.executable, str(script), str(vault), *KILL_ON],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["paths"] == sorted(p.name for p in vault.iterdir())
    assert result["same"] is True  # every other file's result is what prepare gives in-process
    reason = f"its extraction killed the worker process (signal {int(signal.SIGKILL)})"
    assert result["failed"] == [[p, reason] for p in KILL_ON]
    assert result["notes"] == []


SPAWN_RACE = """\
import json, os, sys
from concurrent.futures import ProcessPoolExecutor
from contextgraph.sync.ingest import Job, prepare
from contextgraph.sync.workers import prepare_in_pool, started_pool

spawned = []
_spawn = ProcessPoolExecutor._spawn_process

def spawn(self):
    spawned.append(1)
    if len(spawned) > 1:  # what Python 3.11's race gives a submit while a broken pool closes
        raise ValueError("bad value(s) in fds_to_keep")
    _spawn(self)

ProcessPoolExecutor._spawn_process = spawn

if __name__ == "__main__":
    root = sys.argv[1]
    jobs = [Job(n, os.path.join(root, n), "note", None, 10**6) for n in sorted(os.listdir(root))]
    notes = []
    pool = started_pool(2)
    got = [tuple(p) for p in prepare_in_pool(jobs, 2, notes.append, pool=pool)]
    want = [tuple(prepare(j)) for j in jobs]
    print(json.dumps({"same": got == want, "notes": notes, "spawned": len(spawned)}))
"""


def test_a_pool_that_cannot_start_a_worker_leaves_its_jobs_to_lone_workers(
    tmp_path: Path,
) -> None:
    """A submit that fails to spawn (ValueError included) counts as a broken pool: the jobs
    it did not take are extracted by lone workers, in order, as a broken pool's are."""
    vault = _vault(tmp_path / "vault", files=80)
    script = tmp_path / "race.py"
    script.write_text(SPAWN_RACE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(vault)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["same"] is True and result["notes"] == []
    assert result["spawned"] >= 2  # the failing spawn was met


HELPED = """\
import json, os, sys
from contextgraph.sync.ingest import Job, prepare
from contextgraph.sync.workers import prepare_in_pool

if __name__ == "__main__":
    root = sys.argv[1]
    jobs = [Job(n, os.path.join(root, n), "note", None, 10**6) for n in sorted(os.listdir(root))]
    notes = []
    got = [tuple(p) for p in prepare_in_pool(jobs, 1, notes.append, helpers=1)]
    want = [tuple(prepare(j)) for j in jobs]
    print(json.dumps({"same": got == want, "notes": notes}))
"""


def _slow_site(folder: Path, log: Path, *, kill_helpers: bool) -> Path:
    """Make ``prepare`` take 5 ms a file (so a writer waits for its workers) and log, per
    file, the name of the process that extracted it; with ``kill_helpers``, a helper logs
    ``killed`` and SIGKILLs itself on its first file instead."""
    return _site(
        folder,
        f"""
        import multiprocessing, os, signal, time
        import contextgraph.sync.ingest as ingest

        _prepare = ingest.prepare

        def prepare(job):
            name = multiprocessing.current_process().name
            killed = name == {HELPER!r} and {kill_helpers!r}
            with open({str(log)!r}, "a", encoding="utf-8") as out:
                out.write(f"{{job.path}} {{'killed' if killed else name}}\\n")
            if killed:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.005)
            return _prepare(job)

        ingest.prepare = prepare
        """,
    )


def _run_helped(
    tmp_path: Path, *, kill_helpers: bool, files: int = FILES
) -> tuple[dict[str, Any], list[str]]:
    vault = _vault(tmp_path / "vault", files)
    log = tmp_path / "extracted.log"
    site = _slow_site(tmp_path / "site", log, kill_helpers=kill_helpers)
    script = tmp_path / "helped.py"
    script.write_text(HELPED, encoding="utf-8")
    env = child_env()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    done = subprocess.run(
        [sys.executable, str(script), str(vault)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), log.read_text(encoding="utf-8").splitlines()


def test_a_helper_extracts_while_the_writer_waits(tmp_path: Path) -> None:
    result, log = _run_helped(tmp_path, kill_helpers=False)
    assert result == {"same": True, "notes": []}  # every result, in job order
    by = [line.rsplit(" ", 1) for line in log[:FILES]]  # the pools'; then the script's own
    helped = [path for path, name in by if name == HELPER]
    assert helped, "the writer waited for every chunk, yet no helper took one"
    assert {name for _, name in by} == {WORKER, HELPER}
    assert sorted(path for path, _ in by) == sorted(p.name for p in (tmp_path / "vault").iterdir())


@pytest.mark.parametrize("files", [FILES, 1300])
def test_a_helper_killed_by_a_file_loses_nothing(tmp_path: Path, files: int) -> None:
    result, log = _run_helped(tmp_path, kill_helpers=True, files=files)
    # What the helper held is extracted again by lone workers: nothing failed, nothing is
    # missing, the order holds.
    assert result == {"same": True, "notes": []}
    assert [line for line in log if line.endswith(" killed")], "no helper took a chunk"
    assert not [line for line in log if line.endswith(f" {HELPER}")]


def test_the_folders_of_one_sync_are_extracted_in_one_pool(tmp_path: Path) -> None:
    # Two folders of 250 notes: each under POOL_THRESHOLD, together over it.
    first, second = tmp_path / "first", tmp_path / "second"
    _vault(first, files=250)
    _vault(second, files=250)
    log = tmp_path / "extracted.log"
    site = _site(
        tmp_path / "site",
        f"""
        import multiprocessing, os
        import contextgraph.sync.ingest as ingest

        _prepare = ingest.prepare

        def prepare(job):
            with open({str(log)!r}, "a", encoding="utf-8") as out:
                name = multiprocessing.current_process().name
                out.write(f"{{os.getpid()}} {{name}}\\n")
            return _prepare(job)

        ingest.prepare = prepare
        """,
    )
    report = _cli_sync(tmp_path / "g.db", [first, second], site)
    assert report["sources"] == ["first", "second"]
    assert report["files"]["added"] == 500
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 500
    assert {line.split()[1] for line in lines} == {WORKER}  # no file in the writing process
    assert len({line.split()[0] for line in lines}) <= 2  # one pool of two, for both folders
    with ContextGraph.open(tmp_path / "g.db") as graph:
        got = snapshot(graph)
    with ContextGraph.open(tmp_path / "inline.db", settings=Settings(workers=1)) as graph:
        graph.sync([first, second])
        assert got == snapshot(graph)


def test_ctrl_c_ends_a_pooled_sync_at_once_quietly_and_frees_its_lock(tmp_path: Path) -> None:
    """A terminal's Ctrl-C is SIGINT to the whole process group, workers included. A worker
    that died of it printed a traceback, or died halfway through sending a result, which left
    the pool waiting for the rest of it, the sync's lock held (a hunt, stop 43)."""
    import os
    import time

    vault = tmp_path / "vault"
    vault.mkdir()
    body = "".join(f"para {j} with [[K{j % 31}]] and `code`\n\n" for j in range(40))
    for i in range(3000):
        (vault / f"n{i}.md").write_text(f"n{i} [[W{i % 100}]]\n{body}", encoding="utf-8")
    env = child_env()
    for pause in (0.0, 0.3, 0.6):
        db = tmp_path / f"graph-{pause}.db"
        proc = subprocess.Popen(
            [sys.executable, "-m", "contextgraph", "--db", str(db), "sync", str(vault)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
        try:
            deadline = time.monotonic() + 60
            while not db.exists() and time.monotonic() < deadline:  # the sync has begun
                time.sleep(0.02)
            time.sleep(pause)
            os.killpg(proc.pid, signal.SIGINT)
            _out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        # 130, or killed by SIGINT itself: Python 3.11 exits so after a Ctrl-C that came while
        # an import ran code through exec() (a dataclass's methods), however it was handled;
        # a shell reports both as 130.
        assert proc.returncode in (0, 130, -signal.SIGINT), (pause, proc.returncode, err)
        assert "Traceback" not in err, (pause, err)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "contextgraph",
                "--db",
                str(db),
                "sync",
                str(vault),
                "--no-wait",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (pause, done.stderr)  # the lock is free, the load completes
        with ContextGraph.open(db) as graph:
            assert graph.stats().files == {"note": 3000}
