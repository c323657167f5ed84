"""Tests for contextgraph.graph.ftsquery: every built expression must be valid FTS5 syntax."""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextgraph.graph.ftsquery import (
    _SEP_ENDS,
    _SEP_STARTS,
    TOKENIZER,
    build_match,
    is_token_char,
    tokenize,
)

DOCS = [
    "hello world",
    "machine learning and AI",
    "foo-bar baz",
    "c++ templates",
    "to be or not to be",
    "NEAR the end",
    "Café Résumé naïve",
    "col:foo value",
]


@pytest.fixture(scope="module")
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize={TOKENIZER!r})")
    conn.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", enumerate(DOCS, start=1))
    yield conn
    conn.close()


def search(conn: sqlite3.Connection, query: str, *, all_words: bool = False) -> list[str]:
    expression = build_match(query, all_words=all_words)
    if expression is None:
        return []
    rows = conn.execute("SELECT body FROM t WHERE t MATCH ? ORDER BY rowid", (expression,))
    return [body for (body,) in rows]


# --------------------------------------------------------------------------------------------
# Examples
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("hello world", '"hello" OR "world"'),
        ('"machine learning" ai', '"machine learning" OR "ai"'),
        ("NEAR(a b)", '"NEAR" OR "b"'),
        ("col:foo", '("col foo" OR "colfoo" OR "col" OR "foo")'),
        ("a*", '"a"'),
        ("-x", '"x"'),
        ("^start", '"start"'),
        ('"unclosed', '"unclosed"'),
        ('"unclosed phrase here', '"unclosed phrase here"'),
        ("AND", '"AND"'),
        ("a OR b NOT c", '"b" OR "c"'),
        ("c++", '"c"'),
        ("foo-bar", '("foo bar" OR "foobar" OR "foo" OR "bar")'),
        (
            "e.g. foo.bar/baz",
            '("e g" OR "eg" OR "e" OR "g") OR '
            '("foo bar baz" OR "foobarbaz" OR "foo" OR "bar" OR "baz")',
        ),
        ("x AND (y OR z)", '"x" OR "z"'),
        ("a,b;c", '"b" OR "c"'),
        ('say "hello  --  world" now', '"say" OR "hello world"'),
        ('foo"bar baz"qux', '"foo" OR "bar baz" OR "qux"'),
        ('""hello""', '"hello"'),
        ("+a -b", '"b"'),
        ("hello hello HELLO", '"hello"'),
        ("{col1 col2}: x", '"col1" OR "col2" OR "x"'),
        ("Ünïcödé 日本語 данные", '"Ünïcödé" OR "日本語" OR "данные"'),
        ("café", '"café"'),
        ("a\x00b c\ud800d", '"ab" OR "cd"'),
        ("TokenValidator", '("TokenValidator" OR "token validator" OR "token" OR "validator")'),
        ("create_time", '("create time" OR "createtime" OR "create" OR "time")'),
        ("the parser of", '"parser"'),
        ("the of", '"the" OR "of"'),  # only stopwords: kept
        ('"the end"', '"the end"'),  # a phrase keeps its stopwords
    ],
)
def test_examples(query: str, expected: str, db: sqlite3.Connection) -> None:
    assert build_match(query) == expected
    db.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expected,)).fetchall()


@pytest.mark.parametrize(
    "query",
    ["", " ", " \t\n\r ", "(((", ")))", '"', '""', '" "', "*", "^", ":", "+-", "\x00", "\ud800"],
)
def test_nothing_searchable_gives_none(query: str) -> None:
    assert build_match(query) is None


def test_keywords_match_literally(db: sqlite3.Connection) -> None:
    assert search(db, "or not") == ["to be or not to be"]
    assert search(db, "NEAR") == ["NEAR the end"]
    assert search(db, "and") == ["machine learning and AI"]
    assert search(db, "NOT hello") == ["hello world"]  # "not" is a stopword, not a negation
    assert search(db, "NEAR hello", all_words=True) == []  # an AND of two words


def test_all_words_requires_every_word(db: sqlite3.Connection) -> None:
    assert search(db, "hello templates") == ["hello world", "c++ templates"]
    assert search(db, "hello templates", all_words=True) == []
    assert build_match("hello world", all_words=True) == '"hello" AND "world"'


def test_operator_characters_are_searchable(db: sqlite3.Connection) -> None:
    assert search(db, "c++") == ["c++ templates"]
    # Any-words: a compound word also matches by its parts ("foo" of col:foo)...
    assert search(db, "foo-bar") == ["foo-bar baz", "col:foo value"]
    # ...but as a required word it keeps its adjacency: a phrase (or joined), not two words.
    assert search(db, "foo-bar", all_words=True) == ["foo-bar baz"]
    assert search(db, "bar-foo", all_words=True) == []
    assert search(db, "col:foo", all_words=True) == ["col:foo value"]
    assert search(db, "hel*") == []  # no prefix queries: ``*`` is just a separator
    assert search(db, '"learning and"') == ["machine learning and AI"]
    assert search(db, '"and learning"') == []


def test_diacritics_and_case_are_folded_by_fts5(db: sqlite3.Connection) -> None:
    assert search(db, "cafe RESUME") == ["Café Résumé naïve"]
    assert search(db, "cafe\u0301 naive") == ["Café Résumé naïve"]  # decomposed input


