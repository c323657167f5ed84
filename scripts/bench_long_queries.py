#!/usr/bin/env python3
"""Time searches and retrievals of the longest queries a caller may send; print JSON.

    python scripts/bench_long_queries.py --db GRAPH.db [--runs 3]

The database is only read (opened without migrating). Three queries of about 4,000 characters
(``limits.MAX_QUERY_CHARS``), each once warm-up and then ``--runs`` times, CPU seconds:

- ``repeated_word``: ``md_md_…_md``, one word of 1,333 tokens (every note's path holds ``md``);
- ``fragments``: the 1,200 commonest letter runs of 1-4 characters (stopwords left out) of the
  longest file in the database, searched with ``limit`` 100 and retrieved with ``k`` 50 and
  the largest token budget: one stem per fragment to mark in 100 snippets;
- ``fragments_default``: the same with the default limits.

The report gives each query's median search and retrieval time. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import select

from contextgraph import ContextGraph
from contextgraph.graph.stopwords import STOPWORDS
from contextgraph.limits import MAX_QUERY_CHARS, RETRIEVE_BUDGET_TOKENS, RETRIEVE_K, SEARCH_LIMIT
from contextgraph.store import db
from contextgraph.store.models import T_FILES


def fragments_of(text: str, count: int = 1200) -> list[str]:
    """The commonest letter runs of 1-4 characters of ``text``, stopwords left out."""
    lowered = text.lower()
    grams: list[str] = []
    for size in (1, 2, 3, 4):
        runs = collections.Counter(
            lowered[i : i + size]
            for i in range(len(lowered) - size)
            if lowered[i : i + size].isalpha()
        )
        grams += [w for w, _ in runs.most_common(400)]
    return [w for w in grams if w not in STOPWORDS][:count]


def cpu_median(call: Callable[[], Any], runs: int) -> float:
    call()  # warm: statements compiled, pages cached
    times = []
    for _ in range(runs):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return round(statistics.median(times), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    graph = ContextGraph.open(args.db, migrate=False)
    with db.read(graph.engine) as conn:
        longest = conn.execute(
            select(T_FILES.c.text).order_by(T_FILES.c.size.desc()).limit(1)
        ).scalar_one()
    fragments = " ".join(fragments_of(longest or ""))[:MAX_QUERY_CHARS]
    most = (
        {"limit": SEARCH_LIMIT.high},
        {"k": RETRIEVE_K.high, "budget_tokens": RETRIEVE_BUDGET_TOKENS.high},
    )
    queries: list[tuple[str, str, tuple[dict[str, int], dict[str, int]]]] = [
        ("repeated_word", "_".join(["md"] * (MAX_QUERY_CHARS // 3)), ({}, {})),
        ("fragments", fragments, most),
        ("fragments_default", fragments, ({}, {})),
    ]
    report: dict[str, Any] = {"db": str(args.db), "runs": args.runs}
    for name, query, (search_kw, retrieve_kw) in queries:
        search = partial(graph.search, query, **search_kw)
        retrieve = partial(graph.retrieve, query, **retrieve_kw)
        report[name] = {
            "chars": len(query),
            "search_cpu_s": cpu_median(search, args.runs),
            "retrieve_cpu_s": cpu_median(retrieve, args.runs),
        }
    graph.close()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
