#!/usr/bin/env python3
"""Benchmark contextgraph on a deterministic synthetic vault; print one JSON object.

    python scripts/bench.py --notes 10000 --runs 3
    python scripts/bench.py --notes 10000 --runs 3 --db postgresql://user@host/bench
    python scripts/bench.py --only cli --db-file DB [--vault FOLDER]   # CLI walls only (a minute)
    python scripts/bench.py --vault A,B --first-call-passes 5   # + first BuildContext, best CPU
    python scripts/bench.py --only first-call --db-file DB --first-call-passes 3

With ``--db`` every run uses that PostgreSQL database, emptied first (use a throwaway one);
by default each run gets a fresh SQLite file in the workdir.

Sync timings run the real CLI in a subprocess (process start included) and report the median of
``--runs`` runs; query latencies are measured in-process over 200 concepts drawn evenly across the
degree range. Nothing here asserts: compare the figures with the targets in the README.

``--only cli`` times only the CLI commands (``cli_wall``, same keys and same query targets) on an
existing database (``--db-file``; with ``--vault`` a missing one is synced first, untimed), so a
change to start-up or imports can be measured in a minute. Each ``cli_wall`` command also
reports ``imports_s``: what ``python -X importtime`` says its imports cost (median over
``--import-runs`` processes), split into SQLAlchemy, contextgraph, click and the rest.

``--only first-call`` times only the first depth-2 BuildContext of ``--queries`` concepts on
an existing database (``--db-file``), with the public API alone, so it also runs against older
trees (``scripts/ab.py --first-call``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

WORDS = """
    alpha beta gamma delta graph vector index query cache store model layer token stream
    batch shard replica commit merge branch schema table column row page block node edge
    cluster signal trace metric span event queue topic worker scheduler kernel thread
    """.split()  # noqa: SIM905 - a word list reads best as prose


def generate_vault(root: Path, notes: int, seed: int = 7) -> None:
    """Write ``notes`` markdown files with power-law link degrees into ``root``."""
    rng = random.Random(seed)
    vocabulary = max(50, notes // 2)
    concepts = [f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} {i}" for i in range(vocabulary)]
    # Zipf-like popularity: concept i is picked with weight 1 / (i + 1) ** 0.9.
    weights = [1.0 / (i + 1) ** 0.9 for i in range(vocabulary)]
    folders = ["/".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3))) for _ in range(60)]
    start = time.mktime((2023, 1, 1, 0, 0, 0, 0, 0, 0))
    for n in range(notes):
        folder = folders[n % len(folders)]
        path = root / folder / f"note-{n:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        degree = min(60, max(1, int(rng.paretovariate(1.6) * 3)))
        links = rng.choices(concepts, weights=weights, k=degree)
        created = time.strftime("%Y-%m-%d", time.gmtime(start + rng.random() * 3.9 * 365 * 86400))
        lines = [f"---\ntitle: Note {n}\ncreated: {created}\n---", f"# Note {n}", ""]
        for i, link in enumerate(links):
            filler = " ".join(rng.choices(WORDS, k=rng.randint(4, 14)))
            alias = f"|{link.lower()}" if i % 7 == 3 else ""
            lines.append(f"{filler.capitalize()} about [[{link}{alias}]].")
            if i % 5 == 4:
                lines.append("")
        prose = " ".join(rng.choices(WORDS, k=rng.randint(60, 200)))
        lines += ["", "## Notes", "", prose.capitalize() + "."]
        if n % 10 == 0:
            lines += ["", "```python", "x = '[[Not A Concept]]'", "```", ""]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def child_env(db: Path | str) -> dict[str, str]:
    """The environment of a timed process: bytecode cached, as in an installed package.

    ``PYTHONDONTWRITEBYTECODE`` (set in some shells and CI images) makes every run compile the
    package's modules from source again, ~0.1 s that no installed copy pays (pip compiles on
    install); :func:`compile_package` writes the bytecode once, before any timing.
    """
    env = dict(os.environ, CONTEXTGRAPH_DB=str(db))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("CONTEXTGRAPH_NO_RESIDENT", "1")  # a fresh process does all the work itself
    return env


def compile_package() -> None:
    """Write the bytecode of every contextgraph module (untimed; pip does this on install)."""
    import compileall

    import contextgraph

    compileall.compile_dir(Path(contextgraph.__file__).parent, quiet=1)


class CliRun(NamedTuple):
    """One CLI process: its wall seconds, JSON output, peak RSS (KiB, the largest of any
    process waited for so far) and CPU seconds (user + sys, with its worker processes)."""

    wall: float
    output: dict[str, Any]
    rss_kib: int
    cpu: float


def run_cli(db: Path | str, *args: str) -> CliRun:
    """Run the CLI in a fresh process and wait for it."""
    env = child_env(db)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "contextgraph", *args, "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # A child's rusage counts its own children (the sync's workers) once it has waited for them.
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return CliRun(wall, json.loads(out.stdout), max(before.ru_maxrss, after.ru_maxrss), cpu)


def cli_wall(db: Path, args: list[str], runs: int) -> dict[str, Any]:
    """Median wall time of ``contextgraph ARGS --json`` in fresh processes (start-up included)."""
    return process_wall(db, ["-m", "contextgraph", *args, "--json"], runs)


def process_wall(db: Path | str, argv: list[str], runs: int) -> dict[str, Any]:
    """Median wall and CPU (user + sys) time of ``python ARGV`` in fresh processes."""
    env = child_env(db)
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([sys.executable, *argv], env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "cpu_median_s": round(statistics.median(cpu), 3),
    }


IMPORT_GROUPS = ("sqlalchemy", "contextgraph", "click")
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+\d+ \|( *)([\w.]+)$")


def import_costs(db: Path | str, args: list[str], runs: int) -> dict[str, float]:
    """Seconds spent importing in ``contextgraph ARGS --json``, by who asked (``-X importtime``).

    Every module's own time goes to the nearest of itself and the modules that imported it
    that belongs to SQLAlchemy, contextgraph or click (asyncio, which SQLAlchemy imports, counts
    as SQLAlchemy's; json, imported by contextgraph, as contextgraph's); "other" is Python's own
    start-up (site, encodings, runpy). Medians over ``runs`` processes. importtime measures wall
    time and adds a little of its own: compare these with each other, on a quiet machine.
    """
    env = child_env(db)
    totals: dict[str, list[float]] = {}
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "contextgraph", *args, "--json"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        shares = dict.fromkeys((*IMPORT_GROUPS, "other", "total"), 0.0)
        # importtime prints a module after the modules it imported, indented one step less:
        # read backwards, the open ancestors of a line are a stack.
        ancestors: list[tuple[int, str]] = []
        for line in reversed(done.stderr.splitlines()):
            match = _IMPORT_LINE.match(line)
            if match is None:
                continue  # the header line, or the command's own stderr
            own, indent, name = int(match.group(1)) / 1e6, len(match.group(2)), match.group(3)
            while ancestors and ancestors[-1][0] >= indent:
                ancestors.pop()
            ancestors.append((indent, name.split(".")[0]))
            group = next((r for _, r in reversed(ancestors) if r in IMPORT_GROUPS), "other")
            shares[group] += own
            shares["total"] += own
        for key, value in shares.items():
            totals.setdefault(key, []).append(value)
    return {key: round(statistics.median(values), 3) for key, values in totals.items()}


def cli_targets(graph: Any, names: list[str]) -> tuple[str, str, str | None]:
    """What the CLI timings ask: a hub, a median-degree concept and a note's URI."""
    hub = names[0] if names else "x"
    middle = names[len(names) // 2] if names else "x"
    _, selective = query_sets(names)
    uri = next((h.uri for q in selective[:60] for h in graph.search(q, limit=5).hits), None)
    return hub, middle, uri


def query_sets(names: list[str]) -> tuple[list[str], list[str]]:
    """The two search query sets: filler words most notes contain, and concept names."""
    # Two query sets: words of the filler vocabulary, which most notes contain (the worst
    # case: bm25 and decay over thousands of matches), and concept names, as a user would
    # type them (selective).
    words = [w for w in WORDS if len(w) > 3]
    rng = random.Random(11)
    common = [" ".join(rng.sample(words, rng.choice((1, 1, 2, 3)))) for _ in range(180)]
    common += ['"' + " ".join(rng.sample(words, 2)) + '"' for _ in range(20)]
    selective = [name.replace("-", " ") for name in rng.sample(names, min(200, len(names)))]
    return common, selective


def cli_commands(targets: tuple[str, str, str | None]) -> dict[str, list[str]]:
    """The timed CLI command lines, by name (a no-change ``sync`` among them)."""
    hub, middle, uri = targets
    commands = {
        "context_hub": ["context", hub],
        "context_median_degree": ["context", middle],
        "search_common_word": ["search", "graph"],
        "stats": ["stats"],
        "expand": ["expand", middle],
        "retrieve": ["retrieve", "graph"],
        "communities": ["communities"],
        "sync_nochange": ["sync"],
    }
    if uri is not None:  # last: a read makes its note fresh
        commands["read"] = ["read", uri]
    return commands


def bench_cli(
    db_file: Path | str,
    targets: tuple[str, str, str | None],
    runs: int,
    import_runs: int,
) -> dict[str, Any]:
    """CLI wall time per command, process start included (what a user feels), and floors."""
    commands = cli_commands(targets)
    walls: dict[str, Any] = {}
    for name, args in commands.items():
        walls[name] = cli_wall(db_file, args, runs)
        if import_runs:
            walls[name]["imports_s"] = import_costs(db_file, args, import_runs)
    # What any command pays before its own work: Python alone, Python with SQLAlchemy (every
    # query reads through it), and with the tables (every query uses them).
    floors = {
        "python_sqlite3_floor": "import sqlite3",
        "python_sqlalchemy_floor": "import sqlalchemy, sqlite3",
        "python_models_floor": "import contextgraph.store.models",
    }
    for name, code in floors.items():
        floor = process_wall(db_file, ["-c", code], runs)
        walls[f"{name}_s"] = floor["median_s"]
        walls[f"{name}_cpu_s"] = floor["cpu_median_s"]
    return walls


def bench_cli_resident(
    db_file: Path | str, targets: tuple[str, str, str | None], runs: int
) -> dict[str, Any]:
    """The same CLI commands answered by a ``contextgraph resident`` server (``cli_wall_resident``).

    The server starts on the database (untimed), each command runs ``runs`` times in fresh
    processes as in :func:`bench_cli` (``first_s``: the first run, the server's first call for
    that command line; the median includes the warm ones), and the server's count of queries it
    answered shows that every one was forwarded (the no-change ``sync`` too: the server answers
    a sync that changes nothing).
    """
    from contextgraph import launch

    commands = cli_commands(targets)
    env = child_env(db_file)
    env.pop("CONTEXTGRAPH_NO_RESIDENT")
    server = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "resident"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        path = launch.socket_path(launch.database_key(str(db_file)) or "")
        deadline = time.monotonic() + 120
        while not os.path.exists(path):
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the resident server did not start: {server.communicate()[1]}")
            time.sleep(0.05)
        walls: dict[str, Any] = {}
        for name, args in commands.items():
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "contextgraph", *args, "--json"],
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                times.append(time.perf_counter() - t)
            walls[name] = {
                "median_s": round(statistics.median(times), 3),
                "first_s": round(times[0], 3),
                "min_s": round(min(times), 3),
                "max_s": round(max(times), 3),
            }
    finally:
        server.terminate()
        _out, err = server.communicate(timeout=60)
    walls["served"] = err.strip().splitlines()[-1]
    walls["expected"] = f"stopped after {runs * len(commands)} queries"
    return walls


