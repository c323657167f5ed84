#!/usr/bin/env python3
"""Soak one contextgraph database with concurrent syncs, edits and reads; print one JSON object.

    python scripts/soak.py --writers 3 --readers 3 --seconds 30 --notes 200
    python scripts/soak.py --db postgresql://user@host/soak --fresh-db postgresql://user@host/soak2

With ``--db`` the store is that database (a PostgreSQL URL, emptied first: use a throwaway one)
and ``--fresh-db`` the one the from-scratch sync fills; by default both are files in the workdir.

For ``--seconds``, in parallel (processes started with ``spawn``):

- W writers, each looping the real CLI ``contextgraph sync`` in a subprocess (one in five with
  ``--no-wait``, where "a sync is running" is an expected answer, not an error; about one run in
  seven is a ``communities --rebuild`` instead, which races the syncs' own recomputes);
- one editor that edits, creates, deletes and renames notes (paths are never reused, and every
  edit changes the file's size, so the mtime granularity cannot hide an edit from a later sync);
- R readers, each with its own ``ContextGraph`` looping over ``read`` (a ``last_accessed`` write;
  every acknowledged read is recorded with a time taken just before the call), ``build_context``,
  ``expand`` and ``search``.

Then the editor stops, a final sync runs, and the store is checked: ``doctor().ok``,
``PRAGMA integrity_check``, no acknowledged read lost (``last_accessed`` is at least the recorded
time for every note still at the same path), and the store equals a from-scratch sync of the final
files (``tests/helpers.py``'s ``snapshot``), with the same community partition. Errors are any
exception or non-zero exit other than the expected ones (a note deleted between listing and
reading it, ``--no-wait`` refused); ``locked_errors`` counts those that mention "database is
locked" and must be 0.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = str(Path(__file__).resolve().parent)
TESTS = str(REPO / "tests")
if str(REPO) not in sys.path:  # run from a checkout: test this checkout's library
    sys.path.insert(0, str(REPO))

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "graph",
    "vector",
    "index",
    "query",
    "cache",
    "store",
    "model",
    "layer",
    "token",
    "stream",
    "batch",
    "shard",
    "replica",
    "commit",
    "merge",
    "branch",
    "schema",
    "table",
    "column",
    "row",
    "page",
    "block",
    "node",
    "edge",
    "cluster",
    "signal",
    "trace",
    "metric",
    "span",
    "event",
    "queue",
    "topic",
    "worker",
    "scheduler",
    "kernel",
    "thread",
]
CONCEPTS = [f"{a.title()} {b}" for a in WORDS[:12] for b in WORDS[12:24]]
ERRORS_KEPT = 20

# The CLI entry point itself, plus a hook that hands the process's lock waits to the soak.
_SYNC_WRAPPER = """
import atexit, json, os, sys
from contextgraph.store import db
from contextgraph.cli import main

def _dump():
    with open(os.environ["SOAK_LOCK_STATS"], "a", encoding="utf-8") as out:
        out.write(json.dumps(db.lock_stats.seconds or []) + "\\n")

atexit.register(_dump)
sys.argv[0] = "contextgraph"
main()
"""


def note_text(rng: random.Random, label: str) -> str:
    """A note with a few links from the shared vocabulary and a unique line (no hash twins)."""
    links = rng.sample(CONCEPTS, rng.randint(2, 6))
    lines = [f"# {label}", ""]
    for link in links:
        filler = " ".join(rng.choices(WORDS, k=rng.randint(4, 12)))
        lines.append(f"{filler.capitalize()} about [[{link}]].")
    lines.append(f"unique {label} {rng.random()!r}")
    return "\n".join(lines) + "\n"


def make_vault(root: Path, notes: int, seed: int) -> None:
    """Write ``notes`` notes spread over a few folders."""
    rng = random.Random(seed)
    for n in range(notes):
        folder = root / WORDS[n % 5]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{n:04d}.md").write_text(note_text(rng, f"note {n}"), encoding="utf-8")


def list_notes(root: Path) -> list[str]:
    """The vault's notes as posix paths relative to ``root`` (hidden temp files left out)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.endswith(".md") and not name.startswith("."):
                found.append(Path(dirpath, name).relative_to(root).as_posix())
    return sorted(found)


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for CLI subprocesses: this checkout importable, no stray settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONTEXTGRAPH_", "MAENIFOLD_")) and k != "COVERAGE_PROCESS_START"
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _write_result(path: str, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data), encoding="utf-8")


