"""Full-text search (SPEC §9): SQLite FTS5 (or PostgreSQL's tsvector, see
:mod:`contextgraph.store.fulltext`), ranked by bm25 × recency decay, with snippets.

A query is what a person or an LLM types. :mod:`contextgraph.graph.ftsquery` turns it into
quoted FTS5 terms that match *any* word (or every word with ``all_words``), in every spelling
the index holds (:mod:`contextgraph.graph.searchterms`), so no input is a syntax error. bm25
weighs four columns: the title, the body, what names the file (path words, first heading,
defined symbol names) and the other spellings of the body's identifiers (``COLUMN_WEIGHTS``).

Ranking is exact and two-staged: FTS5 hands over the best ``n`` matches by bm25 alone (in C,
with a LIMIT), then decay weighs just those. Since a decay weight is at most 1, no match outside
the first ``n`` can score above the ``n``-th bm25; when the page's last hit scores above that
bound the page is final. Otherwise (old notes, whose decay pulls every score down) SQLite ranks
every match by bm25 × decay in one statement with a LIMIT, as it always could.
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

from contextgraph.errors import InvalidArgument, NotFound
from contextgraph.graph.decay import weight_sql
from contextgraph.graph.ftsquery import Term, build_match, query_terms
from contextgraph.graph.read import check_relative
from contextgraph.graph.searchterms import body_start, camel_parts, display_title
from contextgraph.limits import MAX_QUERY_CHARS, SEARCH_LIMIT, SEARCH_PAGE
from contextgraph.settings import Settings
from contextgraph.store import db
from contextgraph.store.fulltext import full_text
from contextgraph.store.identity import file_uri
from contextgraph.store.models import File, Source, table_of

T_FILES = table_of(File)
T_SOURCES = table_of(Source)
_F = T_FILES.alias("f")  # aliased once: a fresh alias per call costs more than the query
_S = T_SOURCES.alias("s")
# bm25 weights of the index columns: title, text, search_meta, search_parts.
COLUMN_WEIGHTS = (4.0, 1.0, 4.0, 1.0)
SNIPPET_CHARS = 200
_SNIPPET_SCAN = 20_000  # characters of a body searched for the snippet's matches
MIN_CANDIDATES = 64


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
        raise NotFound(f"no source named {source if source.isprintable() else repr(source)}")


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
    """The ``top`` best matches of an FTS5 expression by bm25 × decay, and the match count."""
    f, s = _F, _S
    fts = full_text(conn, match, f, COLUMN_WEIGHTS)
    conditions: list[ColumnElement[bool]] = [fts.match]
    if source is not None:
        conditions.append(s.c.name == source)
    if kind is not None:
        conditions.append(f.c.kind == kind)
    if folder is not None and folder.strip("/ "):
        prefix = check_relative(folder.strip("/ "))
        conditions.append(f.c.path.like(db.escape_like(prefix) + "/%", escape="\\"))
    joined = fts.joined.join(s, s.c.id == f.c.source_id)
    total = int(
        conn.execute(select(func.count()).select_from(joined).where(*conditions)).scalar_one()
    )
    if total == 0 or top <= 0:
        return [], total
    bm25 = fts.rank
    decay = weight_sql(f, now, settings)
    n = max(MIN_CANDIDATES, 2 * top)
    columns = (
        f.c.id,
        s.c.name,
        f.c.path,
        f.c.kind,
        f.c.title,
        bm25.label("bm25"),
        decay.label("decay"),
    )
    for stage in (1, 2):
        query = select(*columns).select_from(joined).where(*conditions)
        if stage == 1:  # the best n by bm25 alone (lower is better: FTS5's bm25 is negative)
            query = query.order_by(bm25).limit(n)
        else:  # stage 1 could not prove its page final: let SQLite rank every match at once
            query = query.order_by((-bm25 * decay).desc(), f.c.path, s.c.name).limit(top)
        rows = conn.execute(query).all()
        scored = sorted(
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
        if stage == 2 or len(rows) < n or len(scored) < top:
            break
        bound = -float(rows[-1].bm25)  # no unseen match scores above this
        if scored[top - 1].score > bound:
            break
    return scored[:top], total


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
    if not ids:
        return {}
    head = func.substr(T_FILES.c.text, 1, _SNIPPET_SCAN).label("head")
    rows = conn.execute(select(T_FILES.c.id, head).where(T_FILES.c.id.in_(ids)))
    return {int(r.id): r.head or "" for r in rows}


class Highlighter:
    """Cut a snippet around the query's words and mark them with ``**``.

    FTS5's own ``snippet()`` cannot skip a note's frontmatter and marks with brackets, which
    collide with WikiLinks; this reads the start of the stored text instead. The index stems
    words (Porter), so a query word marks every word that starts like it (``validate`` marks
    ``validation``), and both spellings of identifiers (``token`` marks ``TokenValidator``).
    Matches are found with ``str.find`` per stem (C speed), not a regex alternation.
    """

    MAX_PER_STEM = 64

    def __init__(self, terms: list[Term]) -> None:
        stems: set[str] = set()
        for term in terms:
            for spelling in term.spellings + term.parts:
                for token in spelling.split():
                    for part in camel_parts(token):
                        stems.add(_stem(part))
        self.stems = tuple(sorted((s for s in stems if s), key=len, reverse=True))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the query's words start a word of ``text`` (or a CamelCase part), in order."""
        lowered = text.lower()
        if len(lowered) != len(text):  # a few characters lower-case to two: keep offsets true
            lowered = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
        found: dict[int, int] = {}
        for stem in self.stems:
            pos = lowered.find(stem)
            count = 0
            while pos >= 0 and count < self.MAX_PER_STEM:
                if _starts_word(text, pos) and pos not in found:
                    end = pos + len(stem)
                    while end < len(text) and (text[end].islower() or text[end].isdigit()):
                        end += 1
                    found[pos] = end
                    count += 1
                pos = lowered.find(stem, pos + 1)
        spans: list[tuple[int, int]] = []
        for start in sorted(found):
            if spans and start < spans[-1][1]:
                continue
            spans.append((start, found[start]))
        return spans

    def count(self, text: str) -> int:
        """How many of the query's words ``text`` holds (each word start counted once)."""
        return len(self.spans(text)) if self.stems else 0

    def snippet(self, text: str, *, note: bool) -> str:
        """About ``SNIPPET_CHARS`` characters of ``text`` around its first dense run of matches."""
        start = body_start(text) if note else 0
        body = text[start:]
        spans = self.spans(body) if self.stems else []
        if not spans:
            return _tidy(body[: SNIPPET_CHARS * 2], SNIPPET_CHARS)[0]
        # The window (starting at a match) that holds the most matches.
        best, best_count, j = 0, 0, 0
        for i, (s, _) in enumerate(spans):
            while j < len(spans) and spans[j][1] <= s + SNIPPET_CHARS:
                j += 1
            if j - i > best_count:
                best, best_count = i, j - i
        first = spans[best][0]
        lead = body.rfind("\n", max(0, first - 40), first)
        begin = lead + 1 if lead >= 0 else max(0, first - 40)
        while begin > 0 and begin < first and not body[begin - 1].isspace():
            begin += 1
        end = begin + SNIPPET_CHARS
        while end < len(body) and end < begin + SNIPPET_CHARS + 30 and not body[end].isspace():
            end += 1
        out: list[str] = ["…" if begin > 0 else ""]
        pos = begin
        for s, e in spans:
            if s < begin or e > end:
                continue
            out.append(body[pos:s])
            out.append("**" + body[s:e] + "**")
            pos = e
        out.append(body[pos:end])
        text_out = " ".join("".join(out).split())
        return text_out + ("…" if end < len(body) else "")


def _starts_word(text: str, pos: int) -> bool:
    """A word starts at ``pos``: after a non-alphanumeric, an underscore or a case change."""
    if pos == 0:
        return True
    before = text[pos - 1]
    if not before.isalnum():
        return True
    return before.islower() and text[pos].isupper()


def _stem(word: str) -> str:
    """A prefix the word's inflections share: ``tokens`` → ``toke``, ``validate`` → ``valid``."""
    word = word.lower()
    if len(word) <= 4:
        return word
    return word[: max(4, len(word) - 3)]


def _tidy(text: str, limit: int) -> tuple[str, bool]:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat, False
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit] + "…", True


__all__ = [
    "COLUMN_WEIGHTS",
    "Candidate",
    "Highlighter",
    "SearchHit",
    "SearchResult",
    "check_query",
    "ranked_matches",
    "search",
]