def bench_cli_only(args: argparse.Namespace) -> dict[str, Any]:
    """``--only cli``: the CLI timings alone, on an existing (or once-synced) database."""
    from contextgraph import ContextGraph

    if args.db_file is None:
        raise SystemExit("--only cli needs --db-file PATH (an existing database, or with --vault)")
    db_file: Path = args.db_file
    compile_package()
    result: dict[str, Any] = {"engine": "sqlite", "db_file": str(db_file)}
    if not db_file.exists():
        if args.vault is None:
            raise SystemExit(f"no database at {db_file}: give --vault FOLDER to sync one first")
        synced = run_cli(db_file, "sync", *(p for p in args.vault.split(",") if p))
        result["cold_sync_s"] = round(synced.wall, 3)  # one run, for the record only
    with ContextGraph.open(db_file, create=False) as graph:
        result["db_bytes"] = graph.stats().database_bytes
        names = sample_concepts(graph, args.queries)
        targets = cli_targets(graph, names)
    result["cli_targets"] = dict(
        zip(("context_hub", "context_median_degree", "read"), targets, strict=True)
    )
    result["cli_wall"] = bench_cli(db_file, targets, args.cli_runs, args.import_runs)
    result["cli_wall_resident"] = bench_cli_resident(db_file, targets, args.cli_runs)
    return result


