"""Communities (SPEC §6): detection, determinism, stable ids, run records and race safety.

The stores here are built by inserting concept entities and co-occurrence rows directly; nothing
depends on sync's extraction.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import igraph
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, insert, select, update

from contextgraph.errors import InvalidArgument
from contextgraph.graph import communities
from contextgraph.graph import partition as partition_module
from contextgraph.graph.communities import (
    CommunityInfo,
    CommunityRunInfo,
    has_communities,
    latest_run,
    list_communities,
    recompute,
)
from contextgraph.graph.partition import assign_stable_ids, detect
from contextgraph.settings import Settings
from contextgraph.store import db
from contextgraph.store.models import T_COMMUNITIES, T_CREL, T_ENTITIES, T_META, T_RUNS

pytestmark = pytest.mark.engines("sqlite", "postgresql")


REPO = Path(communities.__file__).resolve().parents[1]
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SETTINGS = Settings(now=NOW)
LEIDEN = Settings(now=NOW, community_algorithm="leiden")

Edges = Mapping[tuple[str, str], int]

# Two dense cliques joined by one weak edge: the textbook two-community graph.
LEFT = ("a", "b", "c", "d")
RIGHT = ("e", "f", "g", "h")
CLIQUES: dict[tuple[str, str], int] = {
    **{pair: 5 for pair in combinations(LEFT, 2)},
    **{pair: 5 for pair in combinations(RIGHT, 2)},
    ("d", "e"): 1,
}


# --------------------------------------------------------------------------------------------
# Helpers


def make_store(path: Path | str) -> Engine:
    engine = db.make_engine(path)
    db.upgrade(engine)
    return engine


def add_graph(
    engine: Engine, names: list[str] | tuple[str, ...], edges: Edges | None = None
) -> None:
    """Insert concepts (the edge endpoints too) and add ``edges`` to their co-occurrence counts."""
    edges = edges or {}
    wanted = sorted(set(names) | {n for pair in edges for n in pair})
    with db.write(engine) as conn:
        known = set(
            conn.execute(select(T_ENTITIES.c.name).where(T_ENTITIES.c.kind == "concept")).scalars()
        )
        fresh = [n for n in wanted if n not in known]
        if fresh:
            conn.execute(
                insert(T_ENTITIES),
                [{"kind": "concept", "key": n, "name": n, "name_lower": n.lower()} for n in fresh],
            )
        ids = dict(
            conn.execute(
                select(T_ENTITIES.c.name, T_ENTITIES.c.id).where(T_ENTITIES.c.kind == "concept")
            ).all()
        )
        for (x, y), count in edges.items():
            a, b = sorted((ids[x], ids[y]))
            row = conn.execute(
                select(T_CREL.c.count).where(T_CREL.c.a_id == a, T_CREL.c.b_id == b)
            ).first()
            if row is None:
                conn.execute(insert(T_CREL).values(a_id=a, b_id=b, count=count))
            else:
                conn.execute(
                    update(T_CREL)
                    .where(T_CREL.c.a_id == a, T_CREL.c.b_id == b)
                    .values(count=row[0] + count)
                )


def remove_concepts(engine: Engine, names: list[str]) -> None:
    with db.write(engine) as conn:
        conn.execute(delete(T_ENTITIES).where(T_ENTITIES.c.name.in_(names)))


def mark_stale(engine: Engine) -> None:
    """What a sync batch that changes the graph does to the meta table."""
    with db.write(engine) as conn:
        conn.exec_driver_sql(
            "INSERT INTO meta (key, value) VALUES ('stale:communities', '1')"
            " ON CONFLICT (key) DO UPDATE SET value = '1'"
        )


def is_stale(engine: Engine) -> bool:
    with db.read(engine) as conn:
        key = T_META.c.key == "stale:communities"
        return conn.execute(select(T_META.c.key).where(key)).first() is not None


def membership(engine: Engine) -> dict[str, int | None]:
    """Concept name -> stored community id."""
    with db.read(engine) as conn:
        rows = conn.execute(
            select(T_ENTITIES.c.name, T_ENTITIES.c.community_id).where(
                T_ENTITIES.c.kind == "concept"
            )
        ).all()
    return {name: cid for name, cid in rows}


def groups(engine: Engine) -> dict[int, frozenset[str]]:
    """Community id -> members, from the stored membership."""
    out: dict[int, set[str]] = {}
    for name, cid in membership(engine).items():
        assert cid is not None, f"{name} has no community"
        out.setdefault(cid, set()).add(name)
    return {cid: frozenset(members) for cid, members in out.items()}


def community_rows(engine: Engine) -> dict[int, int]:
    with db.read(engine) as conn:
        return dict(conn.execute(select(T_COMMUNITIES.c.id, T_COMMUNITIES.c.size)).all())


def clear_store(engine: Engine) -> None:
    with db.write(engine) as conn:
        for table in (T_CREL, T_ENTITIES, T_COMMUNITIES, T_RUNS, T_META):
            conn.execute(delete(table))


def igraph_modularity(engine: Engine) -> float:
    """Standard weighted modularity of the stored membership, computed by igraph itself."""
    with db.read(engine) as conn:
        concepts = conn.execute(
            select(T_ENTITIES.c.id, T_ENTITIES.c.community_id)
            .where(T_ENTITIES.c.kind == "concept")
            .order_by(T_ENTITIES.c.id)
        ).all()
        edges = conn.execute(select(T_CREL.c.a_id, T_CREL.c.b_id, T_CREL.c.count)).all()
    index = {eid: i for i, (eid, _) in enumerate(concepts)}
    graph = igraph.Graph(n=len(concepts), edges=[(index[a], index[b]) for a, b, _ in edges])
    labels = sorted({cid for _, cid in concepts})
    member = [labels.index(cid) for _, cid in concepts]
    return float(graph.modularity(member, weights=[w for _, _, w in edges]))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_store(db_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def shared_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = make_store(tmp_path_factory.mktemp("communities") / "graph.db")
    yield engine
    engine.dispose()


# --------------------------------------------------------------------------------------------
# detect (pure)


def _clique_input() -> tuple[list[str], list[tuple[int, int, float]]]:
    names = sorted({n for pair in CLIQUES for n in pair})
    at = {n: i for i, n in enumerate(names)}
    return names, [(at[x], at[y], float(w)) for (x, y), w in CLIQUES.items()]


@pytest.mark.parametrize("algorithm", ["louvain", "leiden"])
def test_detect_splits_two_weakly_joined_cliques_golden(algorithm: str) -> None:
    names, edges = _clique_input()
    member, modularity = detect(names, edges, algorithm=algorithm, resolution=1.0, seed=42)
    assert member == [0, 0, 0, 0, 1, 1, 1, 1]
    graph = igraph.Graph(n=8, edges=[(i, j) for i, j, _ in edges])
    assert modularity == pytest.approx(
        graph.modularity(member, weights=[w for _, _, w in edges]), abs=1e-12
    )
    assert modularity > 0.4


def test_detect_is_repeatable_in_one_process() -> None:
    rng = random.Random(3)
    names = [f"n{i:03d}" for i in range(120)]
    edges = [(i, j, float(rng.randint(1, 4))) for i, j in combinations(range(120), 2)]
    edges = [e for e in edges if rng.random() < 0.05]
    for algorithm in ("louvain", "leiden"):
        first = detect(names, edges, algorithm=algorithm, resolution=1.0, seed=42)
        assert detect(names, edges, algorithm=algorithm, resolution=1.0, seed=42) == first


def test_detect_gives_every_isolated_vertex_its_own_community() -> None:
    names, edges = _clique_input()
    names = [*names, "x", "y", "z"]
    for algorithm in ("louvain", "leiden"):
        member, _ = detect(names, edges, algorithm=algorithm, resolution=1.0, seed=42)
        assert member[:8] == [0, 0, 0, 0, 1, 1, 1, 1]
        assert member[8:] == [2, 3, 4]


def test_detect_without_edges_is_all_singletons_with_zero_modularity() -> None:
    assert detect(["a", "b", "c"], [], algorithm="louvain", resolution=1.0, seed=42) == (
        [0, 1, 2],
        0.0,
    )
    assert detect([], [], algorithm="leiden", resolution=1.0, seed=42) == ([], 0.0)


def test_detect_ignores_non_positive_weights_and_self_loops() -> None:
    member, modularity = detect(
        ["a", "b", "c"],
        [(0, 1, 0.0), (1, 2, -3.0), (2, 2, 5.0)],
        algorithm="louvain",
        resolution=1.0,
        seed=42,
    )
    assert member == [0, 1, 2]
    assert modularity == 0.0


def test_detect_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidArgument):
        detect(["a"], [], algorithm="infomap", resolution=1.0, seed=42)
    with pytest.raises(InvalidArgument):
        detect(["a", "b"], [(0, 1, 1.0)], algorithm="louvain", resolution=0.0, seed=42)
    with pytest.raises(InvalidArgument):
        detect(["a", "b"], [(0, 2, 1.0)], algorithm="louvain", resolution=1.0, seed=42)


def test_detect_restores_igraphs_default_random_generator() -> None:
    def sample() -> list[tuple[int, int]]:
        random.seed(1234)
        edges: list[tuple[int, int]] = igraph.Graph.Erdos_Renyi(n=30, p=0.2).get_edgelist()
        return edges

    before = sample()
    names, edges = _clique_input()
    detect(names, edges, algorithm="louvain", resolution=1.0, seed=42)
    # igraph draws from the `random` module again: reseeding it reproduces the same graph.
    assert sample() == before


@pytest.mark.parametrize("algorithm", ["louvain", "leiden"])
def test_low_resolution_merges_the_two_cliques(algorithm: str) -> None:
    # Merging gains the weak edge (1/61) and costs resolution * 1/2: it pays below 2/61.
    names, edges = _clique_input()
    low, low_q = detect(names, edges, algorithm=algorithm, resolution=0.01, seed=42)
    high, high_q = detect(names, edges, algorithm=algorithm, resolution=1.0, seed=42)
    assert low == [0] * 8
    assert len(set(high)) == 2
    assert low_q == pytest.approx(0.0)  # the recorded modularity is always the standard one
    assert high_q > low_q


@hsettings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 14),
    data=st.data(),
    algorithm=st.sampled_from(["louvain", "leiden"]),
    seed=st.integers(0, 2**31 - 1),
)
def test_detect_membership_is_a_canonical_partition(
    n: int, data: st.DataObject, algorithm: str, seed: int
) -> None:
    pairs = list(combinations(range(n), 2))
    chosen = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    edges = [(i, j, float(data.draw(st.integers(1, 9)))) for i, j in chosen]
    names = [f"v{i:02d}" for i in range(n)]
    member, modularity = detect(names, edges, algorithm=algorithm, resolution=1.0, seed=seed)
    assert len(member) == n
    # Labels are 0, 1, ... by first appearance.
    seen: list[int] = []
    for label in member:
        if label not in seen:
            assert label == len(seen)
            seen.append(label)
    touched = {v for i, j, _ in edges for v in (i, j)}
    for v in set(range(n)) - touched:
        assert member.count(member[v]) == 1
    if edges:
        graph = igraph.Graph(n=n, edges=[(i, j) for i, j, _ in edges])
        expected = graph.modularity(member, weights=[w for _, _, w in edges])
        assert modularity == pytest.approx(expected, abs=1e-12)
    else:
        assert modularity == 0.0


# --------------------------------------------------------------------------------------------
# assign_stable_ids (pure)


def fs(*names: str) -> frozenset[str]:
    return frozenset(names)


def test_stable_ids_unchanged_partition_keeps_every_id() -> None:
    previous = {7: fs("a", "b"), 3: fs("c"), 12: fs("d", "e", "f")}
    assert assign_stable_ids(previous, list(previous.values()), 13) == previous


def test_stable_ids_best_jaccard_wins_the_old_id_and_the_rest_are_fresh() -> None:
    previous = {1: fs("a", "b", "c", "d"), 2: fs("x", "y")}
    # {a, b, c} has Jaccard 3/4 with 1; {d, e} has 1/5: the first keeps 1, the second is fresh.
    new = [fs("d", "e"), fs("a", "b", "c"), fs("x", "y")]
    assert assign_stable_ids(previous, new, 5) == {
        1: fs("a", "b", "c"),
        2: fs("x", "y"),
        5: fs("d", "e"),
    }


def test_stable_ids_merge_keeps_the_id_of_the_best_overlapping_old_community() -> None:
    previous = {4: fs("a", "b"), 9: fs("c", "d", "e")}
    merged = fs("a", "b", "c", "d", "e")  # Jaccard 2/5 with 4, 3/5 with 9
    assert assign_stable_ids(previous, [merged], 10) == {9: merged}


def test_stable_ids_ties_go_to_the_larger_new_community_then_the_smaller_old_id() -> None:
    previous = {1: fs("a", "b", "c", "d")}
    # Both halves have Jaccard 1/2 with community 1; the larger one ({a, b} vs {c, d} tie on
    # size too, so the smallest member decides).
    assert assign_stable_ids(previous, [fs("c", "d"), fs("a", "b")], 2) == {
        1: fs("a", "b"),
        2: fs("c", "d"),
    }
    previous = {2: fs("a", "b"), 1: fs("c", "d")}
    # The new community has Jaccard 1/2 with both: the smaller old id wins.
    assert assign_stable_ids(previous, [fs("a", "b", "c", "d")], 3) == {1: fs("a", "b", "c", "d")}


def test_stable_ids_fresh_ids_go_largest_first_and_never_collide() -> None:
    previous = {8: fs("z")}
    new = [fs("p"), fs("m", "n", "o"), fs("b", "c"), fs("z")]
    # next_id below an existing id is raised past it.
    assert assign_stable_ids(previous, new, 3) == {
        8: fs("z"),
        9: fs("m", "n", "o"),
        10: fs("b", "c"),
        11: fs("p"),
    }


@hsettings(max_examples=150, deadline=None)
@given(data=st.data())
def test_stable_ids_is_a_bijection_onto_the_new_communities(data: st.DataObject) -> None:
    universe = [f"c{i}" for i in range(data.draw(st.integers(0, 16)))]

    def partition(label: str) -> list[frozenset[str]]:
        members = data.draw(st.lists(st.sampled_from(universe), unique=True), label=label)
        blocks = data.draw(
            st.lists(st.integers(0, 4), min_size=len(members), max_size=len(members))
        )
        out: dict[int, set[str]] = {}
        for name, block in zip(members, blocks, strict=True):
            out.setdefault(block, set()).add(name)
        return [frozenset(b) for b in out.values()]

    if not universe:
        assert assign_stable_ids({}, [], 1) == {}
        return
    old_blocks = partition("previous")
    old_ids = data.draw(
        st.lists(
            st.integers(1, 50), unique=True, min_size=len(old_blocks), max_size=len(old_blocks)
        )
    )
    previous = dict(zip(old_ids, old_blocks, strict=True))
    new = partition("new")
    next_id = data.draw(st.integers(1, 60))
    result = assign_stable_ids(previous, new, next_id)
    assert sorted(result.values(), key=sorted) == sorted(new, key=sorted)
    floor = max([next_id, *(i + 1 for i in previous)])
    for cid, members in result.items():
        if cid in previous:
            assert previous[cid] & members, "an old id only goes to an overlapping community"
        else:
            assert cid >= floor
    # A new community identical to an old one always keeps that id.
    for cid, members in previous.items():
        if members in new:
            assert result.get(cid) == members
    assert assign_stable_ids(previous, new, next_id) == result


# --------------------------------------------------------------------------------------------
# recompute against a store


@pytest.mark.parametrize("settings", [SETTINGS, LEIDEN], ids=["louvain", "leiden"])
def test_recompute_finds_the_two_cliques_golden(engine: Engine, settings: Settings) -> None:
    add_graph(engine, [], CLIQUES)
    run = recompute(engine, settings)
    assert groups(engine) == {1: frozenset(LEFT), 2: frozenset(RIGHT)}
    assert community_rows(engine) == {1: 4, 2: 4}
    assert run.algorithm == settings.community_algorithm
    assert run.community_count == 2


def test_every_concept_gets_a_community_and_isolated_ones_their_own(engine: Engine) -> None:
    add_graph(engine, ["loner", "zz-solo"], CLIQUES)
    recompute(engine, SETTINGS)
    stored = groups(engine)
    assert sorted(stored.values(), key=sorted) == [
        frozenset(LEFT),
        frozenset(RIGHT),
        frozenset({"loner"}),
        frozenset({"zz-solo"}),
    ]
    assert sorted(community_rows(engine).values()) == [1, 1, 4, 4]


def test_run_is_recorded_with_settings_counts_and_igraph_modularity(engine: Engine) -> None:
    add_graph(engine, ["loner"], CLIQUES)
    settings = Settings(now=NOW, community_resolution=1.0, community_seed=7)
    run = recompute(engine, settings)
    assert isinstance(run, CommunityRunInfo)
    assert (run.algorithm, run.resolution, run.seed) == ("louvain", 1.0, 7)
    assert (run.node_count, run.edge_count, run.community_count) == (9, 13, 3)
    assert run.modularity == pytest.approx(igraph_modularity(engine), abs=1e-12)
    assert run.seconds >= 0
    assert run.created_at == NOW.timestamp()
    with db.read(engine) as conn:
        assert latest_run(conn) == run


def test_run_as_dict_is_camel_case_with_an_iso_utc_time(engine: Engine) -> None:
    add_graph(engine, [], CLIQUES)
    info = recompute(engine, SETTINGS).as_dict()
    assert list(info) == [
        "id",
        "algorithm",
        "resolution",
        "seed",
        "modularity",
        "nodeCount",
        "edgeCount",
        "communityCount",
        "seconds",
        "createdAt",
    ]
    assert info["createdAt"] == "2026-11-30T12:00:00+00:00"
    assert datetime.fromisoformat(info["createdAt"]) == NOW
    json.dumps(info)


def test_modularity_matches_igraph_on_a_random_graph(engine: Engine) -> None:
    rng = random.Random(11)
    names = [f"t{i:02d}" for i in range(40)]
    edges = {(x, y): rng.randint(1, 6) for x, y in combinations(names, 2) if rng.random() < 0.12}
    add_graph(engine, names, edges)
    for settings in (SETTINGS, LEIDEN):
        run = recompute(engine, settings)
        assert run.modularity == pytest.approx(igraph_modularity(engine), abs=1e-12)
        assert run.edge_count == len(edges)


def test_the_graph_read_gives_the_relation_rows_in_scan_order(engine: Engine) -> None:
    # The read takes the relations as whole columns (JSON arrays on SQLite): they must be the
    # rows a plain SELECT gives, in its order, since igraph's result depends on the edge order.
    rng = random.Random(5)
    names = [f"r{i:03d}" for i in reversed(range(60))]  # ids against name order
    edges = {(x, y): rng.randint(1, 9) for x, y in combinations(names, 2) if rng.random() < 0.2}
    add_graph(engine, names, edges)
    with db.write(engine) as conn:  # a non-positive count is read and counted, but no edge
        a, b = conn.execute(select(T_CREL.c.a_id, T_CREL.c.b_id).limit(1)).one()
        conn.execute(update(T_CREL).where(T_CREL.c.a_id == a, T_CREL.c.b_id == b).values(count=0))
    with db.read(engine) as conn:
        rows = conn.execute(select(T_CREL.c.a_id, T_CREL.c.b_id, T_CREL.c.count)).all()
        snap = communities._read(conn)
    index = {eid: i for i, eid in enumerate(snap.ids)}
    assert snap.names == sorted(names)
    kept = [(a, b, w) for a, b, w in rows if w > 0]
    assert 0 < len(kept) < len(rows)
    assert snap.pairs == [(index[a], index[b]) for a, b, _ in kept]
    assert snap.weights == [w for _, _, w in kept]
    assert snap.fingerprint[2:] == (len(rows), float(sum(w for _, _, w in rows)))


def test_leiden_setting_is_used_and_recorded(engine: Engine) -> None:
    add_graph(engine, [], CLIQUES)
    run = recompute(engine, LEIDEN)
    assert run.algorithm == "leiden"
    with db.read(engine) as conn:
        latest = latest_run(conn)
    assert latest is not None and latest.algorithm == "leiden"
    assert groups(engine) == {1: frozenset(LEFT), 2: frozenset(RIGHT)}


def test_empty_graph_records_a_zero_run_and_no_communities(engine: Engine) -> None:
    mark_stale(engine)
    run = recompute(engine, SETTINGS)
    assert (run.node_count, run.edge_count, run.community_count) == (0, 0, 0)
    assert run.modularity == 0.0
    assert not is_stale(engine)
    with db.read(engine) as conn:
        assert list_communities(conn) == []
        assert not has_communities(conn)
        assert latest_run(conn) == run


def test_graph_emptied_after_a_run_clears_the_communities(engine: Engine) -> None:
    add_graph(engine, [], CLIQUES)
    recompute(engine, SETTINGS)
    remove_concepts(engine, [*LEFT, *RIGHT])
    run = recompute(engine, SETTINGS)
    assert run.community_count == 0
    assert community_rows(engine) == {}
    with db.read(engine) as conn:
        assert not has_communities(conn)


def test_edgeless_graph_gives_singletons_and_zero_modularity(engine: Engine) -> None:
    add_graph(engine, ["p", "q", "r"])
    run = recompute(engine, SETTINGS)
    assert run.modularity == 0.0
    assert sorted(groups(engine).values(), key=sorted) == [fs("p"), fs("q"), fs("r")]


# --------------------------------------------------------------------------------------------
# Stable ids across recomputes


def test_recompute_of_an_unchanged_graph_keeps_every_id(engine: Engine) -> None:
    rng = random.Random(5)
    names = [f"s{i:02d}" for i in range(60)]
    edges = {(x, y): rng.randint(1, 5) for x, y in combinations(names, 2) if rng.random() < 0.08}
    add_graph(engine, names, edges)
    for settings in (SETTINGS, LEIDEN):
        recompute(engine, settings)
        first, rows = membership(engine), community_rows(engine)
        second_run = recompute(engine, settings)
        assert membership(engine) == first
        assert community_rows(engine) == rows
        assert second_run.community_count == len(rows)


def test_small_edit_keeps_the_ids_of_the_untouched_communities(engine: Engine) -> None:
    add_graph(engine, [], CLIQUES)
    recompute(engine, SETTINGS)
    before = groups(engine)
    add_graph(engine, [], {("a", "newcomer"): 4, ("b", "newcomer"): 4})
    recompute(engine, SETTINGS)
    after = groups(engine)
    left_id = next(cid for cid, members in before.items() if "a" in members)
    right_id = next(cid for cid, members in before.items() if "e" in members)
    assert after == {left_id: frozenset({*LEFT, "newcomer"}), right_id: frozenset(RIGHT)}


def test_new_isolated_concept_gets_a_fresh_id_never_used_before(engine: Engine) -> None:
    add_graph(engine, [], CLIQUES)
    recompute(engine, SETTINGS)
    assert set(groups(engine)) == {1, 2}
    add_graph(engine, ["solo"])
    recompute(engine, SETTINGS)
    assert membership(engine)["solo"] == 3
    remove_concepts(engine, ["solo"])
    recompute(engine, SETTINGS)
    assert set(groups(engine)) == {1, 2}
    add_graph(engine, ["other"])
    recompute(engine, SETTINGS)
    # Id 3 belonged to a community that is gone; it is never handed out again.
    assert membership(engine)["other"] == 4
    with db.read(engine) as conn:
        assert (
            conn.execute(
                select(T_META.c.value).where(T_META.c.key == "community_next_id")
            ).scalar_one()
            == "5"
        )


def test_next_id_survives_a_missing_meta_row(engine: Engine) -> None:
    add_graph(engine, ["solo"], CLIQUES)
    recompute(engine, SETTINGS)
    with db.write(engine) as conn:
        conn.execute(delete(T_META))
    add_graph(engine, ["solo2"])
    recompute(engine, SETTINGS)
    assert membership(engine)["solo2"] == 4  # past every id still in use


# --------------------------------------------------------------------------------------------
# Stale flag and race safety


def test_recompute_clears_the_stale_flag(engine: Engine) -> None:
    add_graph(engine, [], CLIQUES)
    mark_stale(engine)
    recompute(engine, SETTINGS)
    assert not is_stale(engine)


def _racing(engine: Engine, monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """Make ``change`` commit between recompute's read and its write."""
    original = partition_module.partition

    def partition_then_change(*args: Any, **kwargs: Any) -> tuple[list[int], float]:
        result = original(*args, **kwargs)
        change()
        return result

    monkeypatch.setattr(partition_module, "partition", partition_then_change)