def _error(errors: list[str], message: str) -> None:
    errors.append(message.strip()[:400])


# -- the roles (module-level functions, so a spawned child can import them) ----------------------


def writer(database: str, vault: str, seconds: float, start: Any, out: str, index: int) -> None:
    """Loop ``contextgraph sync`` (now and then ``communities --rebuild``) until the time is up."""
    ops: dict[str, int] = {}
    errors: list[str] = []
    stats_file = str(Path(out).with_suffix(".locks"))
    env = cli_env(SOAK_LOCK_STATS=stats_file)
    rng = random.Random(1000 + index)
    start.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        roll = rng.random()
        no_wait = roll < 0.2
        kind = "rebuild" if roll > 0.85 else "sync"
        # A rebuild takes no sync lock: it races the syncs' own community recomputes.
        command = ["communities", "--rebuild"] if kind == "rebuild" else ["sync", vault]
        args = [sys.executable, "-c", _SYNC_WRAPPER, "--db", database, *command, "--json"]
        if no_wait:
            args.append("--no-wait")
        try:
            proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            _error(errors, f"{kind}: did not finish within 600 s")
            continue
        if proc.returncode == 0:
            try:
                json.loads(proc.stdout)
            except ValueError:
                _error(errors, f"{kind}: stdout is not one JSON document: {proc.stdout[:200]!r}")
            ops[kind] = ops.get(kind, 0) + 1
        elif no_wait and proc.returncode == 1 and "running" in proc.stderr:
            ops["sync_refused_no_wait"] = ops.get("sync_refused_no_wait", 0) + 1
        else:
            _error(errors, f"{kind}: exit {proc.returncode}: {proc.stderr[-400:]}")
        if "Traceback" in proc.stderr:
            _error(errors, f"{kind}: traceback on stderr: {proc.stderr[-400:]}")
    waits: list[float] = []
    if os.path.exists(stats_file):
        for line in Path(stats_file).read_text(encoding="utf-8").splitlines():
            waits.extend(json.loads(line))
    _write_result(out, {"ops": ops, "errors": errors, "waits": waits, "reads": []})


def reader(database: str, seconds: float, start: Any, out: str, index: int) -> None:
    """Loop read / build_context / expand / search through the library until the time is up."""
    from sqlalchemy import text

    from contextgraph import ContextGraph, NotFound
    from contextgraph.store import db

    rng = random.Random(2000 + index)
    ops: dict[str, int] = {}
    errors: list[str] = []
    reads: list[tuple[str, float]] = []
    graph = ContextGraph.open(database)
    paths: list[str] = []
    start.wait()
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        if n % 20 == 0 or not paths:
            with db.read(graph.engine) as conn:
                paths = [
                    r[0] for r in conn.execute(text("SELECT path FROM files WHERE kind = 'note'"))
                ]
        n += 1
        kind = rng.choices(["read", "context", "expand", "search"], weights=[4, 2, 2, 2])[0]
        try:
            if kind == "read":
                if not paths:
                    continue
                path = rng.choice(paths)
                before = time.time()
                try:
                    graph.read(f"memory://vault/{path}")
                except NotFound:  # deleted (or renamed) by the editor since the listing
                    kind = "read_gone"
                else:
                    reads.append((path, before))
            elif kind == "context":
                graph.build_context(
                    rng.choice(CONCEPTS), depth=2, include_content=rng.random() < 0.3
                )
            elif kind == "expand":
                graph.expand([rng.choice(CONCEPTS)], max_depth=2)
            else:
                graph.search(" ".join(rng.sample(WORDS, rng.randint(1, 2))), limit=5)
            ops[kind] = ops.get(kind, 0) + 1
        except Exception as exc:  # every surfaced error counts, whatever its type
            _error(errors, f"{kind}: {type(exc).__name__}: {exc}")
        time.sleep(rng.uniform(0, 0.005))  # a hot loop, but leave the syncs some CPU
    graph.close()
    waits = list(db.lock_stats.seconds or [])
    _write_result(out, {"ops": ops, "errors": errors, "waits": waits, "reads": reads})