def first_calls(graph: Any, names: list[str], passes: int) -> dict[str, Any]:
    """What a CLI run always is: the first BuildContext of a concept (depth 2), nothing cached.

    The process's neighbourhood cache is emptied before every call (untimed). With ``passes``,
    the same again as CPU time, each concept's best of that many passes: on a shared machine
    one wall-clock pass moves with the load, the best CPU time repeats.
    """
    try:
        from contextgraph.graph.neighbourhood import Neighbourhoods
    except ImportError:  # a tree from before the graph package (ab.py --first-call)
        from contextgraph.neighbourhood import Neighbourhoods  # type: ignore[no-redef]

    def call(concept: str) -> None:
        graph.build_context(concept, depth=2)

    empty = Neighbourhoods._states.clear
    out: dict[str, Any] = {"build_context_depth2_first_call": time_queries(call, names, empty)}
    if passes > 0:
        out["build_context_depth2_first_call_cpu_best"] = {
            "passes": passes,
            **time_queries(call, names, empty, passes=passes, clock=time.process_time),
        }
    return out


def bench_first_call_only(args: argparse.Namespace) -> dict[str, Any]:
    """``--only first-call``: first BuildContext latencies alone, on an existing database.

    Only the public ``ContextGraph`` API and the neighbourhood cache are used, so the package
    on ``PYTHONPATH`` may be an older tree (``scripts/ab.py --first-call`` compares two)."""
    from contextgraph import ContextGraph

    if args.db_file is None or not args.db_file.exists():
        raise SystemExit("--only first-call needs --db-file PATH, an existing database")
    with ContextGraph.open(args.db_file) as graph:
        names = sample_concepts(graph, args.queries)
        return {"queries": len(names), **first_calls(graph, names, args.first_call_passes)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def sample_concepts(graph: Any, count: int) -> list[str]:
    """Pick ``count`` concepts spread evenly over the degree ranking (hubs to leaves)."""
    from sqlalchemy import text

    # The engine's own connection, not the store's helpers: ``--only first-call`` runs this
    # with older trees too (``scripts/ab.py --first-call``), whose modules are laid out
    # otherwise.
    with graph.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT e.name, (SELECT count(*) FROM concept_relations r "
                " WHERE r.a_id = e.id OR r.b_id = e.id) AS degree "
                "FROM entities e WHERE e.kind = 'concept' ORDER BY degree DESC, e.name"
            )
        ).all()
    if not rows:
        return []
    step = max(1, len(rows) / count)
    return [rows[min(len(rows) - 1, int(i * step))][0] for i in range(min(count, len(rows)))]


