"""Long and odd queries: bounded work, the same answers for ordinary ones, clear errors.

A query may hold 4,000 characters. Two kinds cost seconds before the bounds tested here: one
word of 1,333 repeated tokens (a phrase FTS5 checks token by token in every file), and a
question of 1,000 word fragments (one search of every snippet's text per fragment).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import Writer, child_env

from contextgraph import ContextGraph, InvalidArgument
from contextgraph.graph.ftsquery import MAX_PHRASE_TOKENS, build_match, query_terms
from contextgraph.graph.snippet import Highlighter

pytestmark = pytest.mark.engines("sqlite", "postgresql")

WORDS = [f"word{i}" for i in range(40)]


@pytest.fixture
def graph(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    write("phrase.md", "Before. " + " ".join(WORDS) + " after.", created="2026-11-25")
    write("parts.md", " ".join(reversed(WORDS)), created="2026-11-25")
    write("md.md", "md " * 40 + "and [[Alpha]] with [[Beta]]", created="2026-11-25")
    store.sync([vault], name="v")
    return store


def test_a_word_of_repeated_tokens_is_one_piece_per_length() -> None:
    query = "_".join(["md"] * 1333)  # 3,998 characters
    terms = query_terms(query)
    assert [len(t.text.split()) for t in terms] == [MAX_PHRASE_TOKENS, 1333 % MAX_PHRASE_TOKENS]
    expression = build_match(query)
    assert expression is not None and len(expression) < 400


def test_a_long_phrase_is_one_term_of_its_consecutive_pieces() -> None:
    (term,) = query_terms('"' + " ".join(WORDS) + '"')
    assert term.phrase and term.text == " ".join(WORDS)
    assert term.spellings == tuple(
        " ".join(WORDS[i : i + MAX_PHRASE_TOKENS]) for i in range(0, 40, MAX_PHRASE_TOKENS)
    )
    assert term.expression() == "(" + " AND ".join(f'"{p}"' for p in term.spellings) + ")"
    short = query_terms('"' + " ".join(WORDS[:MAX_PHRASE_TOKENS]) + '"')
    assert [t.spellings for t in short] == [(" ".join(WORDS[:MAX_PHRASE_TOKENS]),)]  # as before


def test_a_long_phrase_finds_the_file_that_holds_it(graph: ContextGraph) -> None:
    quoted = '"' + " ".join(WORDS) + '"'
    assert [h.path for h in graph.search(quoted, all_words=True).hits] == ["phrase.md"]
    assert [h.path for h in graph.search(quoted).hits] == ["phrase.md"]  # every piece, in order
    assert graph.search("_".join(["md"] * 1333)).hits[0].path == "md.md"


@pytest.mark.parametrize("all_words", [False, True])
def test_a_long_phrase_that_no_file_holds_matches_nothing(
    graph: ContextGraph, all_words: bool
) -> None:
    # Its last pieces are in phrase.md, its first is nowhere: a phrase needs every piece.
    quoted = '"zzqx ' + " ".join(WORDS) + '"'
    assert graph.search(quoted, all_words=all_words).hits == ()
    assert [i.uri for i in graph.retrieve(quoted).items] == []


def test_the_highlighter_marks_the_longest_stems_of_a_long_query() -> None:
    fragments = " ".join(f"{chr(97 + i % 26)}{'x' * (i % 7)}{i}" for i in range(300))
    highlighter = Highlighter(query_terms(fragments))
    assert len(highlighter.stems) == Highlighter.MAX_STEMS
    lengths = [len(s) for s in highlighter.stems]
    assert lengths == sorted(lengths, reverse=True)
    assert Highlighter(query_terms(fragments)).stems == highlighter.stems  # in a set order


def test_marks_stop_where_the_occurrences_looked_at_run_out() -> None:
    highlighter = Highlighter(query_terms("ng"))
    inside = "xng " * Highlighter.MAX_LOOKS_PER_STEM
    assert highlighter.spans("ng " + inside) == [(0, 2)]
    assert highlighter.spans(inside + "ng") == []  # past the bound: unmarked
    assert highlighter.spans("so ng and ng") == [(3, 5), (10, 12)]


def test_a_retrieval_of_many_fragments_names_few_words(graph: ContextGraph) -> None:
    question = " ".join(WORDS) + " " + " ".join(f"f{i}" for i in range(1200))
    result = graph.retrieve(question[:4000], k=5)
    assert result.items and result.items[0].path in ("phrase.md", "parts.md")
    matched = [why for item in result.items for why in item.why if why.startswith("matches ")]
    assert matched and all(len(m.split(", ")) <= Highlighter.MAX_STEMS for m in matched)


@pytest.mark.parametrize("now", [0, 1.5, True, b"2026-01-01", ["2026-01-01"], {"now": 1}])
def test_now_of_another_type_is_a_clear_error(graph: ContextGraph, now: object) -> None:
    for call in (
        lambda: graph.search("md", now=now),  # type: ignore[arg-type]
        lambda: graph.retrieve("md", now=now),  # type: ignore[arg-type]
        lambda: graph.build_context("Alpha", now=now),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgument, match="now must be"):
            call()


def test_now_as_text_or_datetime_still_works(graph: ContextGraph) -> None:
    assert [h.path for h in graph.search("before", now="2026-12-01").hits] == ["phrase.md"]
    for now in ("2026-12-01T10:00:00Z", datetime(2026, 12, 1, 10, tzinfo=UTC)):
        context = graph.build_context("Alpha", now=now)
        assert [r.name for r in context.direct_relations] == ["beta"]


def test_one_seed_name_is_one_seed(graph: ContextGraph) -> None:
    assert graph.expand("Alpha").as_dict() == graph.expand(["Alpha"]).as_dict()
    with pytest.raises(InvalidArgument, match="seeds must be a list"):
        graph.expand(5)  # type: ignore[arg-type]


@pytest.mark.engines("sqlite")  # the benchmark reads a SQLite file
def test_the_long_query_benchmark_reports_every_query(graph: ContextGraph) -> None:
    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_long_queries.py"
    database = graph.engine.url.database
    graph.close()
    done = subprocess.run(
        [sys.executable, str(script), "--db", str(database), "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for name in ("repeated_word", "fragments", "fragments_default"):
        assert report[name]["chars"] > 100
        assert report[name]["search_cpu_s"] >= 0 and report[name]["retrieve_cpu_s"] >= 0
