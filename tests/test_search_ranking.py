"""Search's ranking shortcuts give exactly what scoring every match gives (SQLite, FTS5)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from contextgraph import ContextGraph
from contextgraph.graph import search
from contextgraph.graph.decay import age_days, weight_sql
from contextgraph.graph.ftsquery import build_match
from contextgraph.graph.search import COLUMN_WEIGHTS, Candidate, ranked_matches
from contextgraph.graph.searchbounds import WINDOW_MARGIN_SECONDS, window_start
from contextgraph.settings import Settings, parse_datetime
from contextgraph.store import db
from contextgraph.store.fulltext import full_text

NOW = parse_datetime("2026-11-30T12:00:00+00:00").timestamp()
COMMON = ["graph", "vector", "index", "query", "cache"]  # in nearly every note
MIDDLE = ["shard", "replica", "commit"]  # in about a fifth
RARE = ["zebra", "quokka"]  # in a few
QUERIES = [
    "graph",
    "graph vector",
    "index query cache",
    "graph zebra",
    "quokka",
    "shard",
    "replica commit graph",
    '"graph vector"',
    "vector quokka zebra",
    "GraphIndex",
]
SETTINGS = [
    Settings(),
    Settings(decay_model="exponential", grace_days=7.0, half_life_days=20.0),
    Settings(grace_days=0.0),
]


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContextGraph]:
    """About 700 notes in two sources: ages from today to years ago, some only dated by mtime."""
    root = tmp_path_factory.mktemp("ranking")
    rng = random.Random(5)
    for source in ("one", "two"):
        for n in range(350):
            folder = rng.choice(["", "a", "a/b", "c"])
            path = root / source / folder / f"note-{n:03d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            words = rng.choices(COMMON, k=rng.randint(3, 40))
            kind = rng.choices(["recent", "middle", "old", "undated"], [2, 3, 4, 1])[0]
            # The middle words are weak in recent notes (once, in a long text) and strong in
            # notes a month or two old (repeated, in a short one): old notes can win the page.
            for word in MIDDLE:
                if rng.random() < 0.2:
                    if kind == "middle":
                        words = words[:4] + [word] * 8
                    else:
                        words += [word, *rng.choices(COMMON, k=60)]
            words += [w for w in RARE if rng.random() < 0.02]
            rng.shuffle(words)
            header = ""
            if kind != "undated":  # an undated note's base time is its mtime (today)
                low, high = {"recent": (0, 28), "middle": (29, 90), "old": (90, 1500)}[kind]
                day = time.strftime("%Y-%m-%d", time.gmtime(NOW - rng.uniform(low, high) * 86400))
                header = f"---\ncreated: {day}\n---\n"
            title = "GraphIndex notes" if n % 23 == 0 else f"Note {n}"
            path.write_text(f"{header}# {title}\n\n{' '.join(words)}.\n", encoding="utf-8")
    graph = ContextGraph.open(root / "graph.db")
    for source in ("one", "two"):
        graph.sync([root / source], name=source)
    for hit in graph.search("quokka zebra", limit=5).hits:  # a read makes a note fresh
        graph.read(hit.uri)
    yield graph
    graph.close()


def every_match_scored(
    conn: Any, match: str, settings: Settings, **filters: Any
) -> list[Candidate]:
    """The reference: every match with its bm25 and decay, sorted in Python."""
    f, s = search._F, search._S
    fts = full_text(conn, match, f, COLUMN_WEIGHTS)
    query = (
        select(
            f.c.id,
            s.c.name,
            f.c.path,
            f.c.kind,
            f.c.title,
            fts.rank.label("bm25"),
            weight_sql(f, NOW, settings).label("decay"),
        )
        .select_from(fts.joined.join(s, s.c.id == f.c.source_id))
        .where(fts.match)
    )
    if filters.get("source") is not None:
        query = query.where(s.c.name == filters["source"])
    if filters.get("kind") is not None:
        query = query.where(f.c.kind == filters["kind"])
    if filters.get("folder") is not None:
        query = query.where(f.c.path.like(filters["folder"] + "/%"))
    return search._scored(conn.execute(query).all())


@pytest.fixture
def recent_first_answers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each search was proven by its recent files (True) or ranked another way."""
    answers: list[bool] = []
    original = search._Ranking.recent_first

    def spy(self: Any, match: str, top: int, n: int, *, filtered: bool) -> Any:
        found = original(self, match, top, n, filtered=filtered)
        answers.append(found is not None)
        return found

    monkeypatch.setattr(search._Ranking, "recent_first", spy)
    return answers


