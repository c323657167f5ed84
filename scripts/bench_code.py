#!/usr/bin/env python3
"""Benchmark the code graph on a real installed package (default: sympy); print one JSON object.

    python scripts/bench_code.py --package sympy --runs 3

Copies the package's source folder, syncs it with the real CLI in a subprocess (cold, then a
no-change resync; medians of ``--runs``), counts entities and relations, then times
``expand`` over 200 symbol seeds drawn across the degree range (in-process).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run_sync(db: Path, *args: str) -> tuple[float, dict[str, Any]]:
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "contextgraph", "--db", str(db), "sync", *args, "--json"],
        check=True,
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    return time.perf_counter() - t, json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="sympy")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args()

    spec = importlib.util.find_spec(args.package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{args.package} is not installed (pip install {args.package})")
    source = Path(next(iter(spec.submodule_search_locations)))
    work = Path(tempfile.mkdtemp(prefix="cg-code-"))
    tree = work / args.package
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__"))
    files = sum(1 for _ in tree.rglob("*.py"))

    cold, noop = [], []
    report: dict[str, Any] = {}
    for run in range(args.runs):
        db = work / f"code-{run}.db"
        wall, report = run_sync(db, str(tree))
        cold.append(wall)
        noop.append(run_sync(db)[0])

    from sqlalchemy import text

    from contextgraph import ContextGraph
    from contextgraph.store import db as cgdb

    with ContextGraph.open(work / f"code-{args.runs - 1}.db") as graph:
        with cgdb.read(graph.engine) as conn:
            rows = conn.execute(
                text(
                    "SELECT e.name, (SELECT count(*) FROM relations r WHERE r.src_id = e.id"
                    " OR r.dst_id = e.id) AS degree FROM entities e WHERE e.kind = 'symbol'"
                    " ORDER BY degree DESC, e.name"
                )
            ).all()
        step = max(1, len(rows) // args.seeds)
        seeds = [rows[i][0] for i in range(0, len(rows), step)][: args.seeds]
        graph.expand([seeds[0]])
        times = []
        for seed in seeds:
            t = time.perf_counter()
            graph.expand([seed])
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        stats = graph.stats().as_dict()
    print(
        json.dumps(
            {
                "package": args.package,
                "python_files": files,
                "cold_sync_s": round(statistics.median(cold), 3),
                "cold_sync_runs_s": [round(x, 3) for x in cold],
                "nochange_resync_s": round(statistics.median(noop), 3),
                "sync_phases_s": report.get("seconds"),
                "failed_files": len(report.get("failed", [])),
                "entities": stats["entities"],
                "code_relations": stats["codeRelations"],
                "expand_p50_ms": round(statistics.median(times), 3),
                "expand_p95_ms": round(times[int(len(times) * 0.95) - 1], 3),
                "seeds": len(seeds),
            },
            indent=2,
        )
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
