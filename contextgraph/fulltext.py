"""The full-text engine of each database, behind one shape (SPEC §9, §15).

:func:`contextgraph.ftsquery.build_match` turns what a user types into an FTS5 expression made
only of double-quoted phrases, ``AND``/``OR``/``NOT`` and parentheses. SQLite runs it as it is.
For PostgreSQL, :func:`tsquery` translates that same expression into a ``tsquery`` built in SQL
from ``phraseto_tsquery`` calls joined with ``&&``/``||``/``!!``: every phrase is bound as a
parameter and split into words by ``contextgraph_search_words()`` exactly as the documents are
(migration 0002), so no input can be a syntax error and both engines match the same words.
"""

from __future__ import annotations

import re
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
    table,
)
from sqlalchemy.sql.elements import UnaryExpression
from sqlalchemy.sql.operators import custom_op
from sqlalchemy.sql.selectable import NamedFromClause

from contextgraph.dialect import TS_CONFIG, is_postgresql

_SQLITE_FTS = table("files_fts", column("rowid"))
_SQLITE_FTS_NAME: ColumnClause[Any] = literal_column("files_fts")
# ts_rank_cd weights for labels {D, C, B, A}: a title (A) weighs twice the text (B), as the
# bm25 column weights (2.0, 1.0) do on SQLite.
_PG_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"
_TOKEN = re.compile(r'"((?:[^"]|"")*)"|(\()|(\))|(AND|OR|NOT)\b|(\S)')


@dataclass(frozen=True)
class FullText:
    """What a search query needs from the engine, for files alias ``f``.

    ``rank`` is lower-is-better (bm25's sign), so callers rank by ``-rank × decay`` on both.
    """

    joined: FromClause
    match: ColumnElement[bool]
    rank: ColumnElement[float]
    snippet: ColumnElement[str]


def full_text(conn: Connection, match: str, files: NamedFromClause) -> FullText:
    """The full-text pieces of ``match`` (a :func:`build_match` expression) for ``files``."""
    if is_postgresql(conn):
        query = tsquery(match)
        # Not a model column (migrations own it): named through the alias of ``files``.
        vector: ColumnElement[Any] = literal_column(f"{files.name}.search_tsv")
        return FullText(
            joined=files,
            match=vector.op("@@")(query),
            rank=-func.ts_rank_cd(literal_column(f"'{_PG_WEIGHTS}'::float4[]"), vector, query),
            snippet=func.ts_headline(
                literal_column(f"'{TS_CONFIG}'::regconfig"),
                files.c.text,
                query,
                literal(
                    "StartSel=[, StopSel=], MaxWords=16, MinWords=6, ShortWord=1, "
                    'MaxFragments=1, FragmentDelimiter=" … "'
                ),
            ),
        )
    return FullText(
        joined=_SQLITE_FTS.join(files, files.c.id == _SQLITE_FTS.c.rowid),
        match=_SQLITE_FTS_NAME.op("MATCH")(literal(match)),
        rank=func.bm25(_SQLITE_FTS_NAME, 2.0, 1.0),
        snippet=func.snippet(_SQLITE_FTS_NAME, 1, "[", "]", "…", 16),
    )


def tsquery(match: str) -> ColumnElement[Any]:
    """Translate a :func:`build_match` FTS5 expression into a PostgreSQL ``tsquery`` expression.

    Grammar (as FTS5 reads it): ``or := and ("OR" and)*``, ``and := not (["AND"] not)*``,
    ``not := primary ("NOT" primary)*``, ``primary := phrase | "(" or ")"``.
    """
    tokens = _tokens(match)
    pos = 0

    def peek() -> tuple[str, str] | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> tuple[str, str]:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def parse_or() -> ColumnElement[Any]:
        left = parse_and()
        while (tok := peek()) is not None and tok == ("op", "OR"):
            take()
            left = left.op("||")(parse_and())
        return left

    def parse_and() -> ColumnElement[Any]:
        left = parse_not()
        while (tok := peek()) is not None and tok not in (("op", "OR"), ("close", ")")):
            if tok == ("op", "AND"):
                take()
            left = left.op("&&")(parse_not())
        return left

    def parse_not() -> ColumnElement[Any]:
        left = parse_primary()
        while (tok := peek()) is not None and tok == ("op", "NOT"):
            take()
            negated: ColumnElement[Any] = UnaryExpression(
                parse_primary().self_group(), operator=custom_op("!!")
            )
            left = left.op("&&")(negated)
        return left

    def parse_primary() -> ColumnElement[Any]:
        kind, value = take()
        if kind == "open":
            inner = parse_or()
            if peek() == ("close", ")"):
                take()
            return inner.self_group()
        if kind != "phrase":
            raise ValueError(f"unexpected {value!r} in a search expression")
        return func.phraseto_tsquery(
            literal_column(f"'{TS_CONFIG}'::regconfig"), func.contextgraph_search_words(value)
        )

    result = parse_or()
    if pos != len(tokens):
        raise ValueError("trailing tokens in a search expression")
    return result.self_group()


def _tokens(match: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(match):
        phrase, opened, closed, operator, other = m.groups()
        if phrase is not None:
            out.append(("phrase", phrase.replace('""', '"')))
        elif opened:
            out.append(("open", "("))
        elif closed:
            out.append(("close", ")"))
        elif operator:
            out.append(("op", operator))
        elif other:
            raise ValueError(f"unexpected {other!r} in a search expression")
    return out


__all__ = ["FullText", "full_text", "tsquery"]
