"""Bounds that let a search prove a page without scoring every match (SQLite's FTS5).

:func:`fts_counts` reads what FTS5 alone counts for an expression (its index rows, the matches,
each phrase's files) in one statement; :meth:`FtsCounts.bounds` turns them into a ceiling on
every file's ``-bm25``; :func:`oldest_age` and :func:`weight_at_age` turn a decay weight into
whole days. :mod:`contextgraph.graph.search` ranks with them.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    String,
    bindparam,
    column,
    func,
    literal_column,
    select,
    table,
)

from contextgraph.graph.decay import SECONDS_PER_DAY, weight
from contextgraph.settings import Settings
from contextgraph.store.dialect import engine_key
from contextgraph.store.fulltext import phrases
from contextgraph.store.meta import graph_version
from contextgraph.store.sqlcore import compiled_rows

# FTS5's bm25 (ext/fts5/fts5_aux.c): k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)),
# or 1e-6 where that is not positive, N rows in the index and n of them holding the phrase.
BM25_K1 = 1.2
BM25_MIN_IDF = 1e-6
# Relative slack on the ceiling, far above the rounding of FTS5's sum: the bound only has to
# hold, it need not be tight.
CEILING_SLACK = 1e-6
_FTS_DATA = table("files_fts_data", column("id"), column("block"))
FTS_TABLE = table("files_fts", column("rowid"))
FTS_ROWID = FTS_TABLE.c.rowid
FTS_NAME: ColumnElement[Any] = literal_column("files_fts")
RARE_SHARE = 1 / 8  # a phrase in fewer than this share of the matches is rare (see bm25_bounds)


@dataclass(frozen=True)
class Bm25Bounds:
    """Bounds on ``-bm25`` of an expression's matches (SQLite's FTS5).

    ``ceiling``: no match reaches it. ``common_ceiling``: no match holding none of the ``rare``
    phrases reaches it (a phrase a file lacks adds nothing to its bm25).
    """

    ceiling: float
    common_ceiling: float
    rare: tuple[str, ...]


@dataclass(frozen=True)
class FtsCounts:
    """What FTS5 alone counts for an expression: its index rows, matches and phrases' files."""

    rows: int
    matches: int
    files_with: dict[str, int]

    def bounds(self, texts: list[str], *, rare_below: float) -> Bm25Bounds:
        """The bm25 bounds of the expression whose phrases (repeats included) are ``texts``.

        bm25 sums, over the phrases, ``idf × tf·(k1+1) / (tf + k1·(1 - b + b·len/avglen))``,
        and that fraction is below ``k1 + 1`` for any ``tf``. Phrases in fewer than
        ``rare_below`` files are rare.
        """
        rare = tuple(sorted(p for p in set(texts) if self.files_with[p] < rare_below))
        idf = common = 0.0
        for text in texts:
            n = self.files_with[text]
            value = math.log((self.rows - n + 0.5) / (n + 0.5))
            value = value if value > 0.0 else BM25_MIN_IDF
            idf += value
            if text not in rare:
                common += value
        scale = (BM25_K1 + 1.0) * (1.0 + CEILING_SLACK)
        return Bm25Bounds(ceiling=idf * scale, common_ceiling=common * scale, rare=rare)


# (database, graph version, FTS5's averages and structure records) -> {expression: matches}.
# Counts depend only on what the index holds. FTS5 rewrites its structure record on every change
# it commits (a new segment: its write counter goes up) and the averages record holds the row
# count and token totals; with the graph version every writer replaces (store.meta), which
# also keeps apart two databases made one after the other at one path, the key names one index
# content. A bounded, per-process cache like PostgreSQL's document frequencies (store.fulltext).
_COUNTS: dict[tuple[str, str, bytes, bytes], dict[str, int]] = {}
_COUNTS_MAX = 64  # index contents
_COUNTS_PER_CONTENT = 20_000  # expressions of one content
_counts_lock = threading.Lock()