def time_queries(
    fn: Any,
    items: list[Any],
    before: Any = None,
    *,
    passes: int = 1,
    clock: Any = time.perf_counter,
) -> dict[str, float]:
    """Latency percentiles of ``fn(item)``; ``before()`` (untimed) runs ahead of each call.

    With ``passes`` above 1 every item is timed that many times (a pass over all items after
    another) and its best time counts; ``clock`` is what times it (wall by default).
    """
    fn(items[0])  # warm the page cache and statement caches
    best = [float("inf")] * len(items)
    for _ in range(passes):
        for i, item in enumerate(items):
            if before is not None:
                before()
            t = clock()
            fn(item)
            best[i] = min(best[i], (clock() - t) * 1000)
    return {
        "p50_ms": round(statistics.median(best), 3),
        "p95_ms": round(percentile(best, 95), 3),
        "max_ms": round(max(best), 3),
    }


def bench_communities(work: Path, edges: int) -> dict[str, Any]:
    """Time a community rebuild on a power-law graph of about ``edges`` co-occurrence edges."""
    import igraph
    from sqlalchemy import text

    from contextgraph import ContextGraph
    from contextgraph.store import db

    nodes = max(10, edges // 5)
    g = igraph.Graph.Barabasi(nodes, 5, outpref=False, directed=False)
    rng = random.Random(3)
    path = work / "communities.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with ContextGraph.open(path) as graph:
        with db.write(graph.engine) as conn:
            conn.exec_driver_sql(
                "INSERT INTO entities (id, kind, key, name, name_lower)"
                " VALUES (?, 'concept', ?, ?, ?)",
                [(i + 1, f"c{i:07d}", f"c{i:07d}", f"c{i:07d}") for i in range(nodes)],
            )
            pairs = {(min(a, b) + 1, max(a, b) + 1) for a, b in g.get_edgelist() if a != b}
            conn.exec_driver_sql(
                "INSERT INTO concept_relations (a_id, b_id, count) VALUES (?, ?, ?)",
                [(a, b, rng.choice((1, 1, 1, 2, 3))) for a, b in sorted(pairs)],
            )
            count = conn.execute(text("SELECT count(*) FROM concept_relations")).scalar_one()
        from contextgraph.graph import communities

        t = time.perf_counter()
        communities.recompute(graph.engine, graph.settings)
        seconds = time.perf_counter() - t
        run = graph.communities().as_dict()["run"]
        return {
            "edges": count,
            "nodes": nodes,
            "rebuild_s": round(seconds, 3),
            "detection_s": round(run["seconds"], 3),
            "algorithm": run["algorithm"],
            "modularity": run["modularity"],
            "communities": run["communityCount"],
        }


def read_hash_regex_floor(folders: list[Path], passes: int = 3) -> float:
    """The least any sync of these notes costs, as the issue that set the cold-sync target
    measured it: read every note, hash it and find its links with one regex, in this process
    (the best of ``passes``, files in the page cache). A cold sync's multiple of it carries
    over to vaults whose notes are longer or shorter than these."""
    from contextgraph.notes.links import LINK_RE
    from contextgraph.store.identity import content_hash

    paths: list[str] = []
    for folder in folders:
        for top, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]  # as the scan skips them
            paths += [os.path.join(top, name) for name in names if name.endswith(".md")]
    best = float("inf")
    for _ in range(passes):
        t = time.perf_counter()
        for path in paths:
            with open(path, "rb") as handle:
                data = handle.read()
            content_hash(data)
            LINK_RE.findall(data.decode("utf-8", "replace"))
        best = min(best, time.perf_counter() - t)
    return best