def editor(vault: str, stop: Any, start: Any, out: str, seed: int, keep: int) -> None:
    """Edit, create, delete and rename notes until ``stop`` is set."""
    root = Path(vault)
    rng = random.Random(seed)
    ops: dict[str, int] = {}
    errors: list[str] = []
    paths = list_notes(root)
    serial = 0
    start.wait()
    while not stop.is_set():
        serial += 1
        kind = rng.choices(["edit", "create", "delete", "rename"], weights=[5, 2, 2, 2])[0]
        if kind in ("delete", "rename") and len(paths) <= keep:
            kind = "edit" if paths else "create"
        try:
            if kind == "create":
                rel = f"{rng.choice(WORDS[:5])}/new-{seed}-{serial:05d}.md"
                (root / rel).write_text(note_text(rng, rel), encoding="utf-8")
                paths.append(rel)
            elif kind == "edit":
                rel = rng.choice(paths)
                target = root / rel
                old_size = target.stat().st_size
                data = note_text(rng, f"{rel} edit {serial}").encode("utf-8")
                if len(data) == old_size:
                    data += b"\n"
                if rng.random() < 0.5:  # in place, as most editors save
                    target.write_bytes(data)
                else:  # atomically, through a hidden temporary file
                    tmp = target.with_name(f".{target.name}.tmp")
                    tmp.write_bytes(data)
                    os.replace(tmp, target)
            elif kind == "delete":
                rel = paths.pop(rng.randrange(len(paths)))
                (root / rel).unlink()
            else:
                rel = paths.pop(rng.randrange(len(paths)))
                new = f"{rng.choice(WORDS[:5])}/renamed-{seed}-{serial:05d}.md"
                os.replace(root / rel, root / new)
                paths.append(new)
            ops[f"editor_{kind}"] = ops.get(f"editor_{kind}", 0) + 1
        except OSError as exc:
            _error(errors, f"editor {kind}: {exc}")
        time.sleep(rng.uniform(0.01, 0.05))
    _write_result(out, {"ops": ops, "errors": errors, "waits": [], "reads": []})


# -- the checks --------------------------------------------------------------------------------


def integrity(database: str | Path) -> str:
    """``PRAGMA integrity_check`` through a plain sqlite3 connection (a server checks itself)."""
    if "://" in str(database):
        return "not applicable (PostgreSQL)"  # the server checks its pages; doctor_ok the store
    conn = sqlite3.connect(database, timeout=60)
    try:
        return "; ".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


def partition(graph: Any) -> set[frozenset[str]]:
    """The community partition as sets of concept names (ids differ between stores)."""
    from sqlalchemy import text

    from contextgraph.store import db

    groups: dict[Any, set[str]] = {}
    with db.read(graph.engine) as conn:
        for key, community in conn.execute(
            text("SELECT key, community_id FROM entities WHERE kind = 'concept'")
        ):
            groups.setdefault(community, set()).add(key)
    return {frozenset(members) for members in groups.values()}


def unassigned_concepts(graph: Any) -> int:
    """How many concepts have no community."""
    from sqlalchemy import text

    from contextgraph.store import db

    with db.read(graph.engine) as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM entities WHERE kind = 'concept' AND community_id IS NULL"
                )
            ).scalar_one()
        )