@pytest.mark.parametrize("settings", SETTINGS, ids=["power-law", "exponential", "no-grace"])
@pytest.mark.parametrize("top", [1, 10, 30, 200])
def test_every_shortcut_ranks_exactly_as_scoring_every_match(
    graph: ContextGraph, settings: Settings, top: int, recent_first_answers: list[bool]
) -> None:
    with db.read(graph.engine) as conn:
        for query in QUERIES:
            for all_words in (False, True):
                match = build_match(query, all_words=all_words)
                assert match is not None
                for filters in ({}, {"source": "two"}, {"folder": "a"}, {"kind": "note"}):
                    expected = every_match_scored(conn, match, settings, **filters)
                    found, total = ranked_matches(
                        conn, match, settings=settings, now=NOW, top=top, **filters
                    )
                    assert total == len(expected), (query, filters)
                    assert found == expected[:top], (query, all_words, filters, top)
    if top <= 30:  # the common words match most notes: recent files must prove most pages
        assert sum(recent_first_answers) >= len(recent_first_answers) // 2, recent_first_answers


def test_the_ceilings_bound_every_files_bm25(graph: ContextGraph) -> None:
    with db.read(graph.engine) as conn:
        for query in QUERIES:
            match = build_match(query)
            assert match is not None
            scored = every_match_scored(conn, match, Settings())
            bounds = search.bm25_bounds(conn, match, rare_below=len(scored) * search.RARE_SHARE)
            assert bounds is not None
            assert max(-c.bm25 for c in scored) < bounds.ceiling
            rare = build_match(" ".join(bounds.rare)) if bounds.rare else None
            holding = set()
            if rare is not None:
                holding = {c.file_id for c in every_match_scored(conn, rare, Settings())}
            common = [-c.bm25 for c in scored if c.file_id not in holding]
            assert not common or max(common) < bounds.common_ceiling


def test_the_row_count_is_read_from_fts5s_own_record(graph: ContextGraph) -> None:
    with db.read(graph.engine) as conn:
        block = conn.exec_driver_sql("SELECT block FROM files_fts_data WHERE id = 1").scalar()
        files = conn.exec_driver_sql("SELECT count(*) FROM files").scalar()
    assert search.fts_row_count(block) == files
    assert search.fts_row_count(b"") is None
    assert search.fts_row_count(None) is None
    assert search.fts_row_count(bytes([0x81, 0x00])) == 128  # a two-byte varint
    assert search.fts_row_count(bytes([0xFF] * 8 + [0x01])) == (2**56 - 1) << 8 | 1


@pytest.mark.parametrize("settings", SETTINGS, ids=["power-law", "exponential", "no-grace"])
def test_oldest_age_is_the_last_day_of_at_least_that_weight(settings: Settings) -> None:
    for least in (1.0, 0.9, 0.5, 0.1, 1e-3):
        age = search.oldest_age(least, NOW, settings)
        assert age is not None
        assert search.weight_at_age(age, NOW, settings) >= least
        assert search.weight_at_age(age + 1, NOW, settings) < least
    assert search.oldest_age(1e-300, NOW, Settings()) is None  # every file, however old


def test_every_file_a_window_leaves_out_is_at_least_its_days_old() -> None:
    """The proof of a recent window counts on it: a file just before the window's start is
    ``out`` whole days old as SQL and Python compute an age, at any instant and epoch."""
    rng = random.Random(7)
    instants = [NOW, 0.0, 1.0, 4.1e9, *(rng.uniform(0, 4.1e9) for _ in range(2000))]
    for now in instants:
        out = rng.randrange(0, 5000)
        since = window_start(out, now)
        for reference in (math.nextafter(since, -math.inf), since - 1e-3, since - 0.5):
            assert age_days(reference, now) >= out, (now, out, reference)
        # and the window is no wider than a day and its margin beyond ``out - 1`` days
        assert age_days(since + WINDOW_MARGIN_SECONDS + 1e-3, now) <= out - 1


def test_a_search_page_equals_the_full_ranking(graph: ContextGraph, tmp_path: Path) -> None:
    every = graph.search("graph vector", limit=100, now="2026-11-30T12:00:00+00:00")
    for page in (1, 2, 5):
        got = graph.search("graph vector", limit=10, page=page, now="2026-11-30T12:00:00+00:00")
        assert got.total == every.total
        assert [h.uri for h in got.hits] == [h.uri for h in every.hits][(page - 1) * 10 :][:10]


def test_an_index_row_without_its_file_is_not_counted(graph: ContextGraph, tmp_path: Path) -> None:
    """A stale full-text row (its file deleted behind the triggers' back) is counted as before."""
    import shutil

    copy = tmp_path / "stale.db"
    graph.engine.dispose()
    shutil.copy(graph.database_path or "", copy)
    with ContextGraph.open(copy) as stale:
        with stale.engine.begin() as conn:
            conn.exec_driver_sql("DROP TRIGGER files_fts_delete")
            conn.exec_driver_sql("DELETE FROM files WHERE path LIKE 'note-00%'")
        with db.read(stale.engine) as conn:
            match = build_match("graph")
            assert match is not None
            expected = every_match_scored(conn, match, Settings())
            found, total = ranked_matches(conn, match, settings=Settings(), now=NOW, top=10)
            fts = conn.exec_driver_sql(
                "SELECT count(*) FROM files_fts WHERE files_fts MATCH ?", (match,)
            ).scalar()
    assert fts > total  # the index still holds the deleted files
    assert total == len(expected)
    assert found == expected[:10]
