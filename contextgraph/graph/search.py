"""Full-text search (SPEC §9): SQLite FTS5 (or PostgreSQL's tsvector, see
:mod:`contextgraph.store.fulltext`), ranked by bm25 × recency decay, with snippets.

A query is what a person or an LLM types. :mod:`contextgraph.graph.ftsquery` turns it into
quoted FTS5 terms that match *any* word (or every word with ``all_words``), in every spelling
the index holds (:mod:`contextgraph.graph.searchterms`), so no input is a syntax error. bm25
weighs four columns: the title, the body, what names the file (path words, first heading,
defined symbol names) and the other spellings of the body's identifiers (``COLUMN_WEIGHTS``).

Ranking is exact, and avoids scoring every match when it can prove a page final:

- *Recent files first* (SQLite, many matches). FTS5's bm25 of a file is below a ceiling known
  before any file is scored: each phrase adds ``idf × tf·(k1+1) / (tf + k1·(…))``, which is less
  than ``idf × (k1+1)`` (:func:`bm25_ceiling`). So a file of decay weight ``w`` scores below
  ``ceiling × w``. SQLite scores only the files read or dated since some day (a plain column
  test on each match, no bm25); when the page's last hit scores above ``ceiling`` times the
  weight of the day before, no older file can reach the page. The first window holds the files
  of weight at least ½; a second one is cut exactly at the page's last score.
- *Best bm25 first*. FTS5 hands over the best ``n`` matches by bm25 alone (in C, with a LIMIT),
  then decay weighs just those. Since a decay weight is at most 1, no match outside the first
  ``n`` can score above the ``n``-th bm25; when the page's last hit scores above that bound the
  page is final (fresh files, whose weights are all 1).
- Otherwise SQLite ranks every match by bm25 × decay in one statement with a LIMIT, as it always
  could.
"""

from __future__ import annotations

import functools
import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    FromClause,
    Integer,
    Row,
    Select,
    String,
    bindparam,
    case,
    func,
    literal_column,
    null,
    or_,
    select,
)

from contextgraph.errors import InvalidArgument, NotFound, UnsafePath
from contextgraph.graph.decay import SECONDS_PER_DAY, reference_weight_sql, weight_sql
from contextgraph.graph.ftsquery import build_match, query_terms
from contextgraph.graph.read import check_relative
from contextgraph.graph.searchbounds import (
    FTS_NAME,
    FTS_ROWID,
    FTS_TABLE,
    RARE_SHARE,
    Bm25Bounds,
    FtsCounts,
    bm25_bounds,
    fts_counts,
    fts_row_count,
    oldest_age,
    quoted,
    weight_at_age,
    window_start,
)
from contextgraph.graph.searchterms import display_title
from contextgraph.graph.snippet import SNIPPET_CHARS, Highlighter
from contextgraph.limits import MAX_PATH_CHARS, MAX_QUERY_CHARS, SEARCH_LIMIT, SEARCH_PAGE
from contextgraph.settings import Settings
from contextgraph.store.dialect import is_postgresql
from contextgraph.store.fulltext import FullText, full_text, phrases, sqlite_full_text
from contextgraph.store.identity import file_uri
from contextgraph.store.models import T_FILES, T_SEARCH_DATES, T_SOURCES
from contextgraph.store.sqlcore import ByIds, compiled_rows

_F = T_FILES.alias("f")  # aliased once: a fresh alias per call costs more than the query
_S = T_SOURCES.alias("s")
_D = T_SEARCH_DATES.alias("d")
# bm25 weights of the index columns: title, text, search_meta, search_parts.
COLUMN_WEIGHTS = (4.0, 1.0, 4.0, 1.0)
_SNIPPET_SCAN = 20_000  # characters of a body searched for the snippet's matches
MIN_CANDIDATES = 64
# Below this many matches, scoring them all costs less than proving a page from recent files.
RECENT_FIRST_MIN_MATCHES = 256
FIRST_WINDOW_WEIGHT = 0.5  # the first recent window: files of decay weight at least this
WINDOW_ROUNDS = 3
RECENT_SAMPLE = 64  # matches looked at to guess whether the first window holds most of them