def test_plain_query_finds_document(db: sqlite3.Connection) -> None:
    assert search(db, "hello world") == ["hello world"]
    assert search(db, "world hello") == ["hello world"]
    assert search(db, '"machine learning" ai') == ["machine learning and AI"]
    assert search(db, "hello nothere") == ["hello world"]  # any of the words
    assert search(db, "hello nothere", all_words=True) == []


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

any_char = st.characters(exclude_categories=()) | st.characters(categories=["Cs"])
SYNTAX = ['"', "*", "^", ":", "(", ")", "+", "-", "{", "}", "AND", "OR", "NOT", "NEAR", "NEAR/3"]
queries = st.one_of(
    st.text(),
    st.text(alphabet=any_char),
    st.lists(st.sampled_from([*SYNTAX, " ", "a", "é", "\x00"]) | st.text(max_size=3)).map("".join),
)
QUOTED = r'"[^" ]+(?: [^" ]+)*"'
TERM = rf"(?:{QUOTED}|\({QUOTED}(?: OR {QUOTED})+\))"
EXPRESSION_RE = re.compile(rf"{TERM}(?: (?:OR|AND) {TERM})*")


@settings(max_examples=1000, deadline=None)
@given(query=queries, all_words=st.booleans())
def test_any_input_is_valid_fts5(query: str, all_words: bool, db: sqlite3.Connection) -> None:
    expression = build_match(query, all_words=all_words)
    if expression is None:
        assert tokenize(query) == []
        return
    # Only double-quoted terms (or parenthesised alternatives of them) joined by OR; no NUL
    # or surrogates.
    assert EXPRESSION_RE.fullmatch(expression)
    assert "\x00" not in expression
    assert not any("\ud800" <= ch <= "\udfff" for ch in expression)
    # Never a syntax error (sqlite3.OperationalError) from FTS5.
    db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
    db.execute("SELECT rowid FROM t WHERE body MATCH ?", (expression,)).fetchall()


word = st.text(
    alphabet=st.characters(categories=["L", "N"]).filter(is_token_char), min_size=1, max_size=8
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(word, min_size=1, max_size=5),
    st.lists(st.sampled_from([" ", "-", ".", ", ", " (", ") ", ":", "+", "*"]), min_size=5),
    st.booleans(),
)
def test_document_with_the_words_is_found(
    words: list[str], separators: list[str], shuffle: bool
) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize={TOKENIZER!r})")
    body = "intro " + " ".join(words) + " outro"
    conn.execute("INSERT INTO t(rowid, body) VALUES (1, ?), (2, 'unrelated text')", (body,))
    query_words = list(reversed(words)) if shuffle else words
    query = " ".join(query_words)
    expression = build_match(query)
    assert expression is not None
    found = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
    assert (1,) in found
    # The same words glued with punctuation form a phrase, found in the document too.
    glued = "".join(w + s for w, s in zip(words, separators, strict=False))
    expression = build_match(glued)
    assert expression is not None
    found = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
    assert (1,) in found
    conn.close()


# --------------------------------------------------------------------------------------------
# The separator table matches the running SQLite's unicode61 tokenizer
# --------------------------------------------------------------------------------------------


def sqlite_token_chars(code_points: list[int]) -> dict[int, bool]:
    """Ask SQLite whether each code point is a unicode61 token character: ``aXb`` is one token
    if ``X`` is one, two tokens otherwise."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize={TOKENIZER!r})")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany(
        "INSERT INTO t(rowid, body) VALUES (?, ?)", [(cp, f"a{chr(cp)}b") for cp in code_points]
    )
    counts = dict(conn.execute("SELECT doc, count(*) FROM v GROUP BY doc").fetchall())
    conn.close()
    return {cp: counts.get(cp) == 1 for cp in code_points}


def test_separator_table_matches_sqlite() -> None:
    boundaries = {
        cp + delta
        for start, end in zip(_SEP_STARTS, _SEP_ENDS, strict=True)
        for cp in (start, end)
        for delta in (-1, 0, 1)
    }
    rng = random.Random(1234)
    sample = {rng.randrange(1, 0x110000) for _ in range(20_000)} | set(range(1, 0x3000))
    code_points = sorted(
        cp for cp in boundaries | sample if 0 < cp < 0x110000 and not 0xD800 <= cp <= 0xDFFF
    )
    truth = sqlite_token_chars(code_points)
    wrong = [hex(cp) for cp in code_points if is_token_char(chr(cp)) != truth[cp]]
    assert wrong == []


def test_tokenize() -> None:
    assert tokenize("c++ foo-bar x_y 3.14") == ["c", "foo", "bar", "x", "y", "3", "14"]
    assert tokenize("naïve e\u0301 \u00b4") == ["naïve", "e\u0301"]  # U+00B4 is a separator
    assert tokenize("🦀rust ✅done") == ["🦀rust", "done"]  # per unicode61's Unicode 6.1 tables
    assert tokenize("") == []


def test_the_tokenizer_checked_here_is_the_one_the_index_is_built_with() -> None:
    """ftsquery splits queries by TOKENIZER; the index's tokenizer lives in a migration (frozen
    SQL), so a migration that changes it must change TOKENIZER too."""
    import json

    from contextgraph.store import blank

    objects = json.loads(blank.SNAPSHOT.read_text(encoding="utf-8"))["objects"]
    [index] = [sql for sql in objects if sql.startswith("CREATE VIRTUAL TABLE files_fts")]
    assert f'tokenize="porter {TOKENIZER}"' in index
