"""The full-text engine of each database behind one shape (SPEC §9, §15).

:func:`contextgraph.graph.ftsquery.build_match` turns what a user types into an FTS5 expression made
only of double-quoted phrases, ``AND``/``OR`` and parentheses. SQLite runs it as it is, ranked
by FTS5's bm25 over the four indexed columns.

For PostgreSQL, :func:`tsquery` translates the same expression into a ``tsquery`` built in SQL
from ``phraseto_tsquery`` calls joined with ``&&``/``||``: every phrase is a bound parameter,
split into words by ``contextgraph_search_words()`` and stemmed by the ``contextgraph`` text
search configuration exactly as the documents are (migration 0003), so no input can be a syntax
error and both engines match the same words. bm25's two ranking signals -- more of the words,
rarer words -- are kept: the rank is the sum over the query's terms of the term's inverse
document frequency (bm25's formula) times ``ts_rank_cd`` of the file for that term, with the
four columns weighted as :data:`contextgraph.graph.search.COLUMN_WEIGHTS` weighs them.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Connection,
    FromClause,
    column,
    func,
    literal,
    literal_column,
    select,
    table,
)
from sqlalchemy.sql.selectable import NamedFromClause

from contextgraph.store.dialect import engine_key, is_postgresql

# The text search configuration of migration 0003: 'simple' words, English Porter-style stems
# (Snowball), no stopwords dropped (the query builder handles those, as on SQLite).
TS_CONFIG = "contextgraph"
_SQLITE_FTS = table("files_fts", column("rowid"))
_SQLITE_FTS_NAME: ColumnClause[Any] = literal_column("files_fts")
# ts_rank_cd normalization 1: divide by 1 + log(length), bm25's damping of long documents.
_PG_NORMALIZATION = 1
_TOKEN = re.compile(r'"((?:[^"]|"")*)"|(\()|(\))|\b(AND|OR)\b|(\S)')


@dataclass(frozen=True)
class FullText:
    """What a search needs from the engine for files alias ``f``.

    ``rank`` is lower-is-better on both engines (bm25's sign): a score is ``-rank × decay``.
    """

    joined: FromClause
    match: ColumnElement[bool]
    rank: ColumnElement[float]


def full_text(
    conn: Connection, match: str, files: NamedFromClause, weights: Sequence[float]
) -> FullText:
    """The full-text pieces of ``match`` (a :func:`build_match` expression) for ``files``.

    ``weights`` are the column weights of title, text, search_meta and search_parts.
    """
    if not is_postgresql(conn):
        return sqlite_full_text(literal(match), files, weights)
    terms = top_level_terms(match)
    query = _combine(terms, "&&" if _is_conjunction(match) else "||")
    idf = _idf(conn, terms, _term_keys(match))
    # Not a model column (migrations own it): named through the alias of ``files``.
    vector: ColumnElement[Any] = literal_column(f"{files.name}.search_tsv")
    array = _weights_array(weights)
    ranks = [
        literal(weight) * func.ts_rank_cd(array, vector, term, _PG_NORMALIZATION)
        for term, weight in zip(terms, idf, strict=True)
    ]
    rank: ColumnElement[float] = literal(0.0) - _balanced(ranks, lambda a, b: a + b)
    return FullText(joined=files, match=vector.op("@@")(query), rank=rank)


def _balanced(
    parts: Sequence[ColumnElement[Any]],
    join: Callable[[ColumnElement[Any], ColumnElement[Any]], ColumnElement[Any]],
) -> ColumnElement[Any]:
    """``parts`` joined pairwise into a tree of depth log2(n), not a chain of depth n: SQLAlchemy
    compiles an expression by recursion, and a query of 1,000 words (within the 4,000
    characters a query may hold) made a chain deeper than Python's recursion limit."""
    level = list(parts)
    while len(level) > 1:
        paired = [join(a, b) for a, b in zip(level[::2], level[1::2], strict=False)]
        level = paired + level[len(paired) * 2 :]
    return level[0]


def sqlite_full_text(
    match: ColumnElement[Any], files: NamedFromClause, weights: Sequence[float]
) -> FullText:
    """SQLite's pieces of :func:`full_text` for the expression ``match`` (a value or a bound
    parameter: a statement built on a parameter compiles once for every query)."""
    return FullText(
        joined=_SQLITE_FTS.join(files, files.c.id == _SQLITE_FTS.c.rowid),
        match=_SQLITE_FTS_NAME.op("MATCH")(match),
        rank=func.bm25(_SQLITE_FTS_NAME, *weights),
    )


def _weights_array(weights: Sequence[float]) -> ColumnElement[Any]:
    title, text, meta, parts = (float(w) for w in weights)
    top = max(title, text, meta, parts) or 1.0
    # ts_rank_cd takes weights for labels {D, C, B, A} in (0, 1]: A title, B meta, C text, D parts.
    values = ", ".join(f"{w / top:.6g}" for w in (parts, text, meta, title))
    return literal_column(f"'{{{values}}}'::float4[]")


# (database, graph version, term) -> (files, files matching the term). Every write that
# changes a file's text replaces the graph version (contextgraph.store.meta), so a count is
# reused only while no file changed; a bounded, per-process cache like the neighbourhood one.
_DF_CACHE: dict[tuple[str, str, str], tuple[int, int]] = {}
_DF_CACHE_MAX = 50_000
_df_lock = threading.Lock()


def _idf(conn: Connection, terms: list[ColumnElement[Any]], keys: list[str]) -> list[float]:
    """bm25's inverse document frequency of each term: ln(1 + (N − n + 0.5) / (n + 0.5))."""
    from contextgraph.store.meta import graph_version

    version = (engine_key(conn.engine), graph_version(conn))
    found = {k: _DF_CACHE.get((*version, k)) for k in keys}
    missing = [(k, t) for k, t in zip(keys, terms, strict=True) if found[k] is None]
    if missing:
        files = table("files", column("search_tsv"))
        counts = [func.count().filter(files.c.search_tsv.op("@@")(t)) for _, t in missing]
        row = conn.execute(select(func.count(), *counts).select_from(files)).one()
        with _df_lock:
            if len(_DF_CACHE) > _DF_CACHE_MAX:
                _DF_CACHE.clear()
            for (key, _), n in zip(missing, row[1:], strict=True):
                found[key] = _DF_CACHE[(*version, key)] = (int(row[0]), int(n))
    out = []
    for key in keys:
        total, n = found[key] or (0, 0)
        out.append(math.log(1.0 + (total - n + 0.5) / (n + 0.5)))
    return out


def _term_keys(match: str) -> list[str]:
    """One text per top-level term of ``match``, in :func:`top_level_terms` order."""
    keys: list[str] = []
    group: list[str] = []
    for kind, value, depth in _tokens(match):
        if kind == "phrase":
            (group if depth else keys).append(value)
        elif kind == "close" and depth == 0 and group:
            keys.append("\x1f".join(group))
            group = []
    return keys


def _phrase(text: str) -> ColumnElement[Any]:
    return func.phraseto_tsquery(
        literal_column(f"'{TS_CONFIG}'::regconfig"), func.contextgraph_search_words(text)
    )


def _combine(parts: list[ColumnElement[Any]], operator: str) -> ColumnElement[Any]:
    return _balanced(parts, lambda a, b: a.op(operator)(b)).self_group()


def _is_conjunction(match: str) -> bool:
    return any(
        kind == "op" and value == "AND" and depth == 0 for kind, value, depth in _tokens(match)
    )


def top_level_terms(match: str) -> list[ColumnElement[Any]]:
    """The tsquery of each top-level term of a :func:`build_match` expression.

    ``"a" OR ("b c" OR "bc")`` gives two terms: ``'a'`` and ``'b' <-> 'c' | 'bc'``. A group
    joined by ``AND`` (the pieces of a long quoted phrase) is one term that needs them all.
    """
    tokens = _tokens(match)
    terms: list[ColumnElement[Any]] = []
    group: list[ColumnElement[Any]] = []
    joined: set[str] = set()  # the operators inside the open group
    for kind, value, depth in tokens:
        if kind == "phrase":
            if depth == 0:
                terms.append(_phrase(value))
            else:
                group.append(_phrase(value))
        elif kind == "close" and depth == 0 and group:
            terms.append(_combine(group, "&&" if joined == {"AND"} else "||"))
            group, joined = [], set()
        elif kind == "op" and depth > 0:
            joined.add(value)
            if len(joined) > 1:
                raise ValueError("a group of a search expression mixes AND and OR")
    if not terms:
        raise ValueError("a search expression without terms")
    return terms


def phrases(match: str) -> list[str]:
    """Every phrase of a :func:`build_match` expression, in order, unquoted (repeats kept)."""
    return [value for kind, value, _ in _tokens(match) if kind == "phrase"]


def _tokens(match: str) -> list[tuple[str, str, int]]:
    """(kind, value, nesting depth outside the token) for each token of ``match``."""
    out: list[tuple[str, str, int]] = []
    depth = 0
    for m in _TOKEN.finditer(match):
        phrase, opened, closed, operator, other = m.groups()
        if phrase is not None:
            out.append(("phrase", phrase.replace('""', '"'), depth))
        elif opened:
            out.append(("open", "(", depth))
            depth += 1
        elif closed:
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced parentheses in a search expression")
            out.append(("close", ")", depth))
        elif operator:
            out.append(("op", operator, depth))
        elif other:
            raise ValueError(f"unexpected {other!r} in a search expression")
    return out


# --- a cold load indexes each batch in one statement (contextgraph.sync.coldload) -----------------


def index_files(conn: Connection, file_ids: Sequence[int]) -> None:
    """Index the given ``files`` rows (SQLite), as the insert trigger would have, in one statement.

    For a cold load, which drops that trigger (:mod:`contextgraph.sync.coldload`). One
    statement, however many the rows (their ids go in as one JSON array): FTS5 writes out the
    entries it holds in memory as a new segment of the index at each statement's start (its
    savepoint), so a batch indexed in chunks of 500 ids wrote a segment per chunk.
    """
    names = [str(r[1]) for r in conn.exec_driver_sql("PRAGMA table_info(files_fts)")]
    cols = ", ".join(names)  # the index's columns, which external content names as in files
    rows = f"SELECT id, {cols} FROM files WHERE id IN (SELECT value FROM json_each(?))"
    ids = json.dumps([int(i) for i in file_ids])
    conn.exec_driver_sql(f"INSERT INTO files_fts(rowid, {cols}) {rows}", (ids,))


__all__ = [
    "TS_CONFIG",
    "FullText",
    "full_text",
    "index_files",
    "phrases",
    "sqlite_full_text",
    "top_level_terms",
]
