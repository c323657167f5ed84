from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from helpers import Writer
from sqlalchemy import text

from contextgraph import ContextGraph, InvalidArgument
from contextgraph.store import db

pytestmark = pytest.mark.engines("sqlite", "postgresql")

FRESH = "2026-11-25"  # age 5 days at NOW: weight 1.0
OLD = "2026-07-24"  # age 129 days: weight (129 - 28) ** -0.5
OLD_WEIGHT = 101**-0.5


@pytest.fixture
def ranked(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    # q–x co-occur in three old notes (score 3 * 0.0995), q–y in one fresh note (1.0),
    # q–z in two fresh notes (2.0): ranking by count would put x first.
    for i in range(3):
        write(f"old{i}.md", "[[Q]] and [[X]]", created=OLD)
    write("y.md", "[[Q]] and [[Y]]", created=FRESH)
    write("z1.md", "[[Q]] and [[Z]]", created=FRESH)
    write("z2.md", "[[Q]] and [[Z]]", created=FRESH)
    store.sync([vault])
    return store


def test_build_context_ranks_by_weighted_score_before_truncating(ranked: ContextGraph) -> None:
    result = ranked.build_context("Q", max_entities=2)
    assert [r.name for r in result.direct_relations] == ["z", "y"]
    full = ranked.build_context("Q")
    assert [r.name for r in full.direct_relations] == ["z", "y", "x"]
    x = full.direct_relations[2]
    assert x.co_occurrence_count == 3
    assert x.decay_weight == pytest.approx(OLD_WEIGHT)
    assert x.weighted_score == pytest.approx(3 * OLD_WEIGHT)


def test_ties_break_by_count_then_name(store: ContextGraph, vault: Path, write: Writer) -> None:
    write("a.md", "[[Q]] [[b]] [[a]]", created=FRESH)
    write("c.md", "[[Q]] [[c]]", created=FRESH)
    write("c2.md", "[[c]] [[other]]", created=FRESH)
    store.sync([vault])
    assert [r.name for r in store.build_context("q").direct_relations] == ["a", "b", "c"]


def test_concept_names_are_normalised_like_links(ranked: ContextGraph) -> None:
    for spelling in ("Q", "q", "  Q ", "[[Q]]", "[[q|alias]]", "![[Q#Heading]]"):
        assert ranked.build_context(spelling).concept_name == "q"
        assert len(ranked.build_context(spelling).direct_relations) == 3


def test_files_are_most_recent_first_at_most_three(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("n1.md", "[[Q]] [[R]]", created="2026-01-01")
    write("n2.md", "[[Q]] [[R]]", created="2026-03-01")
    write("n3.md", "[[Q]] [[R]]", created="2026-02-01")
    write("n4.md", "[[Q]] [[R]]", created="2026-03-01")
    store.sync([vault], name="v")
    (relation,) = store.build_context("Q").direct_relations
    assert relation.files == ("memory://v/n2.md", "memory://v/n4.md", "memory://v/n3.md")


def test_a_read_makes_a_note_fresher(ranked: ContextGraph) -> None:
    with db.write(ranked.engine) as conn:
        conn.execute(
            text("UPDATE files SET last_accessed = :t WHERE path = 'old0.md'"),
            {"t": 1_795_000_000.0},  # 2026-11-18: within the grace period at NOW
        )
    x = next(r for r in ranked.build_context("Q").direct_relations if r.name == "x")
    assert x.decay_weight == pytest.approx((1.0 + 2 * OLD_WEIGHT) / 3)


def test_now_is_injectable(ranked: ContextGraph) -> None:
    later = ranked.build_context("Q", now="2027-11-30T00:00:00Z")
    z = next(r for r in later.direct_relations if r.name == "z")
    assert z.decay_weight == pytest.approx((370 - 28) ** -0.5)


def test_depth_zero_and_one_give_direct_relations_only(ranked: ContextGraph) -> None:
    for depth in (0, 1):
        result = ranked.build_context("Q", depth=depth)
        assert result.expanded_relations == ()
        assert len(result.direct_relations) == 3


def test_unknown_concept_and_empty_graph_give_an_empty_result(store: ContextGraph) -> None:
    result = store.build_context("Nothing Here")
    assert result.as_dict() == {
        "conceptName": "nothing-here",
        "depth": 2,
        "communityId": None,
        "directRelations": [],
        "expandedRelations": [],
        "communitySiblings": [],
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"depth": -1}, "depth"),
        ({"max_entities": 0}, "max_entities"),
        # The upper bounds shared with the CLI and MCP (limits.py); main let these run.
        ({"depth": 6}, "depth must be between 0 and 5"),
        ({"max_entities": 100_000}, "max_entities must be between 1 and 100"),
    ],
)
def test_bad_arguments_are_clear_errors(
    store: ContextGraph, kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        store.build_context("q", **kwargs)


@pytest.fixture
def layered(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    # q's neighbours a (count 3), b (2), c (1). Two hops out: a–d (2), b–d (1), b–e (1), d–f (1).
    for i in range(3):
        write(f"qa{i}.md", "[[q]] [[a]]", created=FRESH)
    for i in range(2):
        write(f"qb{i}.md", "[[q]] [[b]]", created=FRESH)
    write("qc.md", "[[q]] [[c]]", created=FRESH)
    write("ad1.md", "[[a]] [[d]]", created=FRESH)
    write("ad2.md", "[[a]] [[d]]", created=OLD)
    write("bd.md", "[[b]] [[d]]", created=FRESH)
    write("be.md", "[[b]] [[e]]", created=FRESH)
    write("df.md", "[[d]] [[f]]", created=FRESH)
    store.sync([vault])
    return store


def test_expansion_is_layered_with_the_strongest_via(layered: ContextGraph) -> None:
    result = layered.build_context("q", depth=3)
    got = [(e.name, e.depth, e.via, e.co_occurrence_count) for e in result.expanded_relations]
    assert got == [("d", 2, "a", 2), ("e", 2, "b", 1), ("f", 3, "d", 1)]
    d = result.expanded_relations[0]
    assert d.weighted_score == pytest.approx(2 * (1 + OLD_WEIGHT) / 2)


HALF = "2026-10-29"  # age 32 days at NOW: weight (32 - 28) ** -0.5 = 0.5 exactly


@pytest.fixture
def score_tie(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    # Two hops out through f: b in three notes of weight 0.5, a in one of weight 1.0 and one of
    # 0.5. Both score 1.5; b has the higher count, a the first name.
    write("qf.md", "[[q]] [[f]]", created=FRESH)
    for i in range(3):
        write(f"fb{i}.md", "[[f]] [[b]]", created=HALF)
    write("fa1.md", "[[f]] [[a]]", created=FRESH)
    write("fa2.md", "[[f]] [[a]]", created=HALF)
    store.sync([vault])
    return store


@pytest.mark.parametrize("prefix_rows", [1, 2, 1024])
@pytest.mark.parametrize("first_ranks", [1, 32])
def test_expansion_ranks_by_score_then_name_a_count_breaks_no_tie(
    score_tie: ContextGraph, monkeypatch: pytest.MonkeyPatch, prefix_rows: int, first_ranks: int
) -> None:
    """SPEC §5: candidates by weightedScore (of the via edge) desc, then name; unlike direct
    relations, no count between the two. f's own list ranks b first (its count), and a merge of
    such lists must still give a first, whatever part of a list is fetched or ranked at once."""
    from contextgraph.graph import neighbourhood
    from contextgraph.graph.neighbourhood import Neighbourhoods

    monkeypatch.setattr(neighbourhood, "PREFIX_ROWS", prefix_rows)
    monkeypatch.setattr(neighbourhood, "FIRST_RANKS", first_ranks)
    monkeypatch.setattr(Neighbourhoods, "_states", {})
    direct = score_tie.build_context("f", depth=1).direct_relations
    assert [(r.name, r.co_occurrence_count, r.weighted_score) for r in direct] == [
        ("b", 3, 1.5),
        ("a", 2, 1.5),
        ("q", 1, 1.0),
    ]
    expanded = score_tie.build_context("q").expanded_relations
    assert [(e.name, e.via, e.co_occurrence_count, e.weighted_score) for e in expanded] == [
        ("a", "f", 2, 1.5),
        ("b", "f", 3, 1.5),
    ]
    cut = score_tie.build_context("q", max_entities=1).expanded_relations
    assert [e.name for e in cut] == ["a"]


QUARTER = "2026-10-17"  # age 44 days at NOW: weight 16 ** -0.5 = 0.25 exactly
_WEIGHTS = {FRESH: 1.0, HALF: 0.5, QUARTER: 0.25}  # sums of these are exact in any order


def _spec_expansion(
    notes: list[tuple[set[str], float]], query: str, depth: int, max_entities: int
) -> list[tuple[str, int, str, int, float]]:
    """SPEC §5's expandedRelations, by brute force over the notes (concepts, weight)."""
    count: dict[tuple[str, str], int] = {}
    total: dict[tuple[str, str], float] = {}
    for concepts, weight in notes:
        for x in concepts:
            for y in concepts - {x}:
                count[x, y] = count.get((x, y), 0) + 1
                total[x, y] = total.get((x, y), 0.0) + weight

    def neighbours(x: str) -> set[str]:
        return {y for (a, y) in count if a == x}

    def score(x: str, y: str) -> float:
        return count[x, y] * (total[x, y] / count[x, y])

    direct = neighbours(query)
    frontier = sorted(direct, key=lambda n: (-count[query, n], n))[:5]
    seen = {query, *direct}
    out: list[tuple[str, int, str, int, float]] = []
    for hop in range(2, depth + 1):
        candidates = {c for v in frontier for c in neighbours(v)} - seen
        via = {
            c: min((u for u in frontier if (u, c) in count), key=lambda u: (-count[u, c], u))
            for c in candidates
        }
        ranked = sorted(candidates, key=lambda c: (-score(via[c], c), c))
        kept = ranked[: max_entities - len(out)]
        out += [(c, hop, via[c], count[via[c], c], score(via[c], c)) for c in kept]
        seen.update(kept)
        frontier = kept
        if not frontier or len(out) >= max_entities:
            break
    return out


@pytest.mark.parametrize("prefix_rows", [1, 3, 1024])
@pytest.mark.parametrize("leave_out_seen", [True, False], ids=["unseen", "every-neighbour"])
@pytest.mark.parametrize("drop_closed", [True, False], ids=["drop-closed", "every-frontier"])
def test_expansion_equals_the_spec_by_brute_force(
    store: ContextGraph,
    vault: Path,
    write: Writer,
    monkeypatch: pytest.MonkeyPatch,
    prefix_rows: int,
    leave_out_seen: bool,
    drop_closed: bool,
) -> None:
    """A random graph of many score ties (weights 1, 0.5 and 0.25): every expansion, whether
    the frontier lists are whole or prefixes, is SPEC §5's by brute force. Once a hop has seen
    as many concepts as a prefix holds, its lists are computed without them (``unseen``, a
    prefix of those too when they are more); ``every-neighbour`` computes them whole all the
    same. A frontier concept whose every neighbour is seen is left out of its hop
    (``drop-closed``); ``every-frontier`` computes its list all the same."""
    import random

    from contextgraph.graph import neighbourhood
    from contextgraph.graph.neighbourhood import Neighbourhoods

    dropped: list[int] = []
    reaching = Neighbourhoods.reaching_past

    def keep(self: Neighbourhoods, frontier: Any, seen: Any) -> list[int]:
        frontier = list(frontier)
        if not drop_closed:
            return frontier
        kept = reaching(self, frontier, seen)
        dropped.extend(v for v in frontier if v not in kept)
        return kept

    monkeypatch.setattr(Neighbourhoods, "reaching_past", keep)
    unseen_lists: list[int] = []
    if leave_out_seen:
        unseen = Neighbourhoods._unseen

        def spy(self: Neighbourhoods, cid: int, seen: list[int], **kw: Any) -> Any:
            unseen_lists.append(cid)
            return unseen(self, cid, seen, **kw)

        monkeypatch.setattr(Neighbourhoods, "_unseen", spy)
    else:
        ranked = Neighbourhoods.ranked
        monkeypatch.setattr(
            Neighbourhoods, "ranked", lambda self, cid, skipping=(): ranked(self, cid)
        )

    rnd = random.Random(1)
    names = [f"c{i:02d}" for i in range(14)]
    notes: list[tuple[set[str], float]] = []
    for i in range(70):
        concepts = set(rnd.sample(names, rnd.choice((2, 2, 3, 4))))
        created = rnd.choice(list(_WEIGHTS))
        write(f"n{i:03d}.md", " ".join(f"[[{c}]]" for c in sorted(concepts)), created=created)
        notes.append((concepts, _WEIGHTS[created]))
    store.sync([vault])
    monkeypatch.setattr(neighbourhood, "PREFIX_ROWS", prefix_rows)
    for query in names:
        for depth, size in ((2, 20), (2, 3), (3, 6), (4, 40)):
            monkeypatch.setattr(Neighbourhoods, "_states", {})
            got = store.build_context(query, depth=depth, max_entities=size).expanded_relations
            assert [
                (e.name, e.depth, e.via, e.co_occurrence_count, e.weighted_score) for e in got
            ] == _spec_expansion(notes, query, depth, size), (query, depth, size)
    if leave_out_seen and prefix_rows < 1024:
        assert unseen_lists  # the lists without the seen concepts were computed and checked
    assert bool(dropped) == drop_closed  # closed frontier concepts were met, and left out


def test_only_a_states_first_question_leaves_out_closed_frontier_concepts(
    store: ContextGraph, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI run asks one question, so a frontier concept whose neighbours are all seen is
    told apart by a look at its relations instead of computing its list; a process that asks
    again computes the list, which the questions after it find cached."""
    from contextgraph.graph import relationsql
    from contextgraph.graph.neighbourhood import Neighbourhoods

    # "b" is met only beside "q": its neighbours are all q's. "c" reaches past them to "d".
    write("qb.md", "[[q]] [[b]] [[c]]")
    write("qc.md", "[[q]] [[c]]")
    write("cd.md", "[[c]] [[d]]")
    store.sync([vault])
    looks: list[int] = []
    rows = relationsql.REACHES_PAST.rows
    monkeypatch.setattr(
        relationsql.REACHES_PAST,
        "rows",
        lambda conn, ids, params: looks.append(params["cid"]) or rows(conn, ids, params),
    )
    monkeypatch.setattr(Neighbourhoods, "_states", {})
    first = store.build_context("q", depth=2)
    assert len(looks) == 2  # b and c, the frontier
    assert [(e.name, e.via) for e in first.expanded_relations] == [("d", "c")]
    assert store.build_context("q", depth=2) == first
    assert len(looks) == 2  # the second question asked nothing more


def test_expanded_relations_respect_max_entities_over_all_hops(layered: ContextGraph) -> None:
    result = layered.build_context("q", depth=3, max_entities=2)
    assert [e.name for e in result.expanded_relations] == ["d", "e"]
    assert len(result.direct_relations) == 2


def test_expansion_never_returns_the_query_or_a_direct_neighbour(layered: ContextGraph) -> None:
    result = layered.build_context("q", depth=5)
    direct = {r.name for r in result.direct_relations} | {"q"}
    assert not direct & {e.name for e in result.expanded_relations}


def test_content_preview_quotes_the_sentence_with_the_related_concept(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write(
        "n.md",
        "# Title\n\nIntro sentence about [[Q]]. Here [[R]] is explained in detail. The end.\n",
        created=FRESH,
    )
    store.sync([vault], name="v")
    (relation,) = store.build_context("Q", include_content=True).direct_relations
    assert relation.content_preview is not None
    preview = relation.content_preview["memory://v/n.md"]
    assert "[[R]] is explained" in preview
    assert len(preview) <= 240
    assert "contentPreview" in relation.as_dict()
    assert "contentPreview" not in store.build_context("Q").direct_relations[0].as_dict()


def test_content_previews_read_a_shared_note_once(
    store: ContextGraph, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One note links the query and five others: each neighbour's preview quotes it, and its
    # links are found no further than the concepts quoted need, and at most about twice in
    # all per call (a long note can take a whole markdown parse to read).
    write(
        "n.md",
        "[[Q]] starts here. [[A]] one. [[B]] two.\n\n- [[C]] three.\n- [[D]] four. [[E]] five.\n",
        created=FRESH,
    )
    store.sync([vault], name="v")
    from contextgraph.notes import preview, wikilinks

    calls: list[str] = []
    real = wikilinks._find_links_from

    def counted(text: str, start: int) -> list[Any]:
        calls.append(text)
        return real(text, start)

    monkeypatch.setattr(wikilinks, "_find_links_from", counted)
    monkeypatch.setattr(preview, "_READ", OrderedDict())  # nothing kept from other tests
    monkeypatch.setattr(preview, "_read_chars", 0)
    body = (vault / "n.md").read_text()
    relations = store.build_context("Q", include_content=True).direct_relations
    assert len(relations) == 5
    # [[A]] and [[B]]: the first paragraph; [[C]] on: the rest
    assert calls == [body[: body.index("- [[C]]")], body]
    # The process keeps the note it read, by content hash: the next call reads nothing again.
    assert store.build_context("A", include_content=True).direct_relations[0].content_preview
    assert len(calls) == 2
    for r in relations:
        assert r.content_preview == {
            "memory://v/n.md": preview.content_preview(body, r.name.lower(), "q")
        }
    assert {p for r in relations for p in (r.content_preview or {}).values()} == {
        "[[A]] one.",
        "[[B]] two.",
        "[[C]] three.",
        "[[D]] four.",
        "[[E]] five.",
    }
    # A changed note is another hash: read anew, and quoted as it now reads.
    write("n.md", "[[Q]] and [[A]] changed.\n", created=FRESH)
    store.sync([vault], name="v")
    before = len(calls)
    changed = store.build_context("Q", include_content=True).direct_relations
    assert len(calls) == before + 1
    assert [r.content_preview for r in changed] == [{"memory://v/n.md": "[[Q]] and [[A]] changed."}]


def test_json_shape_uses_the_specified_camel_case_names(ranked: ContextGraph) -> None:
    data = json.loads(json.dumps(ranked.build_context("Q", depth=2).as_dict()))
    assert list(data) == [
        "conceptName",
        "depth",
        "communityId",
        "directRelations",
        "expandedRelations",
        "communitySiblings",
    ]
    assert list(data["directRelations"][0]) == [
        "name",
        "coOccurrenceCount",
        "decayWeight",
        "weightedScore",
        "files",
        "communityId",
    ]


def test_without_community_data_ids_are_null_and_siblings_empty(ranked: ContextGraph) -> None:
    with db.write(ranked.engine) as conn:
        conn.execute(text("UPDATE entities SET community_id = NULL"))
        conn.execute(text("DELETE FROM communities"))
        conn.execute(text("DELETE FROM community_runs"))
    result = ranked.build_context("Q")
    assert result.community_id is None
    assert result.community_siblings == ()
    assert all(r.community_id is None for r in result.direct_relations)


@pytest.mark.sqlite_only  # PostgreSQL: reads are READ ONLY transactions (test_postgres.py)
def test_build_context_never_writes(ranked: ContextGraph) -> None:
    assert ranked.database_path is not None
    before = ranked.database_path.with_name("graph.db-wal").stat().st_size
    with db.read(ranked.engine) as conn:
        changes = conn.execute(text("SELECT total_changes()")).scalar_one()
    ranked.build_context("Q", depth=3, include_content=True)
    with db.read(ranked.engine) as conn:
        assert conn.execute(text("SELECT total_changes()")).scalar_one() == changes
    assert ranked.database_path.with_name("graph.db-wal").stat().st_size == before
