"""communitySiblings (SPEC §5) on a hand-built graph, and the cache staying exact."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Writer
from sqlalchemy import event, text

from contextgraph import ContextGraph, Settings
from contextgraph.store import db
from contextgraph.store.meta import bump_version

pytestmark = pytest.mark.engines("sqlite", "postgresql")


@pytest.fixture
def graph(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    notes = [
        ("q", "n1"), ("q", "n1"), ("q", "n2"), ("q", "n3"), ("q", "n4"),
        ("c1", "n1"), ("c1", "n2"), ("c1", "n2"), ("c1", "n2"), ("c1", "n3"), ("c1", "x"),
        ("c2", "n1"), ("c2", "n2"),
    ]  # fmt: skip
    for i, (a, b) in enumerate(notes):
        write(f"note{i:02d}.md", f"[[{a}]] and [[{b}]]", created="2026-11-25")
    store.sync([vault])
    one_community(store)
    return store


def one_community(graph: ContextGraph) -> None:
    with db.write(graph.engine) as conn:
        conn.execute(text("UPDATE entities SET community_id = 7 WHERE kind = 'concept'"))
        bump_version(conn)


def siblings(graph: ContextGraph) -> list[tuple[str, int, float]]:
    result = graph.build_context("q")
    return [
        (s.name, s.shared_neighbor_count, s.normalized_overlap) for s in result.community_siblings
    ]


def test_sibling_overlap_follows_the_formula(graph: ContextGraph) -> None:
    # c1 shares n1, n2, n3 with q: Σ min(w(q,n), w(c1,n)) = 1 + 1 + 1 over Σ w(c1,·) = 6.
    assert siblings(graph) == [("c1", 3, 0.5)]


def force_way(monkeypatch: pytest.MonkeyPatch, way: str) -> None:
    """Make every sibling question take ``way``: python, walk (SQL) or match."""
    from contextgraph.graph.neighbourhood import Neighbourhoods

    monkeypatch.setattr(Neighbourhoods, "sibling_way", lambda *_: way)


@pytest.mark.parametrize("way", ["python", "walk", "match", "chosen"])
def test_the_three_ways_agree(
    graph: ContextGraph, db_url: str, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """Siblings by walking the neighbours' adjacency lists in Python, by walking their
    relations in SQL, or by matching the candidates' relations with the query's: the same
    answer either way."""
    from contextgraph.graph.neighbourhood import Neighbourhoods

    monkeypatch.setattr(Neighbourhoods, "_states", {})
    if way != "chosen":
        force_way(monkeypatch, way)
    assert siblings(graph) == [("c1", 3, 0.5)]
    monkeypatch.setenv("MAENIFOLD_COMMUNITY_MIN_SHARED", "2")
    relaxed = ContextGraph.open(db_url, settings=Settings.from_env(now=graph.settings.now))
    try:
        assert siblings(relaxed) == [("c2", 2, 1.0), ("c1", 3, 0.5)]
    finally:
        relaxed.close()


@pytest.mark.parametrize("min_overlap", ["0.05", "0.3"])
def test_both_ways_agree_for_every_concept_of_a_random_graph(
    store: ContextGraph,
    db_url: str,
    vault: Path,
    write: Writer,
    monkeypatch: pytest.MonkeyPatch,
    min_overlap: str,
) -> None:
    """Forty concepts, 150 notes of two to six links each, communities from the sync: every
    concept's siblings are the same whichever way they are found (the SQL walk drops some
    members before reading their strength, by a bound that depends on MIN_OVERLAP)."""
    import random

    from contextgraph.graph.neighbourhood import Neighbourhoods

    rng = random.Random(14)
    for i in range(150):
        links = " ".join(f"[[t{rng.randrange(40)}]]" for _ in range(rng.randint(2, 6)))
        write(f"r{i:03d}.md", f"note {i}: {links}", created="2026-11-25")
    store.sync([vault])
    monkeypatch.setenv("MAENIFOLD_COMMUNITY_MIN_SHARED", "2")
    monkeypatch.setenv("MAENIFOLD_COMMUNITY_MIN_OVERLAP", min_overlap)
    loose = Settings.from_env(now=store.settings.now)
    answers: dict[str, list[list[tuple[str, int, float]]]] = {}
    for way in ("python", "walk", "match"):
        monkeypatch.setattr(Neighbourhoods, "_states", {})
        force_way(monkeypatch, way)
        with ContextGraph.open(db_url, settings=loose) as graph:
            for t in range(40):
                found = graph.build_context(f"t{t}").community_siblings
                shape = [(s.name, s.shared_neighbor_count, s.normalized_overlap) for s in found]
                answers.setdefault(f"t{t}", []).append(shape)
    assert all(python == walked == matched for python, walked, matched in answers.values())
    assert sum(len(python) for python, _, _ in answers.values()) >= 20


def test_the_way_is_chosen_by_the_relation_rows_each_would_read(
    graph: ContextGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.graph import neighbourhood
    from contextgraph.graph.neighbourhood import SIBLING_COUNT_CAP, Neighbourhoods

    with db.read(graph.engine) as conn:
        ids = {key: int(i) for key, i in conn.execute(text("SELECT key, id FROM entities"))}
        nb = Neighbourhoods(graph.engine, conn, graph.settings, 0.0)
        # q: n1..n4; n1, n2: q, c1, c2; n3: q, c1; n4: q; c1: n1, n2, n3, x; c2: n1, n2
        assert nb.relation_rows([ids["q"]], 100) == 4
        assert nb.relation_rows([ids["n1"], ids["n2"], ids["c1"]], 100) == 10
        assert nb.relation_rows([ids["n1"], ids["n2"], ids["c1"]], 5) == 5  # stops at the cap
        # Up to the safety cap only, whole index ranges are counted: the same values.
        assert nb.relation_rows([ids["n1"], ids["n2"], ids["c1"]], SIBLING_COUNT_CAP) == 10
        assert nb.relation_rows([ids["q"], ids["x"]], SIBLING_COUNT_CAP) == 5
        monkeypatch.setattr(neighbourhood, "SIBLING_COUNT_CAP", 4)
        assert nb.relation_rows([ids["n1"], ids["n2"], ids["c1"]], 4) == 4  # min(10, cap)
        neighbours = [ids[n] for n in ("n1", "n2", "n3", "n4")]  # 3 + 3 + 2 + 1 rows
        assert nb.walk_is_cheaper(neighbours, [ids["c1"], ids["c2"]]) is False  # 9 > 6
        assert nb.walk_is_cheaper([ids["n4"]], [ids["c1"], ids["c2"]]) is True  # 1 ≤ 6
        assert nb.walk_is_cheaper(neighbours[:3], [ids["c1"], ids["c2"]]) is False  # 8 > 6
        assert nb.walk_is_cheaper([ids["n1"], ids["n2"]], [ids["c1"], ids["c2"]]) is True  # 6


def test_a_first_count_that_settles_the_way_is_the_only_one(
    graph: ContextGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Walking reads a row per neighbour at least, matching a row per candidate at least: when
    the first count is below the other side's number of concepts, the second is not made."""
    from contextgraph.graph.neighbourhood import Neighbourhoods

    counted: list[list[int]] = []
    real = Neighbourhoods.relation_rows

    def relation_rows(self: Neighbourhoods, ids: list[int], cap: int) -> int:
        counted.append(ids)
        return real(self, ids, cap)

    monkeypatch.setattr(Neighbourhoods, "relation_rows", relation_rows)
    with db.read(graph.engine) as conn:
        ids = {key: int(i) for key, i in conn.execute(text("SELECT key, id FROM entities"))}
        nb = Neighbourhoods(graph.engine, conn, graph.settings, 0.0)
        neighbours = [ids[n] for n in ("n1", "n2", "n3", "n4")]  # 9 relation rows
        # c2 has 2 relation rows, fewer than the 4 neighbours: matching it is cheaper.
        assert nb.walk_is_cheaper(neighbours, [ids["c2"]]) is False
        assert counted == [[ids["c2"]]]
        counted.clear()
        # n4 has 1 relation row, fewer than the 2 candidates: walking it is cheaper.
        assert nb.walk_is_cheaper([ids["n4"]], [ids["c1"], ids["c2"]]) is True
        assert counted == [[ids["n4"]]]
        counted.clear()
        # 9 rows to walk against 6 to match: both counts are needed.
        assert nb.walk_is_cheaper(neighbours, [ids["c1"], ids["c2"]]) is False
        assert len(counted) == 2