@dataclass(frozen=True)
class SearchHit:
    uri: str
    path: str
    source: str
    title: str
    snippet: str
    score: float
    bm25: float
    decay_weight: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "path": self.path,
            "source": self.source,
            "title": self.title,
            "snippet": self.snippet,
            "score": self.score,
            "bm25": self.bm25,
            "decayWeight": self.decay_weight,
        }


@dataclass(frozen=True)
class SearchResult:
    query: str
    total: int
    page: int
    limit: int
    hits: tuple[SearchHit, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "total": self.total,
            "page": self.page,
            "limit": self.limit,
            "hits": [h.as_dict() for h in self.hits],
        }


@dataclass(frozen=True)
class Candidate:
    """One match of the first stage, scored: what :func:`ranked_matches` returns."""

    file_id: int
    source: str
    path: str
    kind: str
    title: str | None
    score: float
    bm25: float
    decay_weight: float


def check_query(query: str) -> None:
    """Refuse a query longer than ``MAX_QUERY_CHARS`` with a clear message."""
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(
            f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS} are read"
        )


def _check_source(conn: Connection, source: str | None) -> None:
    if source is None:
        return
    found = conn.execute(select(T_SOURCES.c.id).where(T_SOURCES.c.name == source)).first()
    if found is None:
        raise NotFound.source(source)


def ranked_matches(
    conn: Connection,
    match: str,
    *,
    settings: Settings,
    now: float,
    top: int,
    source: str | None = None,
    folder: str | None = None,
    kind: str | None = None,
) -> tuple[list[Candidate], int]:
    """The ``top`` best matches of an FTS5 expression by bm25 × decay, and the match count.

    Every value of a search is a bound parameter of its statements, so on SQLite each statement
    is built and compiled once per shape (filters given, settings) and then run at the driver
    level (:func:`contextgraph.store.sqlcore.compiled_rows`): Core's per-call building,
    cache-key and parameter work cost about as much as FTS5's own.
    """
    f, s = _F, _S
    lite = not is_postgresql(conn)
    n = max(MIN_CANDIDATES, 2 * top)
    values: dict[str, Any] = {"now": now, "top": top, "n": n}
    if lite:
        fts = sqlite_full_text(bindparam("match", type_=String), f, COLUMN_WEIGHTS)
        values["match"] = match
    else:
        fts = full_text(conn, match, f, COLUMN_WEIGHTS)
    conditions: list[ColumnElement[bool]] = [fts.match]
    if source is not None:
        conditions.append(s.c.name == bindparam("source", type_=String))
        values["source"] = source
    if kind is not None:
        conditions.append(f.c.kind == bindparam("kind", type_=String))
        values["kind"] = kind
    prefix = _folder(conn, folder.strip("/ ")) if folder is not None and folder.strip("/ ") else ""
    if prefix:  # "", ".", "./" and "/" are the source's root: every file
        # The exact folder: a LIKE would fold ASCII case on SQLite (not on PostgreSQL).
        # In either Unicode normal form: a macOS vault's paths are NFD, typed ones NFC.
        under = bindparam("folder", type_=String)
        other = bindparam("folder_form", type_=String)
        conditions.append(
            or_(
                func.substr(f.c.path, 1, func.length(under)) == under,
                func.substr(f.c.path, 1, func.length(other)) == other,
            )
        )
        values["folder"] = unicodedata.normalize("NFC", prefix) + "/"
        values["folder_form"] = unicodedata.normalize("NFD", prefix) + "/"
    shape = (settings, source is not None, kind is not None, "folder" in values)
    ranking = _Ranking(conn, fts, conditions, now, settings, values=values, shape=shape)
    if top > 0 and lite:
        ranked = ranking.recent_first(match, top, n, filtered=len(conditions) > 1)
        if ranked is not None:
            return ranked
    total = ranking.count()
    if total == 0 or top <= 0:
        return [], total
    return ranking.best_bm25_first(top, n), total


