"""Retrieval quality on real repositories' histories: search, search + expand, retrieve.

For each case set in ``../shared/eval/*/`` (a repository's ``tree/`` and its ``cases.jsonl``:
query = a commit subject, gold = the non-test ``.py`` files that commit changed), sync the tree
once, run every case three ways, and print one JSON object:

- ``search``: §9 search (any words, code-aware, bm25 × decay), hits in order;
- ``search+expand``: the top ``--seeds`` search files, then the files that §8 expansion from
  them reaches (in expansion order), then the remaining search hits;
- ``retrieve``: §13 retrieval.

Every list is cut to non-test ``.py`` files (the gold universe) before it is scored at the same
k: recall@5, recall@10, hit@10, MRR (first gold file within the top 10), the share of cases
where the method has no candidate at all, and median / p95 latency in milliseconds. A
query-free floor ranks the largest non-test ``.py`` files first.

    python scripts/bench_retrieval.py                    # every case set under ../shared/eval
    python scripts/bench_retrieval.py --eval DIR --cases 200 --cache /tmp/cg-eval
    python scripts/bench_retrieval.py --vault-notes 10000   # plus latency on a synthetic vault
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from contextgraph import ContextGraph
from contextgraph.settings import Settings

DEFAULT_EVAL = Path(__file__).resolve().parents[1].parent / "shared" / "eval"
K = 10
SEARCH_DEPTH = 100  # hits asked of search before the cut to the gold universe


def is_gold_universe(path: str) -> bool:
    """A non-test ``.py`` file."""
    if not path.endswith(".py"):
        return False
    parts = path.split("/")
    name = parts[-1]
    if any(p in ("tests", "test", "testing") for p in parts[:-1]):
        return False
    return not (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")


def _cut(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        if is_gold_universe(path) and path not in out:
            out.append(path)
    return out


def score(ranked: list[str], gold: list[str]) -> dict[str, float]:
    wanted = set(gold)
    first = next((i for i, p in enumerate(ranked[:K], start=1) if p in wanted), None)
    return {
        "recall@5": len(wanted & set(ranked[:5])) / len(wanted),
        "recall@10": len(wanted & set(ranked[:10])) / len(wanted),
        "hit@10": 1.0 if first is not None else 0.0,
        "mrr": 1.0 / first if first is not None else 0.0,
        "empty": 0.0 if ranked else 1.0,
    }


def _summary(rows: list[dict[str, float]], latencies: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {key: round(statistics.fmean(r[key] for r in rows), 4) for key in rows[0]}
    ordered = sorted(latencies)
    out["latency_ms_p50"] = round(statistics.median(ordered) * 1000, 2)
    out["latency_ms_p95"] = round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2)
    return out


def run_search(graph: ContextGraph, query: str) -> list[str]:
    return _cut(h.path for h in graph.search(query, limit=SEARCH_DEPTH).hits)


def run_search_expand(graph: ContextGraph, query: str, seeds: int) -> list[str]:
    hits = [h.path for h in graph.search(query, limit=SEARCH_DEPTH).hits]
    top = _cut(hits)[:seeds]
    expanded: list[str] = []
    if top:
        result = graph.expand(top, max_depth=2, max_nodes=50)
        expanded = [r.path for r in result.results if r.path]
    return _cut([*top, *expanded, *hits])


def run_retrieve(graph: ContextGraph, query: str) -> list[str]:
    return _cut(item.path for item in graph.retrieve(query, k=50, budget_tokens=100).items)


def floor(graph: ContextGraph) -> list[str]:
    """The query-free floor: the largest non-test .py files first."""
    from sqlalchemy import select

    from contextgraph.store import db
    from contextgraph.store.models import T_FILES

    with db.read(graph.engine) as conn:
        rows = conn.execute(
            select(T_FILES.c.path).order_by(T_FILES.c.size.desc(), T_FILES.c.path)
        ).all()
    return _cut(r.path for r in rows)


def evaluate(folder: Path, cache: Path, cases_limit: int | None, seeds: int) -> dict[str, Any]:
    cases = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines() if line]
    if cases_limit:
        cases = cases[:cases_limit]
    database = cache / f"{folder.name}.db"
    started = time.perf_counter()
    graph = ContextGraph.open(database, settings=Settings.from_env(workers=1))
    report = graph.sync([folder / "tree"], name=folder.name)
    sync_seconds = time.perf_counter() - started
    methods: dict[str, Callable[[str], list[str]]] = {
        "search": lambda q: run_search(graph, q),
        "search+expand": lambda q: run_search_expand(graph, q, seeds),
        "retrieve": lambda q: run_retrieve(graph, q),
    }
    base = floor(graph)
    out: dict[str, Any] = {
        "cases": len(cases),
        "gold_universe_files": len(base),
        "sync_seconds": round(sync_seconds, 2),
        "files_synced": report.as_dict()["files"]["scanned"],
        "floor_largest_first": _summary([score(base, c["gold"]) for c in cases], [0.0]),
    }
    for name, method in methods.items():
        rows: list[dict[str, float]] = []
        latencies: list[float] = []
        for case in cases:
            t0 = time.perf_counter()
            ranked = method(case["query"])
            latencies.append(time.perf_counter() - t0)
            rows.append(score(ranked, case["gold"]))
        out[name] = _summary(rows, latencies)
    graph.close()
    return out


def vault_latency(cache: Path, notes: int, queries: int = 200) -> dict[str, Any]:
    """retrieve and search latency on a synthetic vault (``scripts/bench.py``'s generator)."""
    import random

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench import WORDS, generate_vault

    vault = cache / f"vault-{notes}"
    if not vault.exists():
        generate_vault(vault, notes)
    graph = ContextGraph.open(cache / f"vault-{notes}.db", settings=Settings.from_env())
    graph.sync([vault], name="vault")
    rng = random.Random(11)
    with_concepts = [
        f"how does {rng.choice(WORDS)} {rng.choice(WORDS)} relate to {rng.choice(WORDS)}"
        for _ in range(queries)
    ]
    out: dict[str, Any] = {"notes": notes, "queries": queries}
    for name, run in (
        ("retrieve", lambda q: graph.retrieve(q)),
        ("search", lambda q: graph.search(q, limit=10)),
    ):
        latencies = []
        for query in with_concepts:
            t0 = time.perf_counter()
            run(query)
            latencies.append(time.perf_counter() - t0)
        latencies.sort()
        out[name] = {
            "latency_ms_p50": round(statistics.median(latencies) * 1000, 2),
            "latency_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))] * 1000, 2),
        }
    graph.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL, help="folder of case sets")
    parser.add_argument("--cases", type=int, default=None, help="first N cases of each set")
    parser.add_argument("--seeds", type=int, default=5, help="search files seeding expand")
    parser.add_argument("--cache", type=Path, default=None, help="keep synced databases here")
    parser.add_argument("--only", default=None, help="only this case set (folder name)")
    parser.add_argument(
        "--vault-notes", type=int, default=0, help="also time retrieve on an N-note vault"
    )
    args = parser.parse_args(argv)
    sets = sorted(p for p in args.eval.iterdir() if (p / "cases.jsonl").exists())
    if args.only:
        sets = [p for p in sets if p.name == args.only]
    if not sets:
        print(f"no case sets under {args.eval}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache or Path(scratch)
        cache.mkdir(parents=True, exist_ok=True)
        result: dict[str, Any] = {p.name: evaluate(p, cache, args.cases, args.seeds) for p in sets}
        if args.vault_notes:
            result["synthetic_vault"] = vault_latency(cache, args.vault_notes)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
