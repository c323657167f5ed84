"""The oracle (SPEC §15): one set of files synced into SQLite and into PostgreSQL answers alike.

Every BuildContext, expansion, community, picture and the search hit sets must be equal between
the two engines (search scores differ in scale, not in which files match).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import EXAMPLES, NOW, DbFactory
from sqlalchemy import text

from contextgraph import ContextGraph, Settings
from contextgraph.settings import parse_datetime
from contextgraph.store import db

pytestmark = pytest.mark.engines("postgresql")

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "vector",
    "index",
    "query",
    "cache",
    "graph",
    "token",
    "parser",
]
QUERIES = [
    "machine learning",
    "TokenValidator",
    "token validator",
    "authentication service",
    '"feature stores"',
    "the parser",
    "c++ foo-bar NOT",
    "validate tokens",
    "graph OR index",
    "café",
    "alpha beta gamma",
]


def _generated(root: Path, seed: int = 5) -> None:
    """Notes of many ages (so decay weights vary), linking a few dozen concepts."""
    rng = random.Random(seed)
    concepts = [f"Topic {i}" for i in range(40)] + ["Machine Learning", "Shared Hub"]
    for n in range(160):
        year = rng.choice([2019, 2023, 2025, 2026, 2026])
        month = rng.randint(1, 11)
        links = " ".join(f"[[{c}]]" for c in rng.sample(concepts, rng.randint(1, 6)))
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        folder = root / f"d{n % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{n:03d}.md").write_text(
            f"---\ncreated: {year}-{month:02d}-{rng.randint(1, 28):02d}\n---\n"
            f"# Note {n}\n\n{words}. {links}\n\nMore about {rng.choice(WORDS)} here.\n",
            encoding="utf-8",
        )


@pytest.fixture
def engines(tmp_path: Path, new_db: DbFactory) -> Iterator[tuple[ContextGraph, ContextGraph]]:
    vault = tmp_path / "generated"
    _generated(vault)
    settings = Settings.from_env(now=parse_datetime(NOW))
    lite = ContextGraph.open(tmp_path / "oracle.db", settings=settings)
    pg = ContextGraph.open(new_db("oracle"), settings=settings)
    for graph in (lite, pg):
        graph.sync([EXAMPLES / "vault", EXAMPLES / "code", vault])
        for path in ("d0/n000.md", "d1/n001.md", "d3/n013.md"):
            graph.read(f"memory://generated/{path}")  # the same reads on both: fresher notes
    yield lite, pg
    lite.close()
    pg.close()


def _concepts(graph: ContextGraph) -> list[str]:
    with db.read(graph.engine) as conn:
        rows = conn.execute(text("SELECT key FROM entities WHERE kind = 'concept' ORDER BY key"))
        return [r[0] for r in rows]


def _entity_names(graph: ContextGraph) -> list[str]:
    with db.read(graph.engine) as conn:
        rows = conn.execute(text("SELECT DISTINCT name FROM entities ORDER BY name"))
        return [r[0] for r in rows]


def test_every_build_context_is_equal_on_both_engines(
    engines: tuple[ContextGraph, ContextGraph],
) -> None:
    lite, pg = engines
    names = _concepts(lite)
    assert names == _concepts(pg) and len(names) > 50
    for name in names:
        for depth, most in ((2, 20), (3, 5), (1, 3)):
            one = lite.build_context(name, depth=depth, max_entities=most, include_content=True)
            two = pg.build_context(name, depth=depth, max_entities=most, include_content=True)
            assert one.as_dict() == two.as_dict(), (name, depth, most)


def test_communities_pictures_and_stats_are_equal(
    engines: tuple[ContextGraph, ContextGraph],
) -> None:
    lite, pg = engines
    one, two = lite.communities().as_dict(), pg.communities().as_dict()
    for key in ("seconds", "createdAt", "created_at"):
        one["run"].pop(key, None)
        two["run"].pop(key, None)
    assert one == two
    assert one["communities"]
    for name in _concepts(lite)[:40]:
        assert lite.visualize(name) == pg.visualize(name), name
    keep = ("files", "concepts", "entities", "relations", "codeRelations", "communities")
    stats_one, stats_two = lite.stats().as_dict(), pg.stats().as_dict()
    assert {k: stats_one[k] for k in keep} == {k: stats_two[k] for k in keep}
    for key in keep:  # and in the same order: the same JSON, printed
        if isinstance(stats_one[key], dict):
            assert list(stats_one[key]) == list(stats_two[key]), key
    assert stats_one["modularity"] == pytest.approx(stats_two["modularity"], abs=0)
    assert lite.doctor().ok and pg.doctor().ok


def test_every_expansion_is_equal_on_both_engines(
    engines: tuple[ContextGraph, ContextGraph],
) -> None:
    lite, pg = engines
    names = _entity_names(lite)
    assert names == _entity_names(pg)
    for name in names:
        assert lite.expand([name]).as_dict() == pg.expand([name]).as_dict(), name
    assert (
        lite.expand(names[:6], max_depth=3, max_nodes=50).as_dict()
        == pg.expand(names[:6], max_depth=3, max_nodes=50).as_dict()
    )


def _all_hits(graph: ContextGraph, query: str, all_words: bool) -> dict[str, str]:
    """uri -> title of every match, over every page."""
    out: dict[str, str] = {}
    page = 1
    while True:
        result = graph.search(query, limit=100, page=page, all_words=all_words)
        out.update((h.uri, h.title) for h in result.hits)
        if page * 100 >= result.total:
            assert len(out) == result.total
            return out
        page += 1


def test_search_finds_the_same_files_on_both_engines(
    engines: tuple[ContextGraph, ContextGraph],
) -> None:
    lite, pg = engines
    for query in QUERIES:
        for all_words in (False, True):
            one, two = _all_hits(lite, query, all_words), _all_hits(pg, query, all_words)
            assert one == two, (query, all_words)
    # Ranking means the same: the files that name the thing come first on both.
    for query in ("TokenValidator", "authentication service"):
        top_one = {h.path for h in lite.search(query, limit=3).hits}
        top_two = {h.path for h in pg.search(query, limit=3).hits}
        assert top_one & top_two, query
