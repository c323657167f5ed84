#!/usr/bin/env python3
"""Where a cold sync's time goes: the writer's SQL by statement, its CPU and the workers'; JSON.

    python scripts/sync_profile.py VAULT[,VAULT...] [--runs 3] [--top 12] [--workdir DIR]

Each run is a fresh process that syncs the folders into a new database through the library
(``ContextGraph.sync``; no CLI, so no pool started before the library loads) and reports:

- ``wall_s`` of the sync and ``writer_cpu_s`` / ``workers_cpu_s``: the CPU of the process that
  writes every batch (its threads included) and of its extraction workers and helpers. On two
  cores a cold load keeps both busy, so the writer's CPU against the wall tells whether its
  writes bound the sync;
- ``sql_s``: the time this process spends inside SQLite, timed around each driver call
  (every statement's ``execute``/``executemany`` and every commit, in any of its threads: the
  checkpoint thread's ``CREATE INDEX`` and ``wal_checkpoint`` are in it), and ``statements``:
  the ``--top`` costliest, by their first 90 characters, with calls and rows (``executemany``);
- ``commits``: how many, their seconds and the longest (a commit that passes
  ``wal_autocheckpoint`` copies the WAL into the database and syncs both files);
- ``phases_s``: the sync report's own phases.

The parent prints each figure's median over the runs and every run's. The statements are timed
by a ``sqlite3`` connection factory installed in the child, about a microsecond per call.
Nothing here asserts: it measures.
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

KEY_CHARS = 90  # a statement is known by its first characters, blanks collapsed


def _key(sql: str) -> str:
    return " ".join(sql.split())[:KEY_CHARS]


class _Timings:
    """Seconds, calls and rows per statement, and each commit's seconds."""

    def __init__(self) -> None:
        self.statements: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0])
        self.commits: list[float] = []

    def add(self, sql: str, seconds: float, rows: int = 0) -> None:
        entry = self.statements[_key(sql)]
        entry[0] += seconds
        entry[1] += 1
        entry[2] += rows


def _install(timings: _Timings) -> None:
    """Make every ``sqlite3`` connection of this process time its statements and commits."""

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            start = time.perf_counter()
            try:
                return super().execute(sql, *args)
            finally:
                timings.add(sql, time.perf_counter() - start)

        def executemany(self, sql: str, seq: Any) -> sqlite3.Cursor:  # type: ignore[override]
            rows = list(seq)
            start = time.perf_counter()
            try:
                return super().executemany(sql, rows)
            finally:
                timings.add(sql, time.perf_counter() - start, len(rows))

    class Connection(sqlite3.Connection):
        def cursor(self, factory: Any = Cursor) -> Any:
            return super().cursor(factory)

        def execute(self, sql: str, *args: Any) -> Any:
            return self.cursor().execute(sql, *args)

        def executemany(self, sql: str, seq: Any) -> Any:
            return self.cursor().executemany(sql, seq)

        def commit(self) -> None:
            start = time.perf_counter()
            try:
                super().commit()
            finally:
                timings.commits.append(time.perf_counter() - start)

    connect = sqlite3.connect

    def timed_connect(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("factory", Connection)
        return connect(*args, **kwargs)

    sqlite3.connect = timed_connect
    sqlite3.dbapi2.connect = timed_connect  # SQLAlchemy's entry


def profile_once(folders: list[Path], database: Path, top: int) -> dict[str, Any]:
    """One cold sync of ``folders`` into ``database`` in this process, timed (the child's job)."""
    timings = _Timings()
    _install(timings)
    from contextgraph import ContextGraph

    for suffix in ("", "-wal", "-shm", ".sync.lock"):
        database.with_name(database.name + suffix).unlink(missing_ok=True)
    start = time.perf_counter()
    with ContextGraph.open(database) as graph:
        for folder in folders:
            graph.add_source(folder)
        report = graph.sync()
    wall = time.perf_counter() - start
    mine = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    ranked = sorted(timings.statements.items(), key=lambda item: -item[1][0])
    commits = timings.commits
    return {
        "files": report.scanned,
        "wall_s": round(wall, 3),
        "writer_cpu_s": round(mine.ru_utime + mine.ru_stime, 3),
        "workers_cpu_s": round(workers.ru_utime + workers.ru_stime, 3),
        "sql_s": round(sum(s for s, _, _ in timings.statements.values()) + sum(commits), 3),
        "commits": {
            "count": len(commits),
            "seconds": round(sum(commits), 3),
            "max_s": round(max(commits, default=0.0), 3),
        },
        "phases_s": {name: round(s, 3) for name, s in report.phases.items()},
        "statements": [
            {"sql": sql, "seconds": round(s, 3), "calls": calls, "rows": rows}
            for sql, (s, calls, rows) in ranked[:top]
        ],
    }


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    out: dict[str, Any] = {
        name: median([r[name] for r in runs])
        for name in ("wall_s", "writer_cpu_s", "workers_cpu_s", "sql_s")
    }
    out["commit_s"] = median([r["commits"]["seconds"] for r in runs])
    out["phases_s"] = {
        name: median([r["phases_s"].get(name, 0.0) for r in runs]) for name in runs[0]["phases_s"]
    }
    by_sql: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        for statement in run["statements"]:
            by_sql[statement["sql"]].append(statement["seconds"])
    out["statements_s"] = dict(
        sorted(((sql, median(s)) for sql, s in by_sql.items()), key=lambda item: -item[1])
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", help="a folder, or several comma-separated: one sync of them all")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes (default 3)")
    parser.add_argument("--top", type=int, default=12, help="statements to list (default 12)")
    parser.add_argument("--workdir", type=Path, help="keep the database here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one run, into this db
    args = parser.parse_args()
    folders = [Path(p).expanduser().resolve() for p in args.vault.split(",") if p]
    if args.child is not None:
        print(json.dumps(profile_once(folders, args.child, args.top)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench import child_env  # the sibling script (not in the child: its workers import this)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="contextgraph-profile-"))
    workdir.mkdir(parents=True, exist_ok=True)
    database = workdir / "profile.db"
    runs = []
    for _ in range(max(1, args.runs)):
        command = [sys.executable, __file__, args.vault, "--top", str(args.top)]
        done = subprocess.run(
            [*command, "--child", str(database)],
            capture_output=True,
            text=True,
            env=child_env(database),
            cwd=workdir,  # not a checkout: the working folder comes first on sys.path
        )
        if done.returncode != 0:
            raise SystemExit(f"sync_profile.py: the sync failed:\n{done.stderr[-2000:]}")
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    result = {"vault": [str(f) for f in folders], "runs": len(runs), "median": _median_of(runs)}
    print(json.dumps({**result, "each_run": runs}, indent=2))


if __name__ == "__main__":
    main()