def test_concurrent_sync_change_leaves_the_flag_and_new_concepts_unassigned(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_graph(engine, [], CLIQUES)

    def sync_batch() -> None:
        add_graph(engine, ["late"], {("late", "a"): 2})
        remove_concepts(engine, ["h"])
        mark_stale(engine)

    _racing(engine, monkeypatch, sync_batch)
    recompute(engine, SETTINGS)
    stored = membership(engine)
    assert stored["late"] is None
    assert "h" not in stored
    assert all(stored[n] is not None for n in ("a", "b", "c", "d", "e", "f", "g"))
    assert is_stale(engine)
    monkeypatch.undo()
    recompute(engine, SETTINGS)  # the next sync converges
    assert not is_stale(engine)
    assert membership(engine)["late"] == membership(engine)["a"]


def test_unflagged_concurrent_change_is_caught_by_the_fingerprint(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_graph(engine, [], CLIQUES)
    _racing(engine, monkeypatch, lambda: add_graph(engine, [], {("a", "e"): 1}))
    recompute(engine, SETTINGS)
    assert is_stale(engine)


def test_concurrent_run_does_not_lose_updates_or_reuse_ids(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_graph(engine, [], CLIQUES)
    recompute(engine, SETTINGS)
    add_graph(engine, ["x1"])

    def other_run() -> None:
        monkeypatch.setattr(partition_module, "partition", original)
        recompute(engine, SETTINGS)  # gives x1 the fresh id 3
        monkeypatch.setattr(partition_module, "partition", racing)

    original = partition_module.partition
    _racing(engine, monkeypatch, other_run)
    racing = partition_module.partition
    recompute(engine, SETTINGS)
    stored = membership(engine)
    # This run also saw x1 as new; its fresh id moved past the other run's.
    assert stored["x1"] == 4
    assert community_rows(engine) == {1: 4, 2: 4, 4: 1}
    assert set(stored.values()) == {1, 2, 4}
    # Overtaken by another run: which one saw the newer graph is unknown, so the next sync redoes
    # it — and an unchanged graph then keeps every id.
    assert is_stale(engine)
    monkeypatch.undo()
    recompute(engine, SETTINGS)
    assert membership(engine) == stored
    assert not is_stale(engine)


# --------------------------------------------------------------------------------------------
# Queries


def test_list_communities_orders_by_size_then_id_with_sorted_members(engine: Engine) -> None:
    add_graph(engine, ["zeta", "alpha"], {**CLIQUES, ("a", "b2"): 9})
    recompute(engine, SETTINGS)
    with db.read(engine) as conn:
        listed = list_communities(conn)
    assert [c.size for c in listed] == [5, 4, 1, 1]
    assert listed[0] == CommunityInfo(1, 5, ("a", "b", "b2", "c", "d"))
    assert listed[1] == CommunityInfo(2, 4, RIGHT)
    assert [c.members for c in listed[2:]] == [("alpha",), ("zeta",)]
    assert listed[2].id < listed[3].id
    assert listed[0].as_dict() == {"id": 1, "size": 5, "members": ["a", "b", "b2", "c", "d"]}


def test_has_communities_needs_a_run_and_a_member(engine: Engine) -> None:
    with db.read(engine) as conn:
        assert not has_communities(conn)
        assert latest_run(conn) is None
    add_graph(engine, [], CLIQUES)
    with db.read(engine) as conn:
        assert not has_communities(conn)
    recompute(engine, SETTINGS)
    with db.read(engine) as conn:
        assert has_communities(conn)


# --------------------------------------------------------------------------------------------
# Invariant over random small graphs


@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    n=st.integers(0, 12),
    data=st.data(),
    algorithm=st.sampled_from(["louvain", "leiden"]),
)
def test_every_concept_is_in_exactly_one_community(
    shared_engine: Engine, n: int, data: st.DataObject, algorithm: str
) -> None:
    clear_store(shared_engine)
    names = [f"k{i:02d}" for i in range(n)]
    pairs = list(combinations(names, 2))
    chosen = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    edges = {pair: data.draw(st.integers(1, 5)) for pair in chosen}
    add_graph(shared_engine, names, edges)
    run = recompute(shared_engine, Settings(now=NOW, community_algorithm=algorithm))
    stored = membership(shared_engine)
    assert set(stored) == set(names)
    assert all(cid is not None for cid in stored.values())
    rows = community_rows(shared_engine)
    assert set(rows) == set(stored.values())
    assert sum(rows.values()) == n
    assert (run.node_count, run.edge_count, run.community_count) == (n, len(edges), len(rows))
    touched = {x for pair in edges for x in pair}
    for name in set(names) - touched:
        assert rows[stored[name]] == 1  # type: ignore[index]
    with db.read(shared_engine) as conn:
        listed = list_communities(conn)
        assert has_communities(conn) == (n > 0)
    assert sorted(m for c in listed for m in c.members) == sorted(names)
    assert not is_stale(shared_engine)


# --------------------------------------------------------------------------------------------
# Determinism across processes

_CHILD = """
import json, shutil, sys
from contextgraph.store import db
from contextgraph.graph import communities
from contextgraph.settings import Settings
out = {}
for algorithm in ("louvain", "leiden"):
    path = f"{sys.argv[1]}.{algorithm}.db"
    shutil.copy(sys.argv[1], path)
    engine = db.make_engine(path)
    communities.recompute(engine, Settings(community_algorithm=algorithm))
    with db.read(engine) as conn:
        rows = conn.exec_driver_sql(
            "SELECT name, community_id FROM entities WHERE kind = 'concept'").fetchall()
    out[algorithm] = sorted(map(list, rows))
print(json.dumps(out))
"""


def test_partition_is_identical_across_processes(tmp_path: Path) -> None:
    rng = random.Random(2024)
    names = [f"p{rng.getrandbits(24):06x}" for _ in range(150)]
    # Planted groups, noisy enough that another seed or vertex order gives another partition.
    edges = {}
    for x, y in combinations(names, 2):
        same = names.index(x) % 6 == names.index(y) % 6
        if rng.random() < (0.25 if same else 0.03):
            edges[(x, y)] = rng.randint(1, 5)
    source = tmp_path / "source.db"
    engine = make_store(source)
    add_graph(engine, names, edges)
    engine.dispose()
    outputs = []
    for hash_seed in ("1", "2"):
        copy = tmp_path / f"child{hash_seed}.db"
        shutil.copy(source, copy)
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(copy)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    for algorithm in ("louvain", "leiden"):
        assert len({cid for _, cid in outputs[0][algorithm]}) > 1
        local = tmp_path / f"local.{algorithm}.db"
        shutil.copy(source, local)
        engine = make_store(local)
        recompute(engine, Settings(community_algorithm=algorithm))
        assert sorted([n, cid] for n, cid in membership(engine).items()) == outputs[0][algorithm]
        engine.dispose()


def test_bad_settings_fail_before_touching_the_store(engine: Engine) -> None:
    add_graph(engine, [], CLIQUES)
    with pytest.raises(InvalidArgument):
        recompute(engine, Settings(community_algorithm="infomap"))
    assert not is_stale(engine)
    with db.read(engine) as conn:
        assert latest_run(conn) is None