def _folder(conn: Connection, folder: str) -> str:
    """``folder`` checked as a source-relative path, or taken as it is where a sync stored
    files under exactly that name (``~``, ``C:``, ``100%25``: names :func:`check_relative`
    refuses as typed paths)."""
    try:
        return check_relative(folder)
    except UnsafePath:
        if len(folder) > MAX_PATH_CHARS or "\x00" in folder:
            raise
        under = folder + "/"
        files = T_FILES
        held = conn.execute(
            select(files.c.id).where(func.substr(files.c.path, 1, len(under)) == under).limit(1)
        ).first()
        if held is None:
            raise
        return folder


_NOW = bindparam("now", type_=Float)
_SINCE = bindparam("since", type_=Float)


class _Ranking:
    """The statements that rank the matches of one search (see the module docstring).

    A statement is built only by the function handed to :meth:`fetch`, from bound parameters
    alone (``values`` holds what they are bound to; ``shape`` is everything else a statement's
    text depends on), so a compiled text can serve every search of the same shape.
    """

    def __init__(
        self,
        conn: Connection,
        fts: FullText,
        conditions: list[ColumnElement[bool]],
        now: float,
        settings: Settings,
        *,
        values: dict[str, Any],
        shape: tuple[Any, ...],
    ) -> None:
        self.conn, self.fts, self.conditions = conn, fts, conditions
        self.now, self.settings = now, settings
        self.values, self.shape = values, shape

    def fetch(self, name: str, build: Callable[[], Select[Any]]) -> Sequence[Any]:
        """The rows of the statement ``build()`` (named ``name`` among this search's)."""
        return compiled_rows(self.conn, (name, *self.shape), build, self.values)

    @functools.cached_property
    def joined(self) -> FromClause:
        return self.fts.joined.join(_S, _S.c.id == _F.c.source_id)

    def count(self) -> int:
        """The matches that pass the filters, each with its file and source row."""
        rows = self.fetch(
            "count",
            lambda: select(func.count()).select_from(self.joined).where(*self.conditions),
        )
        return int(rows[0][0])

    @functools.cached_property
    def columns(self) -> tuple[ColumnElement[Any], ...]:
        f, s = _F, _S
        return (
            f.c.id,
            s.c.name,
            f.c.path,
            f.c.kind,
            f.c.title,
            self.bm25.label("bm25"),
            self.decay.label("decay"),
        )

    @functools.cached_property
    def bm25(self) -> ColumnElement[float]:
        return self.fts.rank

    @functools.cached_property
    def decay(self) -> ColumnElement[float]:
        return weight_sql(_F, _NOW, self.settings)

    @functools.cached_property
    def query(self) -> Select[Any]:
        return select(*self.columns).select_from(self.joined).where(*self.conditions)

    @functools.cached_property
    def by_score(self) -> tuple[ColumnElement[Any], ...]:
        return ((-self.bm25 * self.decay).desc(), _F.c.path, _S.c.name)

    def run(self, name: str, build: Callable[[], Select[Any]]) -> list[Candidate]:
        """The rows of ``build()`` scored, best first (ties by path, then source)."""
        return _scored(self.fetch(name, build))

    def window(self, *, filtered: bool, rare: bool) -> Select[Any]:
        """The best ``top`` matches among files read or dated since ``since`` (and files holding
        a ``rare`` phrase), ordering first, unfiltered, any match without its file or source.

        Unfiltered, each window scans every match with outer joins: an index out of step with
        the files then shows, and the count is taken the joined way instead. There each match
        is tested on its ``search_dates`` row (a narrow copy of its reference time, present
        only while its source is), and joined to ``files`` only once let through.
        """
        f, s, d = _F, _S, _D
        if filtered:
            window = [
                f.c.last_accessed >= _SINCE,
                func.coalesce(f.c.created, f.c.modified) >= _SINCE,
            ]
        else:  # the reference time is the later of those two, so the same test
            window = [d.c.reference >= _SINCE]
        if rare:  # files holding a rare phrase are scored whatever their age
            where = FTS_NAME.op("MATCH")(bindparam("rare", type_=String))
            holding = select(FTS_ROWID).where(where).correlate(None).scalar_subquery()
            window.append((f if filtered else d).c.id.in_(holding))
        if filtered:
            base, order = self.query, self.by_score
        else:
            outer = (
                FTS_TABLE.outerjoin(d, d.c.id == FTS_ROWID)
                .outerjoin(f, f.c.id == FTS_ROWID)
                .outerjoin(s, s.c.id == f.c.source_id)
            )
            # Let through on the dates row (the file and source are joined only for the
            # window's files), then told apart by the joined rows.
            window.append(d.c.id.is_(None))
            lost = or_(d.c.id.is_(None), f.c.id.is_(None), s.c.id.is_(None))

            def scored(value: ColumnElement[Any]) -> ColumnElement[Any]:
                return case((lost, null()), else_=value)  # FTS5 cannot rank a row it lost

            decay = reference_weight_sql(d.c.reference, _NOW, self.settings)
            columns = (*self.columns[:5], scored(self.bm25).label("bm25"))
            columns += (scored(decay).label("decay"),)
            base = select(*columns).select_from(outer).where(*self.conditions)
            order = (lost.desc(), scored(-self.bm25 * decay).desc(), *self.by_score[1:])
        return base.where(or_(*window)).order_by(*order).limit(bindparam("top", type_=Integer))

    def recent_first(
        self, match: str, top: int, n: int, *, filtered: bool
    ) -> tuple[list[Candidate], int] | None:
        """The exact ``top`` and the match count, or None when recent files prove no page.

        Unfiltered, the count is FTS5's own (no join); see :meth:`window`.
        """
        if self.sample_says_rank_otherwise(FIRST_WINDOW_WEIGHT):
            return None
        counts = fts_counts(self.conn, match)
        if counts is None or counts.matches <= max(RECENT_FIRST_MIN_MATCHES, n):
            return None  # few matches: scoring them all is cheaper than a proof
        bounds = counts.bounds(phrases(match), rare_below=counts.matches * RARE_SHARE)
        if bounds.rare:
            self.values["rare"] = " OR ".join(quoted(p) for p in bounds.rare)
        total = self.count() if filtered else counts.matches
        name = f"window{int(filtered)}{int(bool(bounds.rare))}"
        build = functools.partial(self.window, filtered=filtered, rare=bool(bounds.rare))
        least = FIRST_WINDOW_WEIGHT
        for _ in range(WINDOW_ROUNDS):
            age = oldest_age(least, self.now, self.settings)
            # The window holds every file of age <= ``age + 1``: those that weigh at least
            # ``least`` and one day more. Every file left out is at least ``out`` days old, so
            # weighs at most ``weight_at_age(out)`` (the proof below), and a page whose last
            # score clears that needs no second round. Past 2**40 days the window is every file.
            out = None if age is None else age + 2
            since = -math.inf if out is None else window_start(out, self.now)
            self.values["since"] = since
            rows = self.fetch(name, build)
            if any(r.id is None or r.name is None or r.decay is None for r in rows):
                return None  # a match without its file, dates or source: count the joined way
            found = _scored(rows)
            if out is None:
                return found, total
            if len(found) < top:
                least /= 8  # too few recent matches: a wider window
                continue
            if any(-c.bm25 >= bounds.ceiling for c in found):
                return None  # not the bm25 the ceiling was derived for: rank the exact way
            last = found[-1].score
            if last > bounds.common_ceiling * weight_at_age(out, self.now, self.settings):
                return found, total
            # The window that holds every file which can beat ``last``.
            least = last / bounds.common_ceiling
        return None

    def sample_says_rank_otherwise(self, least: float) -> bool:
        """Whether a sample of the matches (the first by rowid) says to skip recent windows.

        Only a guess, for speed: with fewer matches than the sample there is little to prune,
        and when most weigh at least ``least`` the first window would hold most matches
        (every file fresh), where bm25's own top ``n`` proves the page sooner.
        """
        f = _F
        sample = select(f.c.last_accessed, f.c.created, f.c.modified)
        rows = self.fetch(
            "sample",
            lambda: sample.select_from(self.joined).where(*self.conditions).limit(RECENT_SAMPLE),
        )
        age = oldest_age(least, self.now, self.settings)
        if len(rows) < RECENT_SAMPLE or age is None:
            return True
        since = self.now - (age + 1) * SECONDS_PER_DAY
        recent = 0
        for r in rows:
            base = r.modified if r.created is None else r.created
            recent += max(base, base if r.last_accessed is None else r.last_accessed) >= since
        return recent * 2 > len(rows)

    def best_bm25_first(self, top: int, n: int) -> list[Candidate]:
        """The exact ``top``: bm25's best ``n`` when they prove the page, else every match."""
        limit_n, limit_top = bindparam("n", type_=Integer), bindparam("top", type_=Integer)
        found = self.run("bm25", lambda: self.query.order_by(self.bm25).limit(limit_n))
        if len(found) < n or len(found) < top:
            return found[:top]
        bound = -max(c.bm25 for c in found)  # the n-th bm25: no unseen match scores above it
        if found[top - 1].score > bound:
            return found[:top]
        by_score = self.run("score", lambda: self.query.order_by(*self.by_score).limit(limit_top))
        return by_score[:top]


