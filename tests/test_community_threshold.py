"""Above ``community_leiden_min_edges`` the default algorithm is Leiden; below it, Louvain."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Writer

from contextgraph import ContextGraph, Settings
from contextgraph.graph import communities
from contextgraph.graph.partition import partition


@pytest.fixture
def synced(db_path: Path, write: Writer, vault: Path) -> Path:
    for i in range(12):
        write(f"n{i}.md", f"[[A{i % 4}]] [[B{i % 3}]] [[C{i % 5}]]")
    with ContextGraph.open(db_path) as g:
        g.sync([vault])
    return db_path


def _run(db_path: Path, **overrides: object) -> tuple[str, list[list[str]]]:
    with ContextGraph.open(db_path, settings=Settings.from_env(**overrides)) as g:
        run = communities.recompute(g.engine, g.settings)
        listed = g.communities().as_dict()["communities"]
    return run.algorithm, sorted(sorted(c["members"]) for c in listed)


def test_small_graphs_keep_louvain_by_default(synced: Path) -> None:
    assert _run(synced)[0] == "louvain"


def test_a_graph_at_the_threshold_uses_leiden(synced: Path) -> None:
    algorithm, groups = _run(synced, community_leiden_min_edges=1)
    assert algorithm == "leiden"
    assert _run(synced, community_algorithm="leiden")[1] == groups  # exactly the Leiden partition


def test_zero_never_switches_and_an_explicit_leiden_stays(synced: Path) -> None:
    assert _run(synced, community_leiden_min_edges=0)[0] == "louvain"
    assert _run(synced, community_algorithm="leiden", community_leiden_min_edges=0)[0] == "leiden"


def test_leiden_matches_louvain_modularity_on_a_power_law_graph() -> None:
    import random

    import igraph

    g = igraph.Graph.Barabasi(3000, 4, outpref=False, directed=False)
    rng = random.Random(3)
    pairs = sorted({(min(a, b), max(a, b)) for a, b in g.get_edgelist() if a != b})
    weights = [float(rng.choice((1, 1, 2, 3))) for _ in pairs]
    _, louvain = partition(3000, pairs, weights, algorithm="louvain", resolution=1.0, seed=42)
    _, leiden = partition(3000, pairs, weights, algorithm="leiden", resolution=1.0, seed=42)
    assert leiden >= louvain * 0.99
