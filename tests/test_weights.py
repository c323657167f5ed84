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

    def spy(conn: object, cid: int, now: float) -> object:
        found = original(conn, cid, now)  # type: ignore[arg-type]
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


@pytest.mark.parametrize(
    ("min_shared", "min_overlap"), [(1, 0.0), (2, 0.2), (3, 0.4), (2, 0.8), (5, 0.1)]
)
def test_pruned_community_siblings_equal_the_full_walk(
    db_path: Path, write: Writer, vault: Path, min_shared: int, min_overlap: float
) -> None:
    rng = random.Random(min_shared * 10 + int(min_overlap * 10))
    for n in range(90):
        links = rng.sample(CONCEPTS, k=rng.randint(2, 5))
        write(f"s{n:03d}.md", " ".join(f"[[{c}]]" for c in links), created="2026-11-20")
    settings = Settings.from_env(
        now=parse_datetime(NOW),
        weights_min_notes=1,
        community_min_shared=min_shared,
        community_min_overlap=min_overlap,
    )
    with ContextGraph.open(db_path, settings=settings) as g:
        g.sync([vault])
        with db.write(g.engine) as conn:  # one community: every non-neighbour is a candidate
            conn.execute(text("UPDATE entities SET community_id = 3 WHERE kind = 'concept'"))
            conn.execute(text("DELETE FROM concept_relations WHERE (a_id + b_id) % 3 = 0"))
            meta.bump_version(conn)
        weights.refresh(g.engine, g.settings)
        pruned = _answers(g)
        assert '"sharedNeighborCount"' in pruned, "no siblings: the test would prove nothing"
        assert _without_precompute(g) == pruned