def _scored(rows: Sequence[Row[Any]]) -> list[Candidate]:
    return sorted(
        (
            Candidate(
                int(r.id),
                r.name,
                r.path,
                r.kind,
                r.title,
                -float(r.bm25) * float(r.decay),
                float(r.bm25),
                float(r.decay),
            )
            for r in rows
        ),
        key=lambda c: (-c.score, c.path, c.source),
    )


def search(
    conn: Connection,
    query: str,
    *,
    settings: Settings,
    now: float,
    limit: int = 10,
    page: int = 1,
    source: str | None = None,
    folder: str | None = None,
    all_words: bool = False,
) -> SearchResult:
    """Find files whose title, path, symbols or text match ``query``; best bm25 × decay first."""
    SEARCH_LIMIT.check(limit)
    SEARCH_PAGE.check(page)
    check_query(query)
    _check_source(conn, source)
    match = build_match(query, all_words=all_words)
    if match is None:
        return SearchResult(query, 0, page, limit, ())
    top = page * limit
    found, total = ranked_matches(
        conn, match, settings=settings, now=now, top=top, source=source, folder=folder
    )
    page_hits = found[(page - 1) * limit : top]
    texts = _texts(conn, [c.file_id for c in page_hits])
    highlighter = Highlighter(query_terms(query))
    hits = tuple(
        SearchHit(
            uri=file_uri(c.source, c.path),
            path=c.path,
            source=c.source,
            title=display_title(c.title, texts.get(c.file_id), c.path),
            snippet=highlighter.snippet(texts.get(c.file_id) or "", note=c.kind == "note"),
            score=c.score,
            bm25=c.bm25,
            decay_weight=c.decay_weight,
        )
        for c in page_hits
    )
    return SearchResult(query, total, page, limit, hits)


def _texts(conn: Connection, ids: list[int]) -> dict[int, str]:
    """The first characters of each file's text (enough for a title and a snippet)."""
    return {int(file_id): head or "" for file_id, head in _TEXTS.rows(conn, ids)}


_TEXTS = ByIds(
    select(
        T_FILES.c.id,
        func.substr(T_FILES.c.text, literal_column("1"), literal_column(str(_SNIPPET_SCAN))),
    ),
    T_FILES.c.id,
)


__all__ = [
    "COLUMN_WEIGHTS",
    "SNIPPET_CHARS",
    "Bm25Bounds",
    "Candidate",
    "FtsCounts",
    "Highlighter",
    "SearchHit",
    "SearchResult",
    "bm25_bounds",
    "check_query",
    "fts_counts",
    "fts_row_count",
    "oldest_age",
    "ranked_matches",
    "search",
    "weight_at_age",
]
