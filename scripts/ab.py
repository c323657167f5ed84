#!/usr/bin/env python3
"""Time one CLI command from two source trees, run alternately; print one JSON object.

    python scripts/ab.py --base eccd22f --cold VAULT                 # a first sync, 8 pairs
    python scripts/ab.py --base eccd22f --db-from VAULT -- context "Topic 3"
    python scripts/ab.py --base ../other-checkout --db-from VAULT --runs 12 -- sync
    python scripts/ab.py --base d4694d4 --first-call VAULT --runs 3    # first BuildContext
    python scripts/ab.py --base 9cc42af --db-from VAULT --edit VAULT/a.md -- sync  # one edit

A shared machine's speed drifts by a third within minutes, so a figure of one tree measured
after the other's says little about the change between them. Here each pair runs both trees
back to back, in fresh processes (the resident server off, bytecode compiled first), the order
flipping from pair to pair (ABBA). The report gives each tree's median wall and CPU time and,
the figure to quote, the median of the paired differences (new - base) with the number of
pairs the new tree won. A ``sync`` also reports the median of each phase its ``--json``
report times.

``--base`` is a git revision (checked out into a temporary worktree, removed at the end) or a
folder holding a ``contextgraph`` package; ``--new`` is this checkout unless given. With
``--cold VAULT`` every run is ``sync VAULT`` into a new database; with ``--db-from VAULT`` each
tree first syncs VAULT into a database of its own (untimed), and the command after ``--`` runs
on it. With ``--first-call VAULT`` each tree syncs VAULT the same way, then each run is
``scripts/bench.py --only first-call`` (the first depth-2 BuildContext of 100 concepts, cache
emptied before each, best CPU time of ``--passes``): the figures are its p50 and p95 in ms.
With ``--edit NOTE`` (a note inside VAULT), a line linking a concept is appended to NOTE before
every timed run, so each ``sync`` has one changed note to read (and, its graph changed, the
communities to recompute); NOTE gets its bytes and times back at the end.
VAULT may name several folders, comma-separated: one sync of them all. The runs start
in the folder of the databases (the working folder comes first on a child's ``sys.path``):
give the command absolute paths. Nothing here asserts: it measures.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import child_env  # the sibling script, found through the path above

REPO = Path(__file__).resolve().parents[1]


def tree_env(tree: Path, db: Path) -> dict[str, str]:
    """The environment of a timed run of ``tree``'s package (found before any installed one)."""
    return dict(child_env(db), PYTHONPATH=str(tree))


