"""Precomputed relation weights give exactly the answers of the on-the-fly computation."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import NOW, Writer
from sqlalchemy import event, text

from contextgraph import ContextGraph
from contextgraph.graph import weights
from contextgraph.graph.context import concept_key
from contextgraph.graph.neighbourhood import Neighbourhoods
from contextgraph.settings import Settings, parse_datetime
from contextgraph.store import db, meta

CONCEPTS = [f"Topic {i}" for i in range(14)]


def _write_vault(write: Writer, notes: int = 60, seed: int = 5) -> None:
    rng = random.Random(seed)
    for n in range(notes):
        links = rng.sample(CONCEPTS[: 4 + n % 10], k=rng.randint(2, 4))
        # Ages from a few days to years: inside the grace period, past it, far past it.
        created = (parse_datetime(NOW) - timedelta(days=rng.choice((3, 40, 75, 400, 1300)))).date()
        body = " ".join(f"See [[{c}]]." for c in links)
        write(f"n{n:03d}.md", body, created=created.isoformat() if n % 4 else None)


@pytest.fixture
def graph(db_path: Path, write: Writer, vault: Path) -> Iterator[ContextGraph]:
    _write_vault(write)
    settings = Settings.from_env(now=parse_datetime(NOW), weights_min_notes=1)
    g = ContextGraph.open(db_path, settings=settings)
    g.sync([vault])
    yield g
    g.close()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record every precomputed-list lookup: True when the list was used."""
    seen: list[bool] = []
    original = weights.load

    def spy(conn: object, cid: int, now: float, limit: int | None = None) -> object:
        found = original(conn, cid, now, limit)  # type: ignore[arg-type]
        seen.append(found is not None)
        return found

    monkeypatch.setattr(weights, "load", spy)
    return seen


def _answers(graph: ContextGraph, now: str | None = None) -> str:
    out = []
    for concept in CONCEPTS:
        for depth, limit in ((0, 20), (1, 3), (2, 20), (3, 4)):
            Neighbourhoods._states.clear()  # every answer from the database, as a CLI run
            ctx = graph.build_context(concept, depth=depth, max_entities=limit, now=now)
            out.append(ctx.as_dict())
    return json.dumps(out, sort_keys=True)


def _without_precompute(graph: ContextGraph, now: str | None = None) -> str:
    with db.write(graph.engine) as conn:  # no state, no lists: every step computed on the fly
        meta.put(conn, weights.STATE_KEY, "none")  # a state that matches no graph version
        conn.execute(text("DELETE FROM relation_weights"))
        conn.execute(text("DELETE FROM relation_weight_windows"))
        conn.execute(text("DELETE FROM concept_strengths"))
    try:
        return _answers(graph, now)
    finally:
        weights.refresh(graph.engine, graph.settings)


def test_sync_precomputes_and_build_context_reads_the_lists(
    graph: ContextGraph, loads: list[bool]
) -> None:
    assert weights.is_current(graph.engine, graph.settings)
    _answers(graph)
    assert loads and all(loads)


def test_precomputed_lists_give_the_same_json_as_the_on_the_fly_query(
    graph: ContextGraph, loads: list[bool]
) -> None:
    precomputed = _answers(graph)
    assert all(loads)
    loads.clear()
    assert _without_precompute(graph) == precomputed
    assert not any(loads)  # the state is gone: no list is even looked up


@pytest.mark.parametrize("hours", [-30, -1, 0.5, 11, 23.99, 24.01, 47, 24 * 40, 24 * 400])
def test_answers_stay_exact_across_day_boundaries(
    graph: ContextGraph, loads: list[bool], hours: float
) -> None:
    at = (parse_datetime(NOW) + timedelta(hours=hours)).isoformat()
    with_lists = _answers(graph, at)
    used = any(loads)
    assert _without_precompute(graph, at) == with_lists
    if hours > 24 * 39:  # 40 days on, the notes past their grace period have aged
        assert not used, "a list outside its window was used"


def test_a_graph_change_makes_the_lists_stale_until_the_next_sync(
    graph: ContextGraph, loads: list[bool], write: Writer, vault: Path
) -> None:
    write("n000.md", "Now [[Topic 1]] with [[Topic 9]] and [[Topic 13]].", created="2026-11-29")
    graph.sync()
    assert weights.is_current(graph.engine, graph.settings)
    after_sync = _answers(graph)
    assert all(loads)
    loads.clear()
    graph.read("n001.md")  # a read changes a reference time: every list is stale now
    assert not weights.is_current(graph.engine, graph.settings)
    stale = _answers(graph)
    assert not any(loads), "a stale list was used"
    weights.refresh(graph.engine, graph.settings)
    loads.clear()
    assert _answers(graph) == stale
    assert all(loads)
    assert after_sync  # (the read may or may not change a ranking)


