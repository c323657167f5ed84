from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import DbFactory, Writer, snapshot

from contextgraph import ContextGraph, InvalidArgument, NotFound
from contextgraph.cli import cli

pytestmark = pytest.mark.engines("sqlite", "postgresql")


@pytest.fixture
def searchable(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    write(
        "fresh.md",
        "# Replication\n\nPostgres streaming replication with [[WAL]].",
        created="2026-11-25",
    )
    write(
        "old.md",
        "# Old replication\n\nPostgres streaming replication, long ago.",
        created="2020-01-01",
    )
    write("notes/other.md", "Machine learning pipelines and feature stores.", created="2026-11-25")
    write("notes/deep/x.md", "Replication of feature stores.", created="2026-11-25")
    store.sync([vault], name="v")
    return store


def test_any_word_matches_and_more_words_rank_first(searchable: ContextGraph) -> None:
    result = searchable.search("postgres replication")
    assert result.total == 3  # x.md holds only "replication"
    assert result.hits[0].path == "fresh.md"  # both words, fresh
    # old.md holds both words too, but is years old: its decay puts it below x.md.
    assert [h.path for h in result.hits][1:] == ["notes/deep/x.md", "old.md"]
    assert result.hits[1].bm25 > result.hits[2].bm25  # bm25 alone would rank old.md first


def test_all_words_requires_every_word_ranked_by_bm25_times_decay(
    searchable: ContextGraph,
) -> None:
    result = searchable.search("postgres replication", all_words=True)
    assert result.total == 2
    assert [h.path for h in result.hits] == ["fresh.md", "old.md"]
    assert result.hits[0].decay_weight == 1.0 > result.hits[1].decay_weight
    assert "**replication**" in result.hits[0].snippet.lower()


def test_stopwords_are_ignored_when_other_words_remain(searchable: ContextGraph) -> None:
    assert searchable.search("what is the replication of").total == 3
    assert searchable.search("the of and").total == 2  # only stopwords: searched as typed


def test_quoted_phrases_match_as_phrases(searchable: ContextGraph) -> None:
    assert searchable.search('"streaming replication"').total == 2
    assert searchable.search('"replication streaming"').total == 0


@pytest.mark.parametrize(
    "query",
    [
        "NEAR(a b)",
        '"unclosed',
        "col:foo",
        "a* OR b",
        "-x",
        "^start",
        "(((",
        "AND",
        "'; DROP",
        "\x00",
        "\ud800",
        "%",
        "_",
    ],
)
def test_fts_operators_in_user_input_never_raise(searchable: ContextGraph, query: str) -> None:
    result = searchable.search(query)
    assert result.total >= 0


def test_paging_and_total(searchable: ContextGraph) -> None:
    first = searchable.search("replication", limit=2, page=1)
    second = searchable.search("replication", limit=2, page=2)
    assert first.total == second.total == 3
    assert len(first.hits) == 2 and len(second.hits) == 1
    assert not {h.uri for h in first.hits} & {h.uri for h in second.hits}


def test_filter_by_source_and_folder(searchable: ContextGraph) -> None:
    assert {h.path for h in searchable.search("feature", folder="notes").hits} == {
        "notes/other.md",
        "notes/deep/x.md",
    }
    assert [h.path for h in searchable.search("feature", folder="notes/deep").hits] == [
        "notes/deep/x.md"
    ]
    assert searchable.search("feature", folder="%").total == 0
    everything = searchable.search("feature").total
    for root in (".", "./", "./.", "/", " "):  # the source's root folder: every file
        assert searchable.search("feature", folder=root).total == everything > 0
    with pytest.raises(NotFound, match="no source named 'nope'"):
        searchable.search("feature", source="nope")
    assert searchable.search("feature", source="v").total == 2


def test_bad_paging_arguments_are_errors(searchable: ContextGraph) -> None:
    with pytest.raises(InvalidArgument):
        searchable.search("x", limit=0)
    with pytest.raises(InvalidArgument):
        searchable.search("x", page=0)


def test_index_follows_edits_renames_and_deletions(
    searchable: ContextGraph, vault: Path, write: Writer, new_db: DbFactory
) -> None:
    write("fresh.md", "Entirely different words now.")
    (vault / "old.md").rename(vault / "moved.md")
    (vault / "notes" / "other.md").unlink()
    searchable.sync()
    assert {h.path for h in searchable.search("replication").hits} == {
        "moved.md",
        "notes/deep/x.md",
    }
    assert searchable.search("entirely different").total == 1
    assert searchable.search("machine learning").total == 0
    fresh = ContextGraph.open(new_db("fresh"))
    fresh.sync([vault], name="v")
    assert snapshot(fresh)["fts"] == snapshot(searchable)["fts"]
    fresh.close()


def test_search_command_prints_json(searchable: ContextGraph, db_url: str) -> None:
    result = CliRunner().invoke(cli, ["--db", db_url, "search", "replication", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["total"] == 3 and data["hits"][0]["uri"].startswith("memory://v/")


def test_the_folder_filter_is_the_exact_folder_on_every_engine(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    """Folders are case-sensitive paths: ``--folder Notes`` is not ``notes/`` (SQLite's LIKE
    folded ASCII case, PostgreSQL's does not, so the two engines answered differently)."""
    write("notes/a.md", "feature one")
    write("Notes/b.md", "feature two")
    write("Über/c.md", "feature three")
    write("über/d.md", "feature four")
    store.sync([vault], name="v")
    for folder, paths in (
        ("notes", {"notes/a.md"}),
        ("Notes", {"Notes/b.md"}),
        ("NOTES", set()),
        ("Über", {"Über/c.md"}),
        ("über", {"über/d.md"}),
        ("/notes/", {"notes/a.md"}),
    ):
        found = store.search("feature", folder=folder)
        assert {h.path for h in found.hits} == paths, folder
        assert found.total == len(paths), folder


def test_words_with_combining_marks_are_whole_words(tmp_path: Path) -> None:
    """Devanagari and Arabic words hold combining marks; the index keeps them inside the word
    (migration 0008), so a word no longer matches notes that merely hold some of its letters.
    Latin diacritics still fold, written precomposed or decomposed."""
    vault = tmp_path / "v"
    vault.mkdir()
    notes = {
        "greeting.md": "# G\n\nनमस्ते दुनिया hello\n",
        "water.md": "# W\n\nयह एक अलग नोट है जिसमें केवल पानी और तेल की बात है।\n",
        "arabic.md": "# A\n\nقال حَدَّثَنَا مُحَمَّدُ\n",
        "cafe.md": "# C\n\nun cafe\u0301 noir\n",  # é as e and a combining accent
    }
    for name, text in notes.items():
        (vault / name).write_text(text, encoding="utf-8")
    with ContextGraph.open(tmp_path / "g.db") as graph:
        graph.sync([vault])

        def found(query: str) -> list[str]:
            return [hit.path for hit in graph.search(query).hits]

        assert found("पानी") == ["water.md"]
        assert found("नमस्ते") == ["greeting.md"]
        assert found("مُحَمَّدُ") == ["arabic.md"]
        assert found("حَ") == []  # a letter and its mark: no word of the note
        assert found("café") == found("cafe") == ["cafe.md"]