def check_tree(tree: Path) -> None:
    """Compile ``tree``'s package and make sure a child process imports it from there."""
    package = tree / "contextgraph"
    if not (package / "__init__.py").is_file():
        raise SystemExit(f"ab.py: {tree} holds no contextgraph package")
    compileall.compile_dir(package, quiet=1)
    found = subprocess.run(
        [sys.executable, "-c", "import contextgraph; print(contextgraph.__file__)"],
        env=tree_env(tree, tree / "unused.db"),
        cwd=tempfile.gettempdir(),  # not a checkout: the working folder comes first on sys.path
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(package.resolve()):
        raise SystemExit(f"ab.py: a child run for {tree} imports contextgraph from {found}")


def run_once(tree: Path, db: Path, args: list[str], phases: bool) -> dict[str, Any]:
    """One fresh process of ``contextgraph --db DB ARGS``: wall, CPU and the sync's phases."""
    argv = [sys.executable, "-m", "contextgraph", "--db", str(db), *args]
    if phases:
        argv.append("--json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(
        argv, env=tree_env(tree, db), cwd=db.parent, capture_output=True, text=True
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"ab.py: {' '.join(args)} failed in {tree}:\n{done.stderr[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    run: dict[str, Any] = {"wall_s": wall, "cpu_s": cpu}
    if phases:
        run["phases_s"] = json.loads(done.stdout).get("seconds", {})
    return run


def remove_database(db: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal", ".sync.lock"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "wall_median_s": round(statistics.median(r["wall_s"] for r in runs), 3),
        "cpu_median_s": round(statistics.median(r["cpu_s"] for r in runs), 3),
        "wall_runs_s": [round(r["wall_s"], 3) for r in runs],
    }
    if runs and "phases_s" in runs[0]:
        names = runs[0]["phases_s"].keys()
        out["phases_median_s"] = {
            name: round(statistics.median(r["phases_s"].get(name, 0.0) for r in runs), 3)
            for name in names
        }
    return out


def abba(runs: int) -> list[str]:
    """The sides in the order ``runs`` pairs take them: base first in even pairs, new first in
    odd ones (ABBA), so neither tree always runs on the heels of the other."""
    return [side for k in range(runs) for side in (("base", "new"), ("new", "base"))[k % 2]]


def compare(
    trees: dict[str, Path],
    databases: dict[str, Path],
    args: list[str],
    runs: int,
    cold: bool,
    edit: Path | None = None,
) -> dict[str, Any]:
    """``runs`` ABBA pairs of ``args``, each tree on its own database (``edit``: a note to
    append a line to before each run)."""
    phases = args[0] == "sync"
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in trees}
    for k, side in enumerate(abba(runs)):
        if cold:
            remove_database(databases[side])
        if edit is not None:
            with edit.open("a", encoding="utf-8") as note:
                note.write(f"\nEdited for run {k} of ab.py: [[ab edit {k % 3}]]\n")
        results[side].append(run_once(trees[side], databases[side], args, phases))
    paired = [
        n["wall_s"] - b["wall_s"] for b, n in zip(results["base"], results["new"], strict=True)
    ]
    return {
        "command": args,
        "pairs": runs,
        "base": summary(results["base"]),
        "new": summary(results["new"]),
        "paired_difference_median_s": round(statistics.median(paired), 3),
        "new_faster_pairs": sum(1 for d in paired if d < 0),
    }


def first_call_once(tree: Path, db: Path, passes: int) -> dict[str, float]:
    """One fresh process of ``bench.py --only first-call`` on ``tree``: p50 and p95 (ms) of the
    first BuildContext's best CPU time."""
    argv = [
        sys.executable,
        str(Path(__file__).resolve().parent / "bench.py"),
        "--only",
        "first-call",
        "--db-file",
        str(db),
        "--queries",
        "100",
        "--first-call-passes",
        str(passes),
    ]
    done = subprocess.run(
        argv, env=tree_env(tree, db), cwd=db.parent, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"ab.py: the first-call bench failed in {tree}:\n{done.stderr[-2000:]}")
    best = json.loads(done.stdout)["build_context_depth2_first_call_cpu_best"]
    return {"p50_ms": best["p50_ms"], "p95_ms": best["p95_ms"]}


def compare_first_calls(
    trees: dict[str, Path], databases: dict[str, Path], runs: int, passes: int
) -> dict[str, Any]:
    """``runs`` ABBA pairs of the first-call bench, each tree on its own database."""
    results: dict[str, list[dict[str, float]]] = {side: [] for side in trees}
    for side in abba(runs):
        results[side].append(first_call_once(trees[side], databases[side], passes))

    def medians(side: str) -> dict[str, Any]:
        return {
            f"{q}_median_ms": round(statistics.median(r[f"{q}_ms"] for r in results[side]), 3)
            for q in ("p50", "p95")
        } | {"runs": results[side]}

    pairs = zip(results["base"], results["new"], strict=True)
    paired = [n["p50_ms"] - b["p50_ms"] for b, n in pairs]
    return {
        "command": "first BuildContext, depth 2 (bench.py --only first-call), CPU ms",
        "pairs": runs,
        "passes": passes,
        "base": medians("base"),
        "new": medians("new"),
        "paired_p50_difference_median_ms": round(statistics.median(paired), 3),
        "new_faster_pairs": sum(1 for d in paired if d < 0),
    }


def folders(vaults: str) -> list[str]:
    """The absolute paths of comma-separated folders (a run starts in another folder)."""
    return [str(Path(p).resolve()) for p in vaults.split(",") if p]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="a git revision or a source folder")
    parser.add_argument("--new", type=Path, default=REPO, help="a source folder (default: here)")
    parser.add_argument("--runs", type=int, default=8, help="pairs of runs (default 8)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cold", help="time `sync VAULT[,VAULT...]` into a new database")
    source.add_argument("--db-from", help="sync VAULT[,VAULT...] first (untimed), then time")
    source.add_argument(
        "--first-call", help="sync VAULT[,VAULT...] first (untimed), then time first BuildContexts"
    )
    parser.add_argument(
        "--passes", type=int, default=3, help="with --first-call: passes per run (default 3)"
    )
    parser.add_argument("--workdir", type=Path, help="keep the databases here")
    parser.add_argument(
        "--edit", type=Path, help="with --db-from: a note to append a line to before each run"
    )
    parser.add_argument("command", nargs="*", help="the contextgraph command, after --")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.passes < 1:
        parser.error("--passes must be at least 1")
    if (args.cold is not None or args.first_call is not None) and args.command:
        parser.error("--cold and --first-call time their own work: give no command")
    if args.db_from is not None and not args.command:
        parser.error("--db-from needs the command to time, after --")
    if args.edit is not None and (args.db_from is None or not args.edit.is_file()):
        parser.error("--edit needs --db-from and an existing note inside its folder")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="contextgraph-ab-"))
    work.mkdir(parents=True, exist_ok=True)
    worktree: Path | None = None
    base = Path(args.base)
    if not (base / "contextgraph").is_dir():  # a revision: check it out beside the databases
        worktree = work / "base-tree"
        added = subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), args.base],
            capture_output=True,
            text=True,
        )
        if added.returncode != 0:
            raise SystemExit(
                f"ab.py: {args.base} is neither a folder holding a contextgraph package nor a"
                f" revision git can check out: {added.stderr.strip()}"
            )
        base = worktree
    edit: Path | None = args.edit.resolve() if args.edit is not None else None
    kept = (edit.read_bytes(), edit.stat()) if edit is not None else None
    try:
        trees = {"base": base.resolve(), "new": args.new.resolve()}
        databases = {side: work / f"{side}.db" for side in trees}
        for tree in trees.values():
            check_tree(tree)
        if args.cold is not None:
            command = ["sync", *folders(args.cold)]
        else:
            command = list(args.command)
            for side, tree in trees.items():
                remove_database(databases[side])
                sync = ["sync", *folders(args.db_from or args.first_call)]
                run_once(tree, databases[side], sync, phases=False)
        if args.first_call is not None:
            result = compare_first_calls(trees, databases, args.runs, args.passes)
        else:
            cold = args.cold is not None
            result = compare(trees, databases, command, args.runs, cold, edit)
        result["trees"] = {side: str(tree) for side, tree in trees.items()}
        if worktree is not None:
            result["base_revision"] = args.base
        if edit is not None:
            result["edited"] = str(edit)
    finally:
        if edit is not None and kept is not None:
            edit.write_bytes(kept[0])
            os.utime(edit, ns=(kept[1].st_atime_ns, kept[1].st_mtime_ns))
        if worktree is not None:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
                check=False,
                capture_output=True,
            )
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
