"""Full-text search (SPEC §9): SQLite FTS5, ranked by bm25 × recency decay, with snippets.

User input never reaches FTS5 unescaped: :func:`contextgraph.ftsquery.build_match` turns any
text into quoted terms and phrases (plain words AND-ed, ``"quoted phrases"`` kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    func,
    select,
)

from contextgraph import db
from contextgraph.decay import weight_sql
from contextgraph.errors import InvalidArgument
from contextgraph.ftsquery import build_match
from contextgraph.fulltext import full_text
from contextgraph.models import File, Source, table_of
from contextgraph.notes import check_relative, file_uri
from contextgraph.settings import Settings

T_FILES = table_of(File)
T_SOURCES = table_of(Source)
MAX_LIMIT = 100
MAX_QUERY = 2000


@dataclass(frozen=True)
class SearchHit:
    uri: str
    path: str
    source: str
    title: str | None
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
) -> SearchResult:
    """Find files whose title or text match ``query``; best bm25 × decay first."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}")
    if page < 1:
        raise InvalidArgument("page must be 1 or more")
    if len(query) > MAX_QUERY:
        raise InvalidArgument(f"the query is longer than {MAX_QUERY} characters")
    match = build_match(query)
    if match is None:
        return SearchResult(query, 0, page, limit, ())
    f = T_FILES.alias("f")
    s = T_SOURCES.alias("s")
    fts = full_text(conn, match, f)
    conditions: list[ColumnElement[bool]] = [fts.match]
    if source is not None:
        conditions.append(s.c.name == source)
    if folder is not None and folder.strip("/ "):
        prefix = check_relative(folder.strip("/ "))
        conditions.append(f.c.path.like(db.escape_like(prefix) + "/%", escape="\\"))
    joined = fts.joined.join(s, s.c.id == f.c.source_id)
    total = conn.execute(select(func.count()).select_from(joined).where(*conditions)).scalar_one()
    # bm25() is lower-is-better (negative); the score flips it and weighs it by recency.
    bm25 = fts.rank
    decay = weight_sql(f, now, settings)
    score = (-bm25 * decay).label("score")
    snippet = fts.snippet
    rows = conn.execute(
        select(
            s.c.name,
            f.c.path,
            f.c.title,
            snippet.label("snippet"),
            score,
            bm25.label("bm25"),
            decay.label("decay"),
        )
        .select_from(joined)
        .where(*conditions)
        .order_by(score.desc(), f.c.path)
        .limit(limit)
        .offset((page - 1) * limit)
    )
    hits = tuple(
        SearchHit(
            uri=file_uri(r.name, r.path),
            path=r.path,
            source=r.name,
            title=r.title,
            snippet=r.snippet or "",
            score=float(r.score),
            bm25=float(r.bm25),
            decay_weight=float(r.decay),
        )
        for r in rows
    )
    return SearchResult(query, int(total), page, limit, hits)