def stale_markers(graph: Any) -> list[str]:
    """The ``stale:*`` markers left in ``meta`` (none after a completed sync)."""
    from sqlalchemy import text

    from contextgraph.store import db

    with db.read(graph.engine) as conn:
        return [r[0] for r in conn.execute(text("SELECT key FROM meta WHERE key LIKE 'stale:%'"))]


def load_snapshot() -> Any:
    """The canonical store dump of the test suite (one definition of "the same store")."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from helpers import snapshot

    return snapshot


def lost_reads(graph: Any, vault: Path, reads: list[tuple[str, float]]) -> list[dict[str, Any]]:
    """Acknowledged reads of notes still at the same path whose ``last_accessed`` is older."""
    from sqlalchemy import text

    from contextgraph.store import db

    with db.read(graph.engine) as conn:
        stored: dict[str, float | None] = dict(
            conn.execute(
                text(
                    "SELECT f.path, f.last_accessed FROM files f JOIN sources s"
                    " ON s.id = f.source_id WHERE s.name = 'vault'"
                )
            ).all()
        )
    lost = []
    for path, before in reads:
        if not (vault / path).is_file():
            continue  # deleted or renamed since: paths are never reused, nothing to check
        value = stored.get(path)
        if value is None or value < before:
            lost.append({"path": path, "readAt": before, "lastAccessed": value})
    return lost


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0.0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[rank]


# -- the run -----------------------------------------------------------------------------------


def empty_database(url: str) -> None:
    """Drop everything of a server database (down to Alembic's base) so the soak starts blank."""
    from contextgraph.store import db

    engine = db.make_engine(url)
    try:
        db.upgrade(engine)
        db.downgrade(engine, "base")
    finally:
        engine.dispose()


def run(
    *,
    writers: int,
    readers: int,
    seconds: float,
    notes: int,
    workdir: Path,
    seed: int = 7,
    database_url: str | None = None,
    fresh_url: str | None = None,
) -> dict[str, Any]:
    """Run one soak in ``workdir`` (emptied first) and return the figures."""
    from contextgraph import ContextGraph

    if SCRIPTS not in sys.path:  # spawned children import the roles from this module
        sys.path.insert(0, SCRIPTS)
    shutil.rmtree(workdir, ignore_errors=True)
    vault = workdir / "vault"
    vault.mkdir(parents=True)
    results = workdir / "results"
    results.mkdir()
    database = database_url or str(workdir / "graph.db")
    fresh_database = fresh_url or str(workdir / "fresh.db")
    for url in (database_url, fresh_url):
        if url is not None:
            empty_database(url)
    make_vault(vault, notes, seed)
    with ContextGraph.open(database) as graph:  # spawned children never inherit this engine
        graph.sync([vault])

    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(writers + readers + 2)
    stop = ctx.Event()
    procs = []
    for i in range(writers):
        out = str(results / f"writer-{i}.json")
        procs.append(
            ctx.Process(target=writer, args=(database, str(vault), seconds, start, out, i))
        )
    for i in range(readers):
        out = str(results / f"reader-{i}.json")
        procs.append(ctx.Process(target=reader, args=(database, seconds, start, out, i)))
    edit_out = str(results / "editor.json")
    editor_proc = ctx.Process(
        target=editor, args=(str(vault), stop, start, edit_out, seed, max(5, notes // 2))
    )
    for proc in [*procs, editor_proc]:
        proc.start()
    start.wait(timeout=300)
    began = time.monotonic()
    time.sleep(seconds)
    stop.set()
    editor_proc.join(60)
    for proc in procs:
        proc.join(900)

    ops: dict[str, int] = {}
    errors: list[str] = []
    waits: list[float] = []
    reads: list[tuple[str, float]] = []
    for proc in [*procs, editor_proc]:
        if proc.is_alive():
            proc.kill()
            errors.append(f"{proc.name} did not finish")
        elif proc.exitcode != 0:
            errors.append(f"{proc.name} exited with {proc.exitcode}")
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, value in data["ops"].items():
            ops[key] = ops.get(key, 0) + value
        errors.extend(data["errors"])
        waits.extend(data["waits"])
        reads.extend((p, t) for p, t in data["reads"])
    elapsed = time.monotonic() - began

    snapshot = load_snapshot()
    live = ContextGraph.open(database)
    fresh = ContextGraph.open(fresh_database)
    try:
        t = time.perf_counter()
        live.sync()
        final_sync = time.perf_counter() - t
        doctor_ok = live.doctor().ok
        check = integrity(database)
        lost = lost_reads(live, vault, reads)
        fresh.sync([vault])
        converged = snapshot(live) == snapshot(fresh)
        communities = {
            "partition_equal": partition(live) == partition(fresh),
            "unassigned_concepts": unassigned_concepts(live),
            "stale_markers": stale_markers(live),
        }
        settled = live.sync().as_dict()["files"]
        idle = settled["added"] == settled["updated"] == settled["deleted"] == 0
    finally:
        live.close()
        fresh.close()
    locked = [e for e in errors if "database is locked" in e.lower()]
    return {
        "engine": "postgresql" if "://" in database else "sqlite",
        "writers": writers,
        "readers": readers,
        "seconds": seconds,
        "elapsed_s": round(elapsed, 2),
        "notes": notes,
        "ops": dict(sorted(ops.items())),
        "error_count": len(errors),
        "errors": errors[:ERRORS_KEPT],
        "locked_errors": len(locked),
        "reads_acknowledged": len(reads),
        "lost_reads": len(lost),
        "lost_examples": lost[:5],
        "integrity": check,
        "doctor_ok": doctor_ok,
        "converged": converged,
        "communities_converged": communities["partition_equal"]
        and not communities["unassigned_concepts"]
        and not communities["stale_markers"],
        "communities": communities,
        "idle_after_final_sync": idle,
        "final_sync_s": round(final_sync, 3),
        "busy_waits": len(waits),
        "busy_p50_s": round(statistics.median(waits), 4) if waits else 0.0,
        "busy_p99_s": round(percentile(waits, 0.99), 4),
        "busy_max_s": round(max(waits), 4) if waits else 0.0,
    }


@contextmanager
def workdir_or_temporary(workdir: Path | None, name: str) -> Iterator[Path]:
    """The given folder (kept afterwards), else a temporary one removed at the end."""
    if workdir is not None:
        yield workdir.resolve()
        return
    with tempfile.TemporaryDirectory(prefix=f"contextgraph-{name}-") as tmp:
        yield Path(tmp) / name


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse the arguments, run the soak, print and return its JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=3, help="Processes looping `sync`.")
    parser.add_argument("--readers", type=int, default=3, help="Processes looping queries.")
    parser.add_argument("--seconds", type=float, default=30.0, help="How long to run.")
    parser.add_argument("--notes", type=int, default=200, help="Notes in the starting vault.")
    parser.add_argument("--seed", type=int, default=7, help="Seed of every random choice.")
    parser.add_argument("--workdir", type=Path, default=None, help="Kept; default: a temp dir.")
    parser.add_argument("--db", default=None, help="A PostgreSQL URL to soak (emptied first).")
    parser.add_argument("--fresh-db", default=None, help="With --db: the from-scratch database.")
    args = parser.parse_args(argv)
    if (args.db is None) != (args.fresh_db is None):
        parser.error("--db and --fresh-db go together")
    if args.writers < 0 or args.readers < 0 or args.seconds <= 0 or args.notes < 1:
        parser.error("--writers/--readers must be >= 0, --seconds > 0 and --notes >= 1")
    with workdir_or_temporary(args.workdir, "soak") as workdir:
        result = run(
            writers=args.writers,
            readers=args.readers,
            seconds=args.seconds,
            notes=args.notes,
            workdir=workdir,
            seed=args.seed,
            database_url=args.db,
            fresh_url=args.fresh_db,
        )
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
