"""Graph expansion (SPEC §8), including one test per deliberate fix of the reference design."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import EXAMPLES, Writer
from sqlalchemy import insert, select

from contextgraph import ContextGraph, InvalidArgument, Settings
from contextgraph.cli import cli
from contextgraph.store import db
from contextgraph.store.models import T_ENTITIES, T_FILES, T_REL, T_SOURCES

pytestmark = pytest.mark.engines("sqlite", "postgresql")


def build(
    graph: ContextGraph,
    edges: list[tuple[str, str, float]],
    kind: str = "symbol",
    *,
    reverse_ids: bool = False,
) -> None:
    """Store symbols and directed code relations (type ``references``) straight into the graph
    (ids in name order, or with ``reverse_ids`` against it)."""
    names = sorted({n for a, b, _ in edges for n in (a, b)}, reverse=reverse_ids)
    with db.write(graph.engine) as conn:
        sid = conn.execute(
            insert(T_SOURCES).values(name="t", root="/nonexistent", created_at=0.0)
        ).inserted_primary_key[0]  # type: ignore[index]
        fid = conn.execute(
            insert(T_FILES).values(
                source_id=sid,
                path="m.py",
                kind="code",
                size=0,
                mtime_ns=0,
                hash="x",
                modified=0.0,
                concept_count=0,
                pairs=1,
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        for n in names:
            conn.execute(
                insert(T_ENTITIES).values(
                    kind=kind,
                    key=f"t:m.py::{n}",
                    name=n,
                    name_lower=n.lower(),
                    file_id=fid,
                    path="m.py",
                )
            )
        ids = dict(conn.execute(select(T_ENTITIES.c.name, T_ENTITIES.c.id)).all())
        for a, b, w in edges:
            conn.execute(
                insert(T_REL).values(
                    src_id=ids[a], dst_id=ids[b], type="references", weight=w, file_id=fid
                )
            )


def names(graph: ContextGraph, seeds: list[str], **kwargs: Any) -> list[tuple[str, int]]:
    return [(r.entity, r.depth) for r in graph.expand(seeds, **kwargs).results]


def test_results_are_ordered_by_depth_then_score_then_name(store: ContextGraph) -> None:
    build(
        store,
        [("Seed", "Bbb", 1.0), ("Seed", "Aaa", 1.0), ("Aaa", "Deep", 1.0), ("Bbb", "Other", 1.0)],
    )
    result = store.expand(["Seed"], max_nodes=3)
    # Aaa and Bbb tie on score, reach (one frontier entity each) and specificity (two
    # neighbours each): the name decides.
    assert [(r.entity, r.depth, r.score, r.via) for r in result.results] == [
        ("Aaa", 1, 0.5, "Seed"),
        ("Bbb", 1, 0.5, "Seed"),
        ("Deep", 2, 0.25, "Aaa"),
    ]


def test_equal_scores_rank_by_reach_then_specificity_not_name(store: ContextGraph) -> None:
    build(
        store,
        [
            ("One", "Aaa", 1.0),  # Aaa: reached from one seed, and linked to many others
            *[("Aaa", f"Noise{i}", 1.0) for i in range(5)],
            ("One", "Bbb", 1.0),  # Bbb: reached from one seed, specific
            ("One", "Zzz", 1.0),  # Zzz: reached from both seeds
            ("Two", "Zzz", 1.0),
        ],
    )
    result = store.expand(["One", "Two"], max_depth=1)
    assert [r.entity for r in result.results] == ["Zzz", "Bbb", "Aaa"]


def test_specificity_decides_a_tie_cut_by_the_room_counting_distinct_neighbours(
    store: ContextGraph,
) -> None:
    build(
        store,
        [
            ("Seed", "Aaa", 1.0),  # Aaa: four neighbours
            *[("Aaa", f"Noise{i}", 1.0) for i in range(3)],
            ("Seed", "Bbb", 1.0),  # Bbb: two
            ("Bbb", "Other", 1.0),
            ("Seed", "Ccc", 1.0),  # Ccc: two relations, both with Seed: one neighbour
            ("Ccc", "Seed", 1.0),
        ],
    )
    # All three tie on score and reach; only two fit, the most specific first.
    assert names(store, ["Seed"], max_depth=1, max_nodes=2) == [("Ccc", 1), ("Bbb", 1)]
    assert names(store, ["Seed"], max_depth=1, max_nodes=1) == [("Ccc", 1)]


@pytest.mark.parametrize("reverse_ids", [False, True])
def test_between_equal_edges_the_via_is_the_smaller_name_whatever_the_row_order(
    store: ContextGraph, reverse_ids: bool
) -> None:
    build(store, [("Zed", "Target", 1.0), ("Amy", "Target", 1.0)], reverse_ids=reverse_ids)
    result = store.expand(["Zed", "Amy"], max_depth=1)
    assert [(r.entity, r.via) for r in result.results] == [("Target", "Amy")]


def test_entities_equal_in_all_but_their_key_rank_by_key_not_by_row_order(
    store: ContextGraph,
) -> None:
    """Two methods named ``__init__``, in b.py and a.py, reached by equal edges: their order is
    the keys' (a.py's first), not the order the rows were stored or came back in, which differs
    between SQLite and PostgreSQL and between an incremental sync and a fresh one."""
    with db.write(store.engine) as conn:
        sid = conn.execute(
            insert(T_SOURCES).values(name="t", root="/nonexistent", created_at=0.0)
        ).inserted_primary_key[0]  # type: ignore[index]
        ids = {}
        for path, name in (("s.py", "Seed"), ("b.py", "__init__"), ("a.py", "__init__")):
            fid = conn.execute(
                insert(T_FILES).values(
                    source_id=sid,
                    path=path,
                    kind="code",
                    size=0,
                    mtime_ns=0,
                    hash=path,
                    modified=0.0,
                    concept_count=0,
                    pairs=1,
                )
            ).inserted_primary_key[0]  # type: ignore[index]
            ids[path] = conn.execute(
                insert(T_ENTITIES).values(
                    kind="symbol",
                    key=f"{sid}:{path}::C.{name}",
                    name=name,
                    name_lower=name.lower(),
                    file_id=fid,
                    path=path,
                )
            ).inserted_primary_key[0]  # type: ignore[index]
        for path in ("b.py", "a.py"):
            conn.execute(
                insert(T_REL).values(
                    src_id=ids["s.py"],
                    dst_id=ids[path],
                    type="references",
                    weight=1.0,
                    file_id=fid,
                )
            )
    result = store.expand(["Seed"], max_depth=1)
    assert [(r.entity, r.path) for r in result.results] == [
        ("__init__", "a.py"),
        ("__init__", "b.py"),
    ]


def test_direction_out_follows_what_seeds_use_and_in_what_uses_them(
    store: ContextGraph,
) -> None:
    build(store, [("Caller", "Seed", 1.0), ("Seed", "Helper", 1.0), ("Helper", "Leaf", 1.0)])
    assert names(store, ["Seed"]) == [("Caller", 1), ("Helper", 1), ("Leaf", 2)]
    assert names(store, ["Seed"], direction="out") == [("Helper", 1), ("Leaf", 2)]
    assert names(store, ["Seed"], direction="in") == [("Caller", 1)]
    with pytest.raises(InvalidArgument, match="direction"):
        store.expand(["Seed"], direction="sideways")  # type: ignore[arg-type]


def test_a_files_own_definitions_never_crowd_out_its_related_files(
    store: ContextGraph, vault: Path
) -> None:
    (vault / "util.py").write_text("def helper():\n    return 1\n", encoding="utf-8")
    body = "".join(f"def zz_fn{i}():\n    return {i}\n\n" for i in range(10))
    (vault / "big.py").write_text("import util\n\n" + body, encoding="utf-8")
    store.sync([vault])
    result = store.expand(["big.py"], max_depth=1, max_nodes=2)
    assert result.results[0].entity == "util.py"  # the imported file, before zz_fn0 … zz_fn9
    assert result.results[0].relationship_type == "imports"
    assert result.results[0].uri == "memory://vault/util.py"
    assert result.results[1].relationship_type == "defines"


def test_layered_bfs_takes_every_near_entity_before_a_deep_one(store: ContextGraph) -> None:
    # The reference ordered its queue by weight alone: the heavy chain Seed->H1->H2 (weight 1.0)
    # crowded out the weaker direct neighbours (0.95) under max_nodes=3.
    build(
        store,
        [("Seed", "H1x", 1.0), ("H1x", "H2x", 1.0), ("Seed", "W1x", 0.95), ("Seed", "W2x", 0.95)],
    )
    assert names(store, ["Seed"], max_nodes=3) == [("H1x", 1), ("W1x", 1), ("W2x", 1)]


def test_seeds_are_never_results(store: ContextGraph) -> None:
    # Two seeds that point at each other: the reference returned each as the other's neighbour.
    build(store, [("SeedA", "SeedB", 1.0), ("SeedB", "Third", 1.0)])
    assert names(store, ["SeedA", "SeedB"]) == [("Third", 1)]


def test_entities_at_max_depth_are_not_expanded(store: ContextGraph) -> None:
    build(store, [("Seed", "One", 1.0), ("One", "Two", 1.0), ("Two", "Three", 1.0)])
    assert names(store, ["Seed"], max_depth=1) == [("One", 1)]
    assert names(store, ["Seed"], max_depth=2) == [("One", 1), ("Two", 2)]


def test_hub_count_is_over_distinct_neighbours_not_rows(store: ContextGraph) -> None:
    # Hub0 has 20 neighbours, each linked twice (two relation types would be 40 rows in the
    # reference's count): it is no hub, so expansion continues through it.
    edges = [("Seed", "Hub0", 1.0)] + [("Hub0", f"Leaf{i:02d}", 1.0) for i in range(20)]
    build(store, edges)
    with db.write(store.engine) as conn:
        rows = conn.execute(select(T_REL)).all()
        for r in rows:
            if r.src_id != r.dst_id:
                conn.execute(
                    insert(T_REL).values(
                        src_id=r.dst_id,
                        dst_id=r.src_id,
                        type="imports",
                        weight=1.0,
                        file_id=r.file_id,
                    )
                )
    result = names(store, ["Seed"], max_nodes=50)
    assert ("Leaf00", 2) in result


def test_a_hub_reached_from_a_seed_is_returned_but_not_expanded(store: ContextGraph) -> None:
    edges = [("Seed", "Hub0", 1.0)] + [("Hub0", f"Leaf{i:02d}", 1.0) for i in range(31)]
    build(store, edges)
    assert names(store, ["Seed"], max_nodes=50) == [("Hub0", 1)]


def test_a_hub_seed_is_still_expanded(store: ContextGraph) -> None:
    # The reference returned nothing for a hub seed.
    build(store, [("Hub0", f"Leaf{i:02d}", 1.0) for i in range(40)])
    result = names(store, ["Hub0"], max_nodes=5)
    assert result == [(f"Leaf{i:02d}", 1) for i in range(5)]


def test_seeds_match_case_insensitively_by_symbol_path_stem_and_concept(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    (vault / "auth").mkdir()
    (vault / "auth" / "tokens.py").write_text("class TokenValidator:\n    pass\n")
    write("note.md", "[[Machine Learning]] and [[Deep Learning]]")
    store.sync([vault])
    for seed in ("tokenvalidator", "TOKENVALIDATOR", "auth/tokens.py", "tokens", "Auth/Tokens"):
        assert store.expand([seed]).matched, seed
    # A file's name, and the end of its path at a folder boundary, with its extension too.
    assert store.expand(["tokens.py"]).matched == ("auth/tokens.py",)
    assert store.expand(["TOKENS.PY"]).matched == ("auth/tokens.py",)
    for seed in ("ens.py", "th/tokens.py", "tokens.p", "okens"):
        assert store.expand([seed]).matched == (), seed
    assert store.expand(["machine learning"]).matched == ("machine-learning",)
    assert [r.entity for r in store.expand(["MACHINE_LEARNING"]).results] == ["deep-learning"]


def test_edges_under_the_weight_floor_are_not_traversed(store: ContextGraph) -> None:
    build(store, [("Seed", "Strong", 1.0), ("Seed", "Weak", 0.5)])
    assert names(store, ["Seed"]) == [("Strong", 1)]


def test_quality_filter_drops_short_numeric_and_stopword_names(store: ContextGraph) -> None:
    build(
        store,
        [("Seed", "ab", 1.0), ("Seed", "12345", 1.0), ("Seed", "the", 1.0), ("Seed", "Good", 1.0)],
    )
    assert names(store, ["Seed"]) == [("Good", 1)]


def test_extra_stopwords_come_from_settings(db_url: str) -> None:
    graph = ContextGraph.open(db_url, settings=Settings(expand_stopwords=("good",)))
    build(graph, [("Seed", "Good", 1.0), ("Seed", "Fine", 1.0)])
    assert names(graph, ["Seed"]) == [("Fine", 1)]
    graph.close()


def test_cycles_terminate_and_visit_each_entity_once(store: ContextGraph) -> None:
    build(store, [("Seed", "Aaa", 1.0), ("Aaa", "Bbb", 1.0), ("Bbb", "Seed", 1.0)])
    assert names(store, ["Seed"], max_depth=5) == [("Aaa", 1), ("Bbb", 1)]


def test_several_seeds_expand_together(store: ContextGraph) -> None:
    build(store, [("SeedA", "FromA", 1.0), ("SeedB", "FromB", 1.0)])
    assert names(store, ["SeedA", "SeedB"]) == [("FromA", 1), ("FromB", 1)]


def test_unknown_seeds_give_no_results_and_bad_limits_are_errors(store: ContextGraph) -> None:
    assert store.expand(["Nothing"]).results == ()
    with pytest.raises(InvalidArgument):
        store.expand([])
    with pytest.raises(InvalidArgument):
        store.expand(["x"], max_depth=0)
    with pytest.raises(InvalidArgument):
        store.expand(["x"], max_nodes=0)


def test_concept_cooccurrence_counts_break_weight_ties(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Seed]] [[Often]]")
    write("b.md", "[[Seed]] [[Often]]")
    write("c.md", "[[Seed]] [[Aardvark]]")
    store.sync([vault])
    assert names(store, ["Seed"], max_nodes=1) == [("often", 1)]


def test_authentication_service_pulls_in_token_validator_through_the_cli(db_url: str) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db_url, "sync", str(EXAMPLES / "code")]).exit_code == 0
    result = runner.invoke(cli, ["--db", db_url, "expand", "AuthenticationService", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    hit = next(r for r in data["results"] if r["entity"] == "TokenValidator")
    assert hit["kind"] == "symbol" and hit["depth"] == 1 and hit["path"] == "auth/tokens.py"
    assert set(data["results"][0]) == {
        "entity",
        "kind",
        "relationshipType",
        "depth",
        "score",
        "via",
        "path",
        "uri",
    }
    assert hit["uri"] == "memory://code/auth/tokens.py"


def test_a_qualified_name_or_a_path_and_name_is_a_seed(store: ContextGraph) -> None:
    store.sync([EXAMPLES / "code"])
    plain = store.expand(["validate"])
    assert "validate" in plain.matched  # by its name, as before
    for seed in (
        "TokenValidator.validate",
        "tokenvalidator.VALIDATE",
        "auth/tokens.py::TokenValidator.validate",
        "auth/tokens.py::TokenValidator",
    ):
        found = store.expand([seed])
        assert found.matched, seed
        assert found.results, seed
    assert store.expand(["Nothing.validate"]).matched == ()
    assert store.expand(["other/tokens.py::TokenValidator"]).matched == ()