def fts_counts(conn: Connection, match: str) -> FtsCounts | None:
    """FTS5's counts for ``match`` (each phrase's and the whole expression's matches); None when
    its row count cannot be read. Counts already taken on the same index content are reused."""
    texts = phrases(match)
    if not texts:
        return None
    averages, structure = tuple(compiled_rows(conn, ("fts records",), _records, {})[0])
    if not isinstance(averages, bytes) or not isinstance(structure, bytes):
        return None
    rows_indexed = fts_row_count(averages)
    if rows_indexed is None:
        return None
    key = (engine_key(conn.engine), graph_version(conn), averages, structure)
    known = _COUNTS.get(key, {})
    missing = sorted({match, *(quoted(p) for p in texts)} - known.keys())
    if missing:
        values = {f"p{i}": m for i, m in enumerate(missing)}
        row = compiled_rows(conn, ("counts", len(missing)), lambda: _counts(len(missing)), values)
        known = {**known, **dict(zip(missing, (int(n) for n in row[0]), strict=True))}
        with _counts_lock:
            if len(_COUNTS) >= _COUNTS_MAX and key not in _COUNTS:
                _COUNTS.clear()
            if len(known) <= _COUNTS_PER_CONTENT:
                _COUNTS[key] = known
    files_with = {p: known[quoted(p)] for p in texts}
    if any(n > rows_indexed for n in (known[match], *files_with.values())):
        return None
    return FtsCounts(rows=rows_indexed, matches=known[match], files_with=files_with)


def _records() -> Select[Any]:
    """FTS5's averages record (row 1 of its data table) and structure record (row 10)."""

    def record(number: int) -> Any:
        return select(_FTS_DATA.c.block).where(_FTS_DATA.c.id == number).scalar_subquery()

    return select(record(1), record(10))


def _counts(count: int) -> Select[Any]:
    """The statement of :func:`fts_counts`: the matches of each ``:p0``, ``:p1`` … (bound
    parameters, FTS5 expressions)."""

    def matching(name: str) -> Any:
        where = FTS_NAME.op("MATCH")(bindparam(name, type_=String))
        return select(func.count()).select_from(FTS_TABLE).where(where).scalar_subquery()

    return select(*(matching(f"p{i}") for i in range(count)))


def bm25_bounds(conn: Connection, match: str, *, rare_below: float) -> Bm25Bounds | None:
    """The :class:`Bm25Bounds` of ``match``; phrases in fewer than ``rare_below`` files are rare."""
    counts = fts_counts(conn, match)
    return None if counts is None else counts.bounds(phrases(match), rare_below=rare_below)


def quoted(phrase: str) -> str:
    return '"' + phrase.replace('"', '""') + '"'


def fts_row_count(averages: object) -> int | None:
    """The rows FTS5 counts in its index: the first varint of its averages record.

    The record (``files_fts_data`` row 1) is the row count then each column's token total, as
    SQLite varints: seven bits a byte, high bit set on all but the last, a ninth byte whole.
    """
    if not isinstance(averages, bytes) or not averages:
        return None
    value = 0
    for i, byte in enumerate(averages[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return None


def weight_at_age(age: int, now: float, settings: Settings) -> float:
    """The decay weight of a file ``age`` whole days old."""
    return weight(now - (age + 0.5) * SECONDS_PER_DAY, now, settings)


# Seconds a window's start is moved back past a whole number of days: far above the rounding
# of ``now - reference`` at any epoch of the next millennia (an ulp of 4e9 s is 5e-7 s).
WINDOW_MARGIN_SECONDS = 1.0


def window_start(out: int, now: float) -> float:
    """The earliest reference time a recent window takes for every file left out of it to be
    at least ``out`` whole days old (:func:`contextgraph.graph.decay.age_days`, in floating point
    as SQL computes it): ``out`` days and :data:`WINDOW_MARGIN_SECONDS` before ``now``. The
    window holds every file of age ``out - 1`` or less."""
    return now - out * SECONDS_PER_DAY - WINDOW_MARGIN_SECONDS


def oldest_age(least: float, now: float, settings: Settings) -> int | None:
    """The most whole days a file can be old and keep a weight of at least ``least``.

    None when no age below 2**40 days (every file) weighs less. Weights never grow with age;
    an age of 0 always weighs 1 (grace is never negative).
    """
    high = 1
    while weight_at_age(high, now, settings) >= least:
        if high >= 2**40:
            return None
        high *= 2
    low = 0  # weight_at_age(low) >= least > weight_at_age(high)
    while low < high - 1:
        middle = (low + high) // 2
        if weight_at_age(middle, now, settings) >= least:
            low = middle
        else:
            high = middle
    return low


__all__ = [
    "BM25_K1",
    "FTS_NAME",
    "FTS_ROWID",
    "FTS_TABLE",
    "RARE_SHARE",
    "Bm25Bounds",
    "FtsCounts",
    "bm25_bounds",
    "fts_counts",
    "fts_row_count",
    "oldest_age",
    "quoted",
    "weight_at_age",
    "window_start",
]