def test_other_decay_settings_ignore_the_lists(graph: ContextGraph, loads: list[bool]) -> None:
    other = ContextGraph(graph.engine, graph.settings.replace(decay_model="exponential"))
    exponential = _answers(other)
    assert not any(loads)
    with db.write(graph.engine) as conn:
        conn.execute(text("DELETE FROM relation_weights"))
    assert _answers(other) == exponential


def test_a_read_only_connection_still_answers_from_the_lists(
    graph: ContextGraph, db_path: Path, loads: list[bool]
) -> None:
    expected = _answers(graph)
    loads.clear()
    engine = db.make_engine(db_path)

    @event.listens_for(engine, "connect")
    def _query_only(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.execute("PRAGMA query_only = ON")  # any write would fail now

    reader = ContextGraph(engine, graph.settings)
    try:
        assert _answers(reader) == expected
        assert loads and all(loads)
        loads.clear()
        later = (parse_datetime(NOW) + timedelta(days=400)).isoformat()  # stale: on the fly
        assert _answers(reader, later) == _answers(graph, later)
        assert not any(loads)
    finally:
        reader.close()


def test_precompute_off_writes_no_lists(db_path: Path, write: Writer, vault: Path) -> None:
    _write_vault(write, notes=20)
    settings = Settings.from_env(now=parse_datetime(NOW), weights_min_notes=0)
    with ContextGraph.open(db_path, settings=settings) as g:
        g.sync([vault])
        with db.read(g.engine) as conn:
            assert conn.execute(text("SELECT count(*) FROM relation_weights")).scalar_one() == 0
        assert _answers(g)  # answered on the fly


def _write_siblings(write: Writer, seed: int) -> None:
    """Leaves that never meet, each sharing hubs with the others: siblings, in one community."""
    rng = random.Random(seed)
    hubs, leaves = CONCEPTS[:6], CONCEPTS[6:]
    for n in range(80):
        links = [leaves[n * n % len(leaves)], *rng.sample(hubs, k=rng.randint(1, 3))]
        write(f"s{n:03d}.md", " ".join(f"[[{c}]]" for c in links), created="2026-11-20")


def _one_community(g: ContextGraph) -> None:
    """Every concept in one community, so every non-neighbour is a sibling candidate."""
    with db.write(g.engine) as conn:
        conn.execute(text("UPDATE entities SET community_id = 3 WHERE kind = 'concept'"))
        meta.bump_version(conn)
    weights.refresh(g.engine, g.settings)


@pytest.mark.parametrize("way", ["python", "walk", "match"])
@pytest.mark.parametrize(
    ("min_shared", "min_overlap"), [(1, 0.0), (2, 0.2), (3, 0.4), (2, 0.8), (5, 0.1)]
)
def test_pruned_community_siblings_equal_the_full_walk(
    db_path: Path,
    write: Writer,
    vault: Path,
    monkeypatch: pytest.MonkeyPatch,
    min_shared: int,
    min_overlap: float,
    way: str,
) -> None:
    # Each way is exact, and two of them divide by the strengths the precompute stores.
    monkeypatch.setattr(Neighbourhoods, "sibling_way", lambda self, adjacent, candidates: way)
    _write_siblings(write, seed=min_shared * 10 + int(min_overlap * 10))
    settings = Settings.from_env(
        now=parse_datetime(NOW),
        weights_min_notes=1,
        community_min_shared=min_shared,
        community_min_overlap=min_overlap,
    )
    with ContextGraph.open(db_path, settings=settings) as g:
        g.sync([vault])
        _one_community(g)
        pruned = _answers(g)
        assert '"sharedNeighborCount"' in pruned, "no siblings: the test would prove nothing"
        assert _without_precompute(g) == pruned


@pytest.mark.parametrize("first", [1, 2, 5])
def test_lists_read_rank_by_rank_give_the_same_json(
    graph: ContextGraph, monkeypatch: pytest.MonkeyPatch, first: int
) -> None:
    """Lists read a few ranks at a time (frontier counts then come from the stored relations)."""
    from contextgraph.graph import neighbourhood

    monkeypatch.setattr(neighbourhood, "FIRST_RANKS", first)
    reads: list[tuple[int, int]] = []
    original = weights.ranks

    def spy(conn: object, cid: int, start: int, stop: int) -> object:
        reads.append((start, stop))
        return original(conn, cid, start, stop)  # type: ignore[arg-type]

    monkeypatch.setattr(weights, "ranks", spy)
    lazily = _answers(graph)
    assert reads, "no list was read further than its first ranks"
    assert '"expandedRelations": [{' in lazily, "no expansion: the test would prove nothing"
    assert _without_precompute(graph) == lazily


def _reference_siblings(graph: ContextGraph, concept: str) -> list[dict[str, object]]:
    """SPEC §5's community siblings, straight from the definition over every relation."""
    with db.read(graph.engine) as conn:
        rows = conn.execute(text("SELECT a_id, b_id, count FROM concept_relations")).all()
        info = {
            int(i): (str(n), c)
            for i, n, c in conn.execute(
                text("SELECT id, name, community_id FROM entities WHERE kind = 'concept'")
            )
        }
        key = {
            str(k): int(i)
            for i, k in conn.execute(text("SELECT id, key FROM entities WHERE kind = 'concept'"))
        }
    adj: dict[int, dict[int, int]] = {i: {} for i in info}
    for a, b, w in rows:
        adj[a][b] = w
        adj[b][a] = w
    s = graph.settings
    q = key.get(concept_key(concept))
    if q is None:
        return []
    community = info[q][1]
    found = []
    for c, (name, cid) in info.items():
        if c == q or cid is None or cid != community or c in adj[q]:
            continue
        common = [n for n in adj[c] if n in adj[q]]
        if len(common) < max(1, s.community_min_shared):
            continue
        strength = sum(adj[c].values())
        ratio = sum(min(adj[q][n], adj[c][n]) for n in common) / strength
        if ratio >= s.community_min_overlap:
            found.append(
                {
                    "name": name,
                    "communityId": cid,
                    "sharedNeighborCount": len(common),
                    "normalizedOverlap": ratio,
                }
            )
    found.sort(key=lambda f: (-f["normalizedOverlap"], -f["sharedNeighborCount"], f["name"]))  # type: ignore[operator]
    return found[: s.community_max_siblings]


@pytest.mark.parametrize("precomputed", [True, False])
def test_community_siblings_follow_the_definition(graph: ContextGraph, precomputed: bool) -> None:
    if not precomputed:
        _without_precompute(graph)  # leaves the state refreshed: take it away again
        with db.write(graph.engine) as conn:
            meta.put(conn, weights.STATE_KEY, "none")
    with db.write(graph.engine) as conn:  # one community, so that siblings exist
        conn.execute(text("UPDATE entities SET community_id = 3 WHERE kind = 'concept'"))
        meta.bump_version(conn)
    if precomputed:
        weights.refresh(graph.engine, graph.settings)
    some = False
    for concept in CONCEPTS:
        Neighbourhoods._states.clear()
        got = graph.build_context(concept, depth=1).as_dict()["communitySiblings"]
        assert got == _reference_siblings(graph, concept), concept
        some = some or bool(got)
    assert some, "no siblings: the test would prove nothing"


def _listed_concepts(graph: ContextGraph) -> int:
    with db.read(graph.engine) as conn:
        query = text("SELECT count(DISTINCT concept_id) FROM relation_weights")
        return int(conn.execute(query).scalar_one())


def test_a_new_threshold_recomputes_the_lists_on_the_next_sync(
    graph: ContextGraph, db_path: Path, loads: list[bool]
) -> None:
    every = _listed_concepts(graph)  # threshold 1: every concept in a note with another
    higher = graph.settings.replace(weights_min_notes=4)
    assert not weights.is_current(graph.engine, higher)  # a writer recomputes for it...
    with ContextGraph.open(db_path, settings=higher) as raised:
        before = _answers(raised)
        assert all(loads)  # ...while a reader uses the exact lists it finds
        report = raised.sync()
        assert report.unchanged > 0 and report.added == 0
        assert weights.is_current(raised.engine, higher)
        assert 0 < _listed_concepts(raised) < every
        assert _answers(raised) == before
    assert not weights.is_current(graph.engine, graph.settings)  # and back: due again
    graph.sync()
    assert _listed_concepts(graph) == every


@pytest.mark.parametrize("way", ["python", "walk", "match"])
def test_a_refresh_with_the_precompute_off_removes_the_lists_and_their_state(
    db_path: Path, write: Writer, vault: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    # Each way is exact; two of them divide by the strengths the precompute stores.
    monkeypatch.setattr(Neighbourhoods, "sibling_way", lambda self, adjacent, candidates: way)
    _write_siblings(write, seed=11)
    settings = Settings.from_env(now=parse_datetime(NOW), weights_min_notes=1)
    with ContextGraph.open(db_path, settings=settings) as g:
        g.sync([vault])
        _one_community(g)
        answered = _answers(g)
        assert '"sharedNeighborCount"' in answered, "no siblings: the test would prove nothing"

        assert weights.refresh(g.engine, g.settings.replace(weights_min_notes=0)) == 0
        with db.read(g.engine) as conn:
            assert weights.stored_state(conn) is None
            for table in ("relation_weights", "relation_weight_windows", "concept_strengths"):
                assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() == 0
        # Every reader computes on the fly now, the siblings' strengths included.
        assert _answers(g) == answered