def test_a_first_question_reads_no_list_and_later_ones_fill_the_cache(
    graph: ContextGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.graph.neighbourhood import Neighbourhoods

    monkeypatch.setattr(Neighbourhoods, "_states", {})
    with db.read(graph.engine) as conn:
        ids = {key: int(i) for key, i in conn.execute(text("SELECT key, id FROM entities"))}
        nb = Neighbourhoods(graph.engine, conn, graph.settings, 0.0)
        candidates = [ids["c1"], ids["c2"]]  # 4 + 2 relation rows to match
        near = {ids["n4"]: 1}  # 1 relation row to read
        assert nb.sibling_way(near, candidates) == "walk"  # the process has asked nothing
        nb.overlaps(ids["q"], nb.adjacency(ids["q"]), candidates, 3, 0.4)
        assert nb.sibling_way(near, candidates) == "python"  # 1 row to read ≤ 6 to match
        around = {ids[n]: 1 for n in ("n1", "n2", "n3", "n4")}  # 9 rows, more than 6
        assert nb.sibling_way(around, candidates) == "match"
        nb.adjacencies(around)
        assert nb.sibling_way(around, candidates) == "python"  # all cached: nothing to read


def test_a_true_neighbour_is_never_a_sibling(graph: ContextGraph) -> None:
    # n2 shares c1 and c2 with ... but is adjacent to q; x and c2 share too few neighbours.
    names = {s[0] for s in siblings(graph)}
    assert not names & {"n1", "n2", "n3", "n4", "q"}


def test_thresholds_come_from_the_maenifold_environment_names(
    db_url: str, graph: ContextGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAENIFOLD_COMMUNITY_MIN_SHARED", "2")
    relaxed = ContextGraph.open(db_url, settings=Settings.from_env(now=graph.settings.now))
    assert siblings(relaxed) == [("c2", 2, 1.0), ("c1", 3, 0.5)]
    monkeypatch.setenv("MAENIFOLD_COMMUNITY_MIN_OVERLAP", "0.6")
    strict = ContextGraph.open(db_url, settings=Settings.from_env(now=graph.settings.now))
    assert siblings(strict) == [("c2", 2, 1.0)]
    monkeypatch.setenv("CONTEXTGRAPH_COMMUNITY_MAX_SIBLINGS", "0")
    none = ContextGraph.open(db_url, settings=Settings.from_env(now=graph.settings.now))
    assert siblings(none) == []
    for g in (relaxed, strict, none):
        g.close()


def test_a_warm_call_reads_no_relation_again(graph: ContextGraph) -> None:
    """The sibling overlaps are cached with the neighbourhood state, as the lists are."""
    first = siblings(graph)
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    event.listen(graph.engine, "before_cursor_execute", record)
    try:
        assert siblings(graph) == first
    finally:
        event.remove(graph.engine, "before_cursor_execute", record)
    assert statements, "the graph version is still read"
    assert [s for s in statements if "concept_relations" in s] == []


def test_other_communities_are_not_siblings(graph: ContextGraph) -> None:
    with db.write(graph.engine) as conn:
        conn.execute(text("UPDATE entities SET community_id = 8 WHERE key = 'c1'"))
        bump_version(conn)
    assert siblings(graph) == []


def test_cached_answers_follow_writes_from_another_connection(
    graph: ContextGraph, db_url: str, vault: Path, write: Writer
) -> None:
    assert [r.name for r in graph.build_context("q").direct_relations][:1] == ["n1"]
    other = ContextGraph.open(db_url, settings=graph.settings)
    for i in range(3):
        write(f"more{i}.md", "[[q]] and [[n4]]", created="2026-11-25")
    other.sync()
    one_community(other)
    assert [r.name for r in graph.build_context("q").direct_relations][:1] == ["n4"]
    other.close()


def test_cached_scores_follow_the_clock(store: ContextGraph, vault: Path, write: Writer) -> None:
    write("a.md", "[[q]] [[r]]", created="2026-10-01T06:00:00Z")
    store.sync([vault])
    # 2026-10-01T06:00 + 29 days: age 29 -> weight 1.0; six hours later it is still age 29;
    # at 2026-11-01T06:00 the age is 31 -> (31 - 28) ** -0.5.
    first = store.build_context("q", now="2026-10-30T06:00:00Z").direct_relations[0]
    later = store.build_context("q", now="2026-10-30T12:00:00Z").direct_relations[0]
    much_later = store.build_context("q", now="2026-11-01T06:00:00Z").direct_relations[0]
    assert first.decay_weight == later.decay_weight == 1.0
    assert much_later.decay_weight == pytest.approx(3**-0.5)
    earlier = store.build_context("q", now="2026-10-30T06:00:00Z").direct_relations[0]
    assert earlier.decay_weight == 1.0


def test_strengths_from_the_notes_equal_the_sums_of_the_stored_relations(
    db_url: str, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concept's strength is read from its notes (each adds its other concepts), not from its
    relations: equal for every concept, through edits, deletions, repeated links and notes over
    the concept limit (which add no pairs), also after the limit changes."""
    import random

    from sqlalchemy import func, select, union_all

    from contextgraph.graph.neighbourhood import Neighbourhoods
    from contextgraph.store.models import T_CREL, T_ENTITIES

    rng = random.Random(5)

    def write_all(count: int) -> None:
        for i in range(count):
            links = " ".join(f"[[s{rng.randrange(25)}]]" for _ in range(rng.randint(1, 7)))
            write(f"r{i:03d}.md", f"note {i}: {links} {links}")

    def check(limit: str) -> None:
        monkeypatch.setenv("CONTEXTGRAPH_MAX_CONCEPTS_PER_FILE", limit)
        with ContextGraph.open(db_url) as graph:
            graph.sync([vault], name="v")
            r = T_CREL.c
            ends = union_all(select(r.a_id.label("c"), r.count), select(r.b_id, r.count)).subquery()
            with db.read(graph.engine) as conn:
                expected = dict.fromkeys(conn.execute(select(T_ENTITIES.c.id)).scalars(), 0)
                totals = select(ends.c.c, func.sum(ends.c.count)).group_by(ends.c.c)
                expected.update((c, int(total)) for c, total in conn.execute(totals))
                nb = Neighbourhoods(graph.engine, conn, graph.settings, graph.settings.now)
                assert nb.strengths(sorted(expected)) == expected
                assert sum(expected.values()) > 0

    write_all(60)
    check("5")
    write_all(40)  # edits 40 notes, with other links
    for i in range(50, 60):
        (vault / f"r{i:03d}.md").unlink()
    check("5")
    check("1000")  # the limit raised: the notes over the old one are paired now


@pytest.mark.sqlite_only
def test_the_walk_reads_each_neighbours_relations_once_not_one_per_candidate(
    graph: ContextGraph,
) -> None:
    """SQLite's plan for the siblings' walk: each neighbour's relations by one end of the key,
    the candidates a list probed per row. Driven by the list instead, the plan looks up every
    (neighbour, candidate) pair: hundreds of candidates times the neighbours, for each query."""
    from contextgraph.graph.relationsql import WALK
    from contextgraph.store.sqlcore import ID_LIST, listed_on_sqlite

    sql = listed_on_sqlite(WALK.build).sql
    with db.read(graph.engine) as conn:
        plan = [
            str(row[-1])
            for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN " + sql, {"q": 1, "k": 3, ID_LIST: "[1, 2, 3]"}
            )
        ]
    walked = [step for step in plan if step.startswith("SEARCH r ")]
    assert walked == [
        "SEARCH r USING PRIMARY KEY (a_id=?)",
        "SEARCH r USING COVERING INDEX ix_concept_relations_b_id_a_id_count (b_id=?)",
    ], plan


@pytest.mark.sqlite_only
def test_the_match_groups_each_end_as_its_index_gives_it(graph: ContextGraph) -> None:
    """SQLite's plan for the siblings' match: each end's relations from its own index, grouped
    in that order (no sorter over every matched row), and q's relations looked up by key."""
    from contextgraph.graph.relationsql import OVERLAPS
    from contextgraph.store.sqlcore import ID_LIST, listed_on_sqlite

    compiled = listed_on_sqlite(OVERLAPS.build)
    with db.read(graph.engine) as conn:
        plan = [
            str(row[-1])
            for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN " + compiled.sql,
                {**compiled.constants, "q": 1, ID_LIST: "[1, 2, 3]"},
            )
        ]
    assert [step for step in plan if step.startswith("SEARCH r ")] == [
        "SEARCH r USING PRIMARY KEY (a_id=?)",
        "SEARCH r USING COVERING INDEX ix_concept_relations_b_id_a_id_count (b_id=?)",
    ], plan
    assert not [step for step in plan if "TEMP B-TREE" in step], plan
    assert sum("AUTOMATIC COVERING INDEX (n=?)" in step for step in plan) == 2, plan
