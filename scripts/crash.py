#!/usr/bin/env python3
"""Kill contextgraph mid-write, again and again, and check it recovers; print one JSON object.

    python scripts/crash.py --iterations 30 --notes 600

First a normal cold sync and a community rebuild of a synthetic vault (notes plus a small Python
package) are timed. Then, per iteration, the vault is sometimes changed (edits, creations,
deletions, renames, touches, a binary note) or the database dropped (a cold sync), and
``python -m contextgraph --db DB sync VAULT`` (or, in one iteration in five,
``communities --rebuild``) is started and SIGKILLed after a random delay between 0 and the
measured duration of that kind of run (half of the delays start after the interpreter's
start-up, where the database is being written). Then:

1. ``PRAGMA integrity_check`` is ``ok`` straight after the kill;
2. a normal sync succeeds, ``doctor()`` is ok and no ``stale:*`` marker is left;
3. the store equals a from-scratch sync of the same files (``tests/helpers.py``'s ``snapshot``),
   and its community partition equals the from-scratch one;
4. a second sync reports nothing added, updated, deleted or renamed.

Every failed check is listed in ``failures``; ``kill_points`` says where each kill landed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = str(Path(__file__).resolve().parent)
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)

from soak import (  # noqa: E402  (this folder is not a package)
    CONCEPTS,
    WORDS,
    cli_env,
    integrity,
    load_snapshot,
    note_text,
    partition,
    stale_markers,
    unassigned_concepts,
    workdir_or_temporary,
)

CODE_FILES = 12


def code_text(rng: random.Random, i: int) -> str:
    """A small module of the package ``pkg`` importing two siblings."""
    others = sorted({rng.randrange(CODE_FILES) for _ in range(2)} - {i})
    lines = [f"from pkg import mod_{j}" for j in others]
    lines += [
        "",
        "",
        f"class Thing{i}:",
        "    def run(self) -> int:",
        f"        return {rng.randint(0, 10**6)}",
        "",
        "",
        f"def helper_{i}() -> int:",
        f"    return Thing{i}().run()" + "".join(f" + mod_{j}.helper_{j}()" for j in others),
        "",
    ]
    return "\n".join(lines)


class Vault:
    """The synthetic vault and the changes made to it between iterations."""

    def __init__(self, root: Path, notes: int, rng: random.Random) -> None:
        self.root = root
        self.rng = rng
        self.version = 0
        self.serial = 0
        root.mkdir(parents=True)
        for n in range(notes):
            self._write(f"{WORDS[n % 7]}/note-{n:05d}.md", note_text(rng, f"note {n}"))
        (root / "pkg").mkdir()
        (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
        for i in range(CODE_FILES):
            self._write(f"pkg/mod_{i}.py", code_text(rng, i))

    def _write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        if path.exists() and path.stat().st_size == len(data):
            data += b"\n"  # a changed size: mtime granularity can never hide the edit
        path.write_bytes(data)

    def notes(self) -> list[str]:
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*.md"))

    def mutate(self) -> dict[str, int]:
        """Apply a random mix of changes; return how many of each."""
        rng = self.rng
        self.version += 1
        done = {"edit": 0, "create": 0, "delete": 0, "rename": 0, "touch": 0, "code": 0}
        notes = self.notes()
        scale = max(1, len(notes) // 8)
        for rel in rng.sample(notes, min(len(notes), rng.randint(1, scale))):
            self._write(rel, note_text(rng, f"{rel} v{self.version}"))
            done["edit"] += 1
        for _ in range(rng.randint(0, scale // 2 + 1)):
            self.serial += 1
            self._write(f"{rng.choice(WORDS[:7])}/new-{self.serial:05d}.md", note_text(rng, "n"))
            done["create"] += 1
        notes = self.notes()
        for rel in rng.sample(notes, min(len(notes) // 2, rng.randint(0, scale // 2 + 1))):
            if rng.random() < 0.5:
                (self.root / rel).unlink()
                done["delete"] += 1
            else:
                self.serial += 1
                new = self.root / rng.choice(WORDS[:7]) / f"moved-{self.serial:05d}.md"
                new.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.root / rel, new)
                done["rename"] += 1
        for rel in rng.sample(self.notes(), min(5, len(self.notes()))):
            os.utime(self.root / rel)  # same content, new mtime: only the stat changes
            done["touch"] += 1
        for i in rng.sample(range(CODE_FILES), rng.randint(0, 2)):
            self._write(f"pkg/mod_{i}.py", code_text(rng, i))
            done["code"] += 1
        binary = self.root / "attachments" / "binary.md"
        if rng.random() < 0.3:
            binary.parent.mkdir(exist_ok=True)
            binary.write_bytes(b"[[" + rng.choice(CONCEPTS).encode() + b"]]\x00\x01" * 8)
        elif binary.exists() and rng.random() < 0.5:
            binary.unlink()
        return done


def drop_database(database: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)


def cli(database: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "contextgraph", "--db", str(database), *args]


def timed_run(command: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command[3:])} failed: {proc.stderr.strip()}")
    return time.monotonic() - started


@dataclass
class Outcome:
    running: bool  # still running when the kill came
    code: int | None  # its exit code, when it finished first
    seconds: float  # how long it ran (to its exit, or to the kill)
    stderr: str


def kill_after(command: list[str], env: dict[str, str], delay: float, log: Path) -> Outcome:
    """Start ``command`` and SIGKILL its whole process group after ``delay`` s.

    The group is killed so the sync's extraction workers go with it (they never touch the
    database). stderr goes to ``log``, so a full pipe can never stall the run.
    """
    with open(log, "w+", encoding="utf-8", errors="replace") as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
        try:
            code: int | None = proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            code = None
        seconds = time.monotonic() - started
        with contextlib.suppress(ProcessLookupError):  # finished and reaped already
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        err.seek(0)
        return Outcome(code is None, code, seconds, err.read())


def disk_state(database: Path) -> tuple[tuple[int, int], ...]:
    """Size and mtime of the database and its WAL: a change means the run wrote something."""
    out = []
    for path in (database, Path(f"{database}-wal")):
        try:
            st = path.stat()
        except FileNotFoundError:
            out.append((-1, -1))
        else:
            out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def files_in_store(database: Path) -> int | None:
    try:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return None
    try:
        return int(conn.execute("SELECT count(*) FROM files").fetchone()[0])
    except sqlite3.Error:
        return None  # killed before the schema existed
    finally:
        conn.close()


class Reference:
    """From-scratch syncs of the vault, cached per vault version."""

    def __init__(self, workdir: Path, vault: Vault) -> None:
        self.workdir = workdir
        self.vault = vault
        self.version = -1
        self.snapshot: Any = None
        self.partition: set[frozenset[str]] = set()

    def get(self) -> tuple[Any, set[frozenset[str]]]:
        from contextgraph import ContextGraph

        if self.version != self.vault.version:
            database = self.workdir / "fresh.db"
            drop_database(database)
            with ContextGraph.open(database) as fresh:
                fresh.sync([self.vault.root])
                self.snapshot = load_snapshot()(fresh)
                self.partition = partition(fresh)
            self.version = self.vault.version
        return self.snapshot, self.partition


def check(database: Path, reference: Reference, vault: Vault, problem: Any) -> None:
    """Run the recovery sync and every convergence check, reporting through ``problem``."""
    from contextgraph import ContextGraph, ContextGraphError

    try:
        with ContextGraph.open(database) as graph:
            graph.sync([vault.root])
            doctor = graph.doctor()
            if not doctor.ok:
                problem("doctor", "; ".join(doctor.problems))
            if stale_markers(graph):
                problem("stale markers left after a sync", ", ".join(stale_markers(graph)))
            live = load_snapshot()(graph)
            live_partition = partition(graph)
            unassigned = unassigned_concepts(graph)
            if unassigned:
                problem("concepts without a community", str(unassigned))
            again = graph.sync().as_dict()["files"]
            moved = {k: again[k] for k in ("added", "updated", "deleted", "renamed") if again[k]}
            if moved:
                problem("second sync was not idle", json.dumps(moved))
    except ContextGraphError as exc:
        problem("recovery sync raised", f"{type(exc).__name__}: {exc}")
        return
    expected, expected_partition = reference.get()
    if live != expected:
        differs = [k for k in expected if live.get(k) != expected[k]]
        problem("store differs from a from-scratch sync", ", ".join(differs))
    if live_partition != expected_partition:
        problem(
            "community partition differs from a from-scratch sync",
            f"{len(live_partition)} vs {len(expected_partition)} communities",
        )
    after = integrity(database)
    if after != "ok":
        problem("integrity_check after recovery", after)


def run(*, iterations: int, notes: int, workdir: Path, seed: int) -> dict[str, Any]:
    """Run the crash loop in ``workdir`` (emptied first) and return the figures."""
    rng = random.Random(seed)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    vault = Vault(workdir / "vault", notes, rng)
    database = workdir / "graph.db"
    env = cli_env()
    sync_cmd = cli(database, "sync", str(vault.root))
    rebuild_cmd = cli(database, "communities", "--rebuild")
    sync_seconds = timed_run(sync_cmd, env)
    rebuild_seconds = timed_run(rebuild_cmd, env)
    startup_seconds = timed_run(cli(database, "db", "current"), env)  # start-up, no work
    reference = Reference(workdir, vault)
    failures: list[dict[str, Any]] = []
    kill_points: list[dict[str, Any]] = []
    first = ["cold", "edits", "edits", "idle", "rebuild"]
    # The full duration of each kind of run: the measured cold sync and rebuild at first, then
    # the longest uninterrupted run of that kind (an edit sync is shorter than a cold one).
    measured = {"cold": sync_seconds, "edits": sync_seconds, "idle": sync_seconds}
    measured["rebuild"] = rebuild_seconds
    longest: dict[str, float] = {}
    for i in range(iterations):
        if i < len(first):
            scenario = first[i]
        else:
            scenario = rng.choices(["cold", "edits", "idle", "rebuild"], weights=[3, 4, 1, 2])[0]
        changes: dict[str, int] = {}
        if scenario == "cold":
            drop_database(database)
            if rng.random() < 0.5:
                changes = vault.mutate()
        elif scenario == "edits" or (scenario == "rebuild" and rng.random() < 0.5):
            changes = vault.mutate()
        command = rebuild_cmd if scenario == "rebuild" else sync_cmd
        span = longest.get(scenario, measured[scenario])
        batch = rng.choice(["200", "20"])
        # Half the kills anywhere in the run, half after the interpreter start-up, where the
        # database is being written (all of them between 0 and the full measured duration).
        low = 0.0 if rng.random() < 0.5 else min(startup_seconds, span * 0.9)
        delay = rng.uniform(low, span)
        run_env = {**env, "CONTEXTGRAPH_BATCH_FILES": batch}
        before = disk_state(database)
        outcome = kill_after(command, run_env, delay, workdir / "stderr.log")
        running, code, err = outcome.running, outcome.code, outcome.stderr
        if not running and code == 0:
            longest[scenario] = max(longest.get(scenario, 0.0), outcome.seconds)
        point = {
            "iteration": i,
            "scenario": scenario,
            "batch_files": int(batch),
            "span_s": round(span, 3),
            "delay_s": round(delay, 3),
            "fraction": round(delay / span, 3) if span else 0.0,
            "killed_while_running": running,
            "wrote_before_the_kill": disk_state(database) != before,
            "finished_after_s": None if running else round(outcome.seconds, 3),
            "files_in_store_at_kill": files_in_store(database),
            "changes": changes,
        }
        kill_points.append(point)

        def problem(what: str, detail: str, _i: int = i, _s: str = scenario) -> None:
            failures.append({"iteration": _i, "scenario": _s, "check": what, "detail": detail})

        if not running and code != 0:
            problem(f"the run exited {code} before the kill", err.strip()[-400:])
        if "Traceback" in err:
            problem("traceback on stderr", err.strip()[-400:])
        if database.exists():
            state = integrity(database)
            if state != "ok":
                problem("integrity_check straight after the kill", state)
        check(database, reference, vault, problem)
    return {
        "iterations": iterations,
        "notes": notes,
        "seed": seed,
        "sync_seconds": round(sync_seconds, 3),
        "rebuild_seconds": round(rebuild_seconds, 3),
        "startup_seconds": round(startup_seconds, 3),
        "killed_while_running": sum(1 for p in kill_points if p["killed_while_running"]),
        "killed_mid_write": sum(
            1 for p in kill_points if p["killed_while_running"] and p["wrote_before_the_kill"]
        ),
        "failures": failures,
        "kill_points": kill_points,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse the arguments, run the crash loop, print and return its JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=30, help="Kills to survive.")
    parser.add_argument("--notes", type=int, default=600, help="Notes in the vault.")
    parser.add_argument("--seed", type=int, default=11, help="Seed of every random choice.")
    parser.add_argument("--workdir", type=Path, default=None, help="Kept; default: a temp dir.")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.notes < 1:
        parser.error("--iterations and --notes must be at least 1")
    with workdir_or_temporary(args.workdir, "crash") as workdir:
        result = run(iterations=args.iterations, notes=args.notes, workdir=workdir, seed=args.seed)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
