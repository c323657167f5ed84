"""Dump the full answers of search (and retrieve) for a few hundred queries, to diff two builds.

A change meant to make search faster must not change one answer: run this on the old code and
on the new one over the same databases (the databases are only read) and diff the outputs.

    python scripts/search_dump.py DB [DB ...] > new.jsonl
    PYTHONPATH=/path/to/old/checkout python scripts/search_dump.py DB [DB ...] > old.jsonl
    cmp old.jsonl new.jsonl

Queries: the filler words of ``bench.py`` (one to three, and quoted pairs), concept names,
code identifiers and title words taken from the database itself, odd inputs, each at several
fixed *now*s (fresh, older, everything old), with pages, limits, ``all_words`` and the
source and folder filters; ``retrieve`` for a share of them. Errors are dumped as their text.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import WORDS
from sqlalchemy import text

from contextgraph import ContextGraph
from contextgraph.store import db

NOWS = ("2026-12-01T16:00:00Z", "2027-09-01T00:00:00Z", "2031-01-01T00:00:00Z")
ODD = ("", "   ", '"', "a", "the", "AND OR NOT", "(((", "c++", "x" * 300, "über café", "*", "NEAR")


def sample_strings(graph: ContextGraph, sql: str, count: int, seed: int) -> list[str]:
    with db.read(graph.engine) as conn:
        values = [r[0] for r in conn.execute(text(sql)).all() if r[0]]
    rng = random.Random(seed)
    return rng.sample(values, min(count, len(values)))


def queries(graph: ContextGraph) -> list[str]:
    rng = random.Random(7)
    words = [w for w in WORDS if len(w) > 3]
    out = [" ".join(rng.sample(words, rng.choice((1, 1, 2, 3, 4)))) for _ in range(60)]
    out += ['"' + " ".join(rng.sample(words, 2)) + '"' for _ in range(10)]
    concepts = "SELECT name FROM entities WHERE kind = 'concept' ORDER BY name"
    out += [n.replace("-", " ") for n in sample_strings(graph, concepts, 40, 1)]
    symbols = "SELECT name FROM entities WHERE kind <> 'concept' ORDER BY name"
    out += sample_strings(graph, symbols, 40, 2)
    titles = "SELECT title FROM files WHERE title IS NOT NULL ORDER BY id"
    out += sample_strings(graph, titles, 30, 3)
    out += list(ODD)
    return out


def answer(fn: Any, query: str, kwargs: dict[str, Any]) -> Any:
    try:
        return fn(query, **kwargs).as_dict()
    except Exception as error:  # the error's text is part of the answer
        return {"error": type(error).__name__, "message": str(error)}


def dump(path: str, out: Any) -> None:
    with ContextGraph.open(path) as graph:
        sources = [s.name for s in graph.sources()]
        with db.read(graph.engine) as conn:
            paths = [r[0] for r in conn.execute(text("SELECT path FROM files ORDER BY id"))]
        folders = sorted({p.split("/")[0] for p in paths if "/" in p})[:3]
        qs = queries(graph)
        rng = random.Random(5)
        for i, q in enumerate(qs):
            for now in NOWS:
                cases: list[tuple[str, dict[str, Any]]] = [("search", {})]
                cases.append(("search", {"all_words": True}))
                cases.append(("search", {"limit": rng.choice((1, 5, 25)), "page": 2}))
                if i % 3 == 0:
                    cases.append(("search", {"limit": 50, "page": rng.choice((1, 3))}))
                    cases.append(("search", {"source": rng.choice([*sources, "nope"])}))
                    if folders:
                        cases.append(("search", {"folder": rng.choice(folders)}))
                if i % 4 == 0:
                    cases.append(("retrieve", {"k": 10}))
                for method, kwargs in cases:
                    result = answer(getattr(graph, method), q, {"now": now, **kwargs})
                    record = {"db": Path(path).name, "q": q, "now": now, "method": method}
                    out.write(json.dumps({**record, **kwargs, "answer": result}) + "\n")


def main() -> int:
    for path in sys.argv[1:]:
        dump(path, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