def empty_database(url: str) -> None:
    """Drop everything of a server database (down to Alembic's base): a cold start."""
    from contextgraph.store import db

    engine = db.make_engine(url)
    try:
        db.upgrade(engine)
        db.downgrade(engine, "base")
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="runs per sync timing (median)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--cli-runs", type=int, default=7, help="fresh processes per CLI wall timing (median)"
    )
    parser.add_argument(
        "--vault",
        default=None,
        help="sync this folder (or several, comma-separated) instead of a generated vault",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the vault and database")
    parser.add_argument("--db", default=None, help="a PostgreSQL URL to bench (emptied first)")
    parser.add_argument(
        "--edges", type=int, default=0, help="also time communities on a synthetic N-edge graph"
    )
    parser.add_argument(
        "--only",
        choices=("cli", "first-call"),
        default=None,
        help="cli: only the CLI timings (cli_wall); first-call: only the first BuildContext",
    )
    parser.add_argument(
        "--db-file", type=Path, default=None, help="with --only: the SQLite database to use"
    )
    parser.add_argument(
        "--first-call-passes",
        type=int,
        default=0,
        help="also time each first BuildContext this many times, CPU, best per concept (0 = skip)",
    )
    parser.add_argument(
        "--import-runs",
        type=int,
        default=3,
        help="-X importtime processes per CLI command (median; 0 = skip)",
    )
    args = parser.parse_args()
    if args.only == "cli":
        print(json.dumps(bench_cli_only(args), indent=2))
        return
    if args.only == "first-call":
        print(json.dumps(bench_first_call_only(args), indent=2))
        return

    work = args.workdir or Path(tempfile.mkdtemp(prefix="cg-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.vault is not None:
        folders = [Path(p) for p in args.vault.split(",") if p]
        notes = sum(len(list(folder.rglob("*.md"))) for folder in folders)
        result: dict[str, Any] = {"vault": [str(f) for f in folders], "notes": notes}
    else:
        folders = [work / "vault"]
        if folders[0].exists():
            shutil.rmtree(folders[0])
        t = time.perf_counter()
        generate_vault(folders[0], args.notes)
        result = {"notes": args.notes, "generate_s": round(time.perf_counter() - t, 2)}
    result["engine"] = "postgresql" if args.db else "sqlite"

    compile_package()
    cold, cold_cpu, noop, one = [], [], [], []
    phases: list[dict[str, float]] = []  # each cold sync's own, to tell an outlier's phase
    report: dict[str, Any] = {}
    rss = 0
    for run in range(args.runs):
        db_file: Path | str = work / f"bench-{run}.db"
        if args.db:
            db_file = args.db
            empty_database(args.db)
        for suffix in ("", "-wal", "-shm"):
            if not args.db:
                Path(f"{db_file}{suffix}").unlink(missing_ok=True)
        synced = run_cli(db_file, "sync", *map(str, folders))
        report, rss = synced.output, synced.rss_kib
        cold.append(synced.wall)
        cold_cpu.append(synced.cpu)
        phases.append({k: round(v, 3) for k, v in report.get("seconds", {}).items()})
        noop.append(run_cli(db_file, "sync").wall)
        if args.vault is not None:
            continue  # never edit a folder we did not generate
        vault = folders[0]
        target = vault / next(iter(sorted(p.relative_to(vault) for p in vault.rglob("*.md"))))
        with target.open("a", encoding="utf-8") as handle:
            handle.write(f"\nEdited in run {run}: see [[Bench Edit {run}]].\n")
        one.append(run_cli(db_file, "sync").wall)
    db_file = args.db or work / f"bench-{args.runs - 1}.db"
    floor = read_hash_regex_floor(folders)
    result.update(
        {
            "cold_sync_s": round(statistics.median(cold), 3),
            "read_hash_regex_floor_s": round(floor, 3),
            "cold_sync_over_floor": round(statistics.median(cold) / floor, 1),
            "cold_sync_runs_s": [round(x, 3) for x in cold],
            # CPU of the sync and its workers, and the cores it kept busy on average (CPU /
            # wall): at os.cpu_count() the sync is bound by its CPU, not by waiting.
            "cold_sync_cpu_s": round(statistics.median(cold_cpu), 3),
            "cold_sync_busy_cores": round(
                statistics.median(c / w for c, w in zip(cold_cpu, cold, strict=True)), 2
            ),
            "cores": os.cpu_count(),
            "nochange_resync_s": round(statistics.median(noop), 3),
            "one_file_resync_s": round(statistics.median(one), 3) if one else None,
            "sync_peak_rss_mb": round(rss / 1024, 1),
            "concepts": report.get("concepts"),
            "relations": report.get("relations"),
            "communities": report.get("communities"),
            "modularity": report.get("modularity"),
            "sync_phases_s": report.get("seconds"),
            "cold_sync_phases_runs_s": phases,
        }
    )

    from contextgraph import ContextGraph
    from contextgraph.graph.neighbourhood import Neighbourhoods

    with ContextGraph.open(db_file) as graph:
        result["db_bytes"] = graph.stats().database_bytes
        names = sample_concepts(graph, args.queries)
        result.update(first_calls(graph, names, args.first_call_passes))
        # First pass: every concept's neighbourhood is read from SQLite for the first time.
        # Second pass: the same questions again, answered with the process's neighbourhood
        # cache (as a long-running MCP server or library user would).
        for depth in (1, 2):
            result[f"build_context_depth{depth}"] = time_queries(
                lambda c, d=depth: graph.build_context(c, depth=d), names
            )
        result["build_context_depth2_second_pass"] = time_queries(
            lambda c: graph.build_context(c, depth=2), names
        )
        result["build_context_depth2_content"] = time_queries(
            lambda c: graph.build_context(c, depth=2, include_content=True), names
        )
        from contextgraph.notes.preview import forget_notes

        def fresh() -> None:  # what a CLI run starts with: no neighbourhood, no note read
            Neighbourhoods._states.clear()
            forget_notes()

        result["build_context_depth2_content_first_call"] = time_queries(
            lambda c: graph.build_context(c, depth=2, include_content=True), names, before=fresh
        )
        with_siblings = [c for c in names if graph.build_context(c).community_siblings]
        result["concepts_with_siblings"] = len(with_siblings)
        from contextgraph.graph import communities

        t = time.perf_counter()
        communities.recompute(graph.engine, graph.settings)
        result["community_rebuild_s"] = round(time.perf_counter() - t, 3)
        run = graph.communities().as_dict()["run"]
        result["community_detection"] = {
            k: run[k] for k in ("algorithm", "seconds", "modularity", "nodeCount", "edgeCount")
        }
        common, selective = query_sets(names)
        result["search_common_words"] = time_queries(lambda q: graph.search(q), common)
        result["search_common_words"]["mean_total"] = round(
            statistics.mean(graph.search(q).total for q in common[:50]), 1
        )
        result["search_concept_names"] = time_queries(lambda q: graph.search(q), selective)
        result["search_concept_names"]["mean_total"] = round(
            statistics.mean(graph.search(q).total for q in selective[:50]), 1
        )
        uris = [h.uri for q in selective[:60] for h in graph.search(q, limit=5).hits][:200]
        result["read"] = time_queries(lambda u: graph.read(u), uris)
        targets = cli_targets(graph, names)
    result["cli_wall"] = bench_cli(db_file, targets, args.cli_runs, args.import_runs)
    result["cli_wall_resident"] = bench_cli_resident(db_file, targets, args.cli_runs)
    if args.edges:
        result["communities_synthetic"] = bench_communities(work, args.edges)
    result["bench_peak_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    result["workdir"] = str(work) if args.keep else None
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
