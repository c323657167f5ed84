"""BuildContext's neighbour lists, ranked on demand (graph/neighbourhood.py): every rank read is
the rank a full sort gives, and a few ranks of a long list name only a few neighbours."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers import Writer
from sqlalchemy import text

from contextgraph import ContextGraph
from contextgraph.graph.neighbourhood import Neighbourhoods, weighted_score
from contextgraph.store import db

pytestmark = pytest.mark.engines("sqlite", "postgresql")

FRESH, OLD, OLDER = "2026-11-25", "2026-07-24", "2025-03-01"


@pytest.fixture
def hub(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    """``hub`` with 120 neighbours whose counts and note ages repeat: runs of ties. The later
    half of the names is synced first, so ids do not follow names (a tie's rows come by id)."""
    rng = random.Random(5)
    for low, high in ((60, 120), (0, 120)):
        for i in range(150):
            picks = (rng.randrange(low, high) for _ in range(rng.randint(1, 3)))
            others = " ".join(f"[[n{p:03d}]]" for p in picks)
            created = rng.choice((FRESH, OLD, OLDER))
            write(f"h{low}-{i:03d}.md", f"[[hub]] {others}", created=created)
        store.sync([vault])
    return store


@pytest.mark.parametrize("first_ranks", [1, 32])
def test_every_rank_is_the_rank_of_a_full_sort(
    hub: ContextGraph, monkeypatch: pytest.MonkeyPatch, first_ranks: int
) -> None:
    """Read from the start to each rank k in turn, a list is ranked in one stretch ending at k
    or later (with FIRST_RANKS = 1, at k itself): inside many ties, unless each stretch is
    carried to the tie's end."""
    from contextgraph.graph import neighbourhood

    monkeypatch.setattr(neighbourhood, "FIRST_RANKS", first_ranks)
    monkeypatch.setattr(Neighbourhoods, "_states", {})
    with db.read(hub.engine) as conn:
        nb = Neighbourhoods(hub.engine, conn, hub.settings, hub.settings.current_time().timestamp())
        hid = conn.execute(text("SELECT id FROM entities WHERE key = 'hub'")).scalar_one()
        edges = nb.ranked(hid).edges
        names = nb.names(list(edges))
        expected = sorted(
            edges, key=lambda n: (-weighted_score(edges[n]), -edges[n][0], names[n][0])
        )
        ties = len(expected) - len({(weighted_score(e), e[0]) for e in edges.values()})
        assert ties > 20, "the fixture has runs of equal scores and counts"
        for k in range(len(expected)):
            fresh = nb.ranked(hid)  # each caller ranks on its own, from the cached list
            assert fresh.at(k) == expected[k]
            assert fresh.ranked == expected[: len(fresh.ranked)]
        assert fresh.at(len(expected)) is None
        assert fresh.ranked == expected


def test_the_first_ranks_of_a_long_list_name_few_neighbours(
    hub: ContextGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Neighbourhoods, "_states", {})
    with db.read(hub.engine) as conn:
        nb = Neighbourhoods(hub.engine, conn, hub.settings, hub.settings.current_time().timestamp())
        hid = conn.execute(text("SELECT id FROM entities WHERE key = 'hub'")).scalar_one()
        scored = nb.ranked(hid)
        assert scored.at(0) is not None
        named = set(nb.state.names) & set(scored.edges)
        assert 0 < len(named) < len(scored.edges) / 2


@pytest.fixture
def tied_hub(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    """``hub`` with 40 neighbours in long runs of ties, synced in batches of ten names in
    reverse order: inside a tie the rows come by id, the names the other way round."""
    for batch in reversed(range(4)):
        for i in range(batch * 10, batch * 10 + 10):
            for copy in range(1 + i % 2):  # two runs: one note each, or two
                write(f"t{i:02d}-{copy}.md", f"[[hub]] [[c{i:02d}]]", created=OLD)
        store.sync([vault])
    return store


@pytest.mark.parametrize("fixture", ["hub", "tied_hub"])
def test_a_list_kept_as_a_prefix_ranks_as_the_whole_list(
    store: ContextGraph,  # named here for the engines the module runs on; the fixture fills it
    fixture: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A list longer than PREFIX_ROWS is fetched as a prefix and read whole only once a reader
    goes past it (a rank, or a tie running on past it); a later read transaction goes past the
    prefix it finds cached, and then the cache holds the whole list. Every prefix length is
    tried, so some end inside a tie whose names do not follow its ids."""
    from contextgraph.graph import neighbourhood

    hub: ContextGraph = request.getfixturevalue(fixture)
    now = hub.settings.current_time().timestamp()
    monkeypatch.setattr(Neighbourhoods, "_states", {})
    with db.read(hub.engine) as conn:
        hid = conn.execute(text("SELECT id FROM entities WHERE key = 'hub'")).scalar_one()
        whole = Neighbourhoods(hub.engine, conn, hub.settings, now).ranked(hid)
        assert whole.complete
        expected = [whole.at(k) for k in range(len(whole.edges))]
    monkeypatch.setattr(neighbourhood, "FIRST_RANKS", 1)  # rank one stretch at a time
    for prefix_rows in range(1, len(expected) - 1):
        monkeypatch.setattr(neighbourhood, "PREFIX_ROWS", prefix_rows)
        monkeypatch.setattr(Neighbourhoods, "_states", {})
        with db.read(hub.engine) as conn:
            scored = Neighbourhoods(hub.engine, conn, hub.settings, now).ranked(hid)
            assert not scored.complete
            assert len(scored.edges) == prefix_rows + 1
        with db.read(hub.engine) as conn:
            scored = Neighbourhoods(hub.engine, conn, hub.settings, now).ranked(hid)
            assert not scored.complete, "the cached prefix"
            for k in range(len(expected)):
                assert scored.at(k) == expected[k], f"{prefix_rows} rows fetched first"
            assert scored.at(len(expected)) is None
            assert scored.complete
            assert scored.ranked == expected
        with db.read(hub.engine) as conn:
            assert Neighbourhoods(hub.engine, conn, hub.settings, now).ranked(hid).complete


@pytest.mark.parametrize("prefix_rows", [1, 7])
def test_build_context_is_the_same_over_prefixes(
    hub: ContextGraph, monkeypatch: pytest.MonkeyPatch, prefix_rows: int
) -> None:
    from contextgraph.graph import neighbourhood

    def answers() -> list[dict[str, object]]:
        out = []
        for concept in ("hub", "n000", "n061", "n119"):
            for depth, size in ((1, 20), (2, 5), (3, 100)):
                monkeypatch.setattr(Neighbourhoods, "_states", {})
                out.append(hub.build_context(concept, depth=depth, max_entities=size).as_dict())
            out.append(hub.build_context(concept, depth=3, max_entities=100).as_dict())  # warm
        return out

    expected = answers()
    monkeypatch.setattr(neighbourhood, "PREFIX_ROWS", prefix_rows)
    assert answers() == expected


def test_a_list_read_within_the_grace_period_is_not_reused_past_it(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    """Every note of ``alpha`` within the grace period: the list's weights are all 1.0 until
    the first day past it, and a process that read it then reads it again afterwards."""
    for i in range(3):
        write(f"g{i}.md", "[[alpha]] [[beta]] [[gamma]]", created="2026-05-28")
    store.sync([vault])

    def beta_weight(now: str) -> float:
        relations = store.build_context("alpha", now=now).direct_relations
        return next(r.decay_weight for r in relations if r.name == "beta")

    assert beta_weight("2026-06-01") == 1.0  # within the grace period
    later = beta_weight("2027-06-01")  # the same process, the list cached
    Neighbourhoods._states.clear()
    assert later == beta_weight("2027-06-01") < 1.0  # as a fresh process reads it
