"""Retrieval (SPEC §13): a question in, the files and notes it needs out, ranked, with reasons.

Two stages, fused into one score per file:

1. **Lexical.** §9 search over notes and code (any words, code-aware, bm25 × decay) gives the
   best ``retrieve_candidates`` matches; each has a lexical relevance ``L`` = its score over the
   best score (so the top match has 1).
2. **Graph.** The best ``retrieve_seeds`` matches are seeds, each as strong as its ``L``. A code
   seed reaches the files it imports and is imported by, and those its symbols reference, inherit
   or are referenced by (symbols stand for their files; a file's own ``defines`` edges never
   make separate items). A note seed reaches the notes that link the same concepts. Each edge
   passes on ``strength × edge weight × specificity``: an import or inheritance weighs
   ``retrieve_import_weight``, references alone ``retrieve_reference_weight``, a shared concept
   ``retrieve_concept_weight`` scaled by its rarity. *Specificity* down-weights hubs: a file
   imported by a large share of the source's files, or a concept linked by a large share of its
   notes, passes on ``1 − log(1 + d) / log(1 + N)`` (d: its in-degree or note count, N: files
   or notes of the source), so a logger everything imports reaches nobody in particular.
   Proximity ``G`` sums what a file receives from every seed, over the best ``G`` of the query.

``score = L + retrieve_graph_weight × G``. The weights are settings; the defaults were chosen
with ``scripts/bench_retrieval.py`` over the development case sets (see the README's table).

The pack: items carry ``why`` (matched words, graph paths) and an excerpt — for code the symbols
whose names or bodies hold the query's words (signature plus docstring or first lines), for notes
the paragraphs that hold them or link a seed's concepts. Tokens are estimated as characters / 4;
excerpts stop at ``budget_tokens`` (the first item always keeps one, cut to fit), and
``truncated`` says whether any was cut or left out. Retrieval never writes.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, select

from contextgraph.errors import InvalidArgument, NotFound
from contextgraph.ftsquery import Term, build_match, query_terms
from contextgraph.limits import MAX_QUERY_CHARS, RETRIEVE_BUDGET_TOKENS, RETRIEVE_K
from contextgraph.models import Entity, File, Mention, Relation, Source, table_of
from contextgraph.search import Candidate, Highlighter, ranked_matches
from contextgraph.searchterms import body_start
from contextgraph.settings import Settings
from contextgraph.sqlcore import chunked
from contextgraph.stopwords import STOPWORDS
from contextgraph.uris import file_uri

T_FILES = table_of(File)
T_SOURCES = table_of(Source)
T_ENTITIES = table_of(Entity)
T_REL = table_of(Relation)
T_MENTIONS = table_of(Mention)
# Aliases built once: building one per call costs SQLAlchemy more than the query costs SQLite.
_SRC = T_ENTITIES.alias("src")
_DST = T_ENTITIES.alias("dst")

CHARS_PER_TOKEN = 4
_SCAN_CHARS = 50_000  # of a file's text, read for the matched words of its "why"
MAX_SYMBOL_EXCERPTS = 3
MAX_EXCERPT_LINES = 12
MAX_PARAGRAPHS = 2
_GRAPH_TYPES = ("imports", "inherits", "references")


@dataclass(frozen=True)
class RetrievedItem:
    rank: int
    uri: str
    path: str
    source: str
    kind: str  # note | code
    score: float
    why: tuple[str, ...]
    excerpt: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "uri": self.uri,
            "path": self.path,
            "source": self.source,
            "kind": self.kind,
            "score": self.score,
            "why": list(self.why),
            "excerpt": self.excerpt,
        }


@dataclass(frozen=True)
class Retrieval:
    query: str
    k: int
    budget_tokens: int
    tokens: int
    truncated: bool
    items: tuple[RetrievedItem, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "k": self.k,
            "budgetTokens": self.budget_tokens,
            "tokens": self.tokens,
            "truncated": self.truncated,
            "items": [i.as_dict() for i in self.items],
        }


@dataclass
class _Scored:
    """A file on its way into the pack."""

    file_id: int
    source: str
    path: str
    kind: str
    lexical: float = 0.0
    graph: float = 0.0
    reasons: dict[str, float] = field(default_factory=dict)  # graph reason -> contribution
    score: float = 0.0


def retrieve(
    conn: Connection,
    query: str,
    *,
    settings: Settings,
    now: float,
    k: int = 10,
    budget_tokens: int = 6000,
    source: str | None = None,
) -> Retrieval:
    """Rank the files and notes ``query`` needs and pack their excerpts into ``budget_tokens``."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("give a question or some words to retrieve for")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(
            f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS} are read"
        )
    RETRIEVE_K.check(k)
    RETRIEVE_BUDGET_TOKENS.check(budget_tokens)
    if source is not None and not _source_exists(conn, source):
        raise NotFound(f"no source named {source if source.isprintable() else repr(source)}")
    terms = [t for t in query_terms(query) if t.phrase or t.text.lower() not in STOPWORDS]
    ranked = rank_files(conn, query, settings=settings, now=now, k=k, source=source)
    return _pack(conn, query, terms, ranked, k, budget_tokens)


def rank_files(
    conn: Connection,
    query: str,
    *,
    settings: Settings,
    now: float,
    k: int,
    source: str | None = None,
) -> list[_Scored]:
    """The ``k`` best files for ``query`` by fused lexical and graph score (no excerpts)."""
    terms = [t for t in query_terms(query) if t.phrase or t.text.lower() not in STOPWORDS]
    match = build_match(query)
    if not terms or match is None:
        return []  # only stopwords or punctuation: nothing to look for
    found, _ = ranked_matches(
        conn,
        match,
        settings=settings,
        now=now,
        top=settings.retrieve_candidates,
        source=source,
    )
    if not found:
        return []
    scored = _lexical(found)
    seeds = sorted(scored.values(), key=lambda s: -s.lexical)[: settings.retrieve_seeds]
    _code_neighbours(conn, seeds, scored, settings)
    _note_neighbours(conn, seeds, scored, settings)
    best_graph = max((s.graph for s in scored.values()), default=0.0)
    prior = _size_prior(conn, list(scored)) if settings.retrieve_prior_weight else {}
    for s in scored.values():
        proximity = s.graph / best_graph if best_graph > 0 else 0.0
        s.score = (
            s.lexical
            + settings.retrieve_graph_weight * proximity
            + settings.retrieve_prior_weight * prior.get(s.file_id, 0.0)
        )
    return sorted(scored.values(), key=lambda s: (-s.score, s.path, s.source))[:k]


def _size_prior(conn: Connection, ids: list[int]) -> dict[int, float]:
    """log(size) over log(the largest candidate's size): big files change and matter more."""
    sizes: dict[int, int] = {}
    for chunk in chunked(ids):
        sizes.update(
            {
                int(i): int(n)
                for i, n in conn.execute(
                    select(T_FILES.c.id, T_FILES.c.size).where(T_FILES.c.id.in_(chunk))
                )
            }
        )
    top = math.log1p(max(sizes.values(), default=1))
    return {i: math.log1p(n) / top for i, n in sizes.items()} if top > 0 else {}


def _source_exists(conn: Connection, name: str) -> bool:
    return conn.execute(select(T_SOURCES.c.id).where(T_SOURCES.c.name == name)).first() is not None


def _lexical(found: list[Candidate]) -> dict[int, _Scored]:
    top = found[0].score or 1.0
    return {
        c.file_id: _Scored(c.file_id, c.source, c.path, c.kind, lexical=c.score / top)
        for c in found
    }


def _specificity(degree: int, population: int, damping: float) -> float:
    """1 for what nothing else points at, falling to 0 for what everything points at."""
    if population <= 1 or damping == 0:
        return 1.0
    return float(max(0.0, 1.0 - degree / population) ** damping)


def _code_neighbours(
    conn: Connection, seeds: list[_Scored], scored: dict[int, _Scored], settings: Settings
) -> None:
    """Spread each code seed's strength to the files it is related to, hubs damped."""
    strength = {s.file_id: s.lexical for s in seeds if s.kind == "code"}
    if not strength:
        return
    src, dst = _SRC, _DST
    r = T_REL
    base = (
        select(src.c.file_id.label("a"), dst.c.file_id.label("b"), r.c.type)
        .select_from(r.join(src, src.c.id == r.c.src_id).join(dst, dst.c.id == r.c.dst_id))
        .where(r.c.type.in_(_GRAPH_TYPES), src.c.file_id != dst.c.file_id)
    )
    ids = list(strength)
    rows = conn.execute(
        base.where(src.c.file_id.in_(ids)).union(base.where(dst.c.file_id.in_(ids)))
    ).all()
    # file pair (seed, other) -> the edge types between them, with their direction.
    links: dict[tuple[int, int], set[str]] = defaultdict(set)
    for a, b, rtype in rows:
        if a in strength:
            links[(a, b)].add("out:" + rtype)
        if b in strength:
            links[(b, a)].add("in:" + rtype)
    others = {other for _, other in links}
    if not others:
        return
    degree, population, info = _file_degrees(conn, others)
    for (seed, other), types in links.items():
        weight = (
            settings.retrieve_import_weight
            if types & {"out:imports", "in:imports", "out:inherits", "in:inherits"}
            else settings.retrieve_reference_weight
        )
        contribution = (
            strength[seed]
            * weight
            * _specificity(degree.get(other, 0), population, settings.retrieve_hub_damping)
        )
        if contribution <= 0 or other not in info:
            continue
        target = scored.get(other)
        if target is None:
            source_name, path, kind = info[other]
            target = scored[other] = _Scored(other, source_name, path, kind)
        target.graph += contribution
        seed_path = scored[seed].path
        verb = _verb(types)
        target.reasons[f"{verb} {seed_path}"] = (
            target.reasons.get(f"{verb} {seed_path}", 0.0) + contribution
        )


def _verb(types: set[str]) -> str:
    """How a file is related to a seed, as the seed would say it of the file."""
    if "in:imports" in types:
        return "imports"
    if "out:imports" in types:
        return "imported by"
    if "in:inherits" in types:
        return "subclasses code in"
    if "out:inherits" in types:
        return "base class of code in"
    if "in:references" in types:
        return "uses"
    return "used by"


def _file_info(conn: Connection, file_ids: Iterable[int]) -> dict[int, tuple[str, str, str]]:
    """(source name, path, kind) of each file."""
    f, src = T_FILES, T_SOURCES
    info: dict[int, tuple[str, str, str]] = {}
    for chunk in chunked(list(file_ids)):
        for row in conn.execute(
            select(f.c.id, src.c.name, f.c.path, f.c.kind)
            .join(src, src.c.id == f.c.source_id)
            .where(f.c.id.in_(chunk))
        ):
            info[int(row.id)] = (row.name, row.path, row.kind)
    return info


def _file_degrees(
    conn: Connection, file_ids: Iterable[int]
) -> tuple[dict[int, int], int, dict[int, tuple[str, str, str]]]:
    """How many files import each of ``file_ids``, the code files of their sources, and names."""
    ids = list(file_ids)
    info: dict[int, tuple[str, str, str]] = {}
    sources: set[int] = set()
    f, s = T_FILES, T_SOURCES
    for chunk in chunked(ids):
        for row in conn.execute(
            select(f.c.id, f.c.source_id, s.c.name, f.c.path, f.c.kind)
            .join(s, s.c.id == f.c.source_id)
            .where(f.c.id.in_(chunk))
        ):
            info[int(row.id)] = (row.name, row.path, row.kind)
            sources.add(int(row.source_id))
    population = int(
        conn.execute(
            select(func.count())
            .select_from(f)
            .where(f.c.kind == "code", f.c.source_id.in_(sources))
        ).scalar_one()
    )
    src, dst = _SRC, _DST
    degree: dict[int, int] = {}
    for chunk in chunked(ids):
        rows = conn.execute(
            select(dst.c.file_id, func.count(func.distinct(src.c.file_id)))
            .select_from(
                T_REL.join(src, src.c.id == T_REL.c.src_id).join(dst, dst.c.id == T_REL.c.dst_id)
            )
            .where(
                T_REL.c.type == "imports",
                dst.c.kind == "file",
                dst.c.file_id.in_(chunk),
            )
            .group_by(dst.c.file_id)
        )
        degree.update({int(fid): int(n) for fid, n in rows})
    return degree, population, info


def _note_neighbours(
    conn: Connection, seeds: list[_Scored], scored: dict[int, _Scored], settings: Settings
) -> None:
    """Spread each note seed's strength to the notes linking the same concepts, by rarity.

    A concept linked by more than ``retrieve_concept_fanout`` notes is a hub: it is not followed
    (its share of the notes would damp it to little anyway, and fanning out through it would
    read a large part of the vault for one question).
    """
    strength = {s.file_id: s.lexical for s in seeds if s.kind == "note"}
    if not strength:
        return
    m, e, f = T_MENTIONS, T_ENTITIES, T_FILES
    linked = conn.execute(
        select(m.c.file_id, m.c.concept_id, e.c.name)
        .join(e, e.c.id == m.c.concept_id)
        .where(m.c.file_id.in_(list(strength)))
    ).all()
    if not linked:
        return
    df: dict[int, int] = {}
    for chunk in chunked(list({int(r.concept_id) for r in linked})):
        df.update(
            {
                int(c): int(n)
                for c, n in conn.execute(
                    select(m.c.concept_id, func.count())
                    .where(m.c.concept_id.in_(chunk))
                    .group_by(m.c.concept_id)
                )
            }
        )
    followed = {c for c, n in df.items() if 1 < n <= settings.retrieve_concept_fanout}
    if not followed:
        return
    population = int(
        conn.execute(select(func.count()).select_from(f).where(f.c.kind == "note")).scalar_one()
    )
    notes_of: dict[int, list[int]] = defaultdict(list)
    for chunk in chunked(sorted(followed)):
        for note, concept in conn.execute(
            select(m.c.file_id, m.c.concept_id).where(m.c.concept_id.in_(chunk))
        ):
            notes_of[int(concept)].append(int(note))
    info = _file_info(conn, {n for notes in notes_of.values() for n in notes})
    for row in linked:
        seed, concept = int(row.file_id), int(row.concept_id)
        if concept not in followed:
            continue
        contribution = (
            strength[seed]
            * settings.retrieve_concept_weight
            * _specificity(df[concept], population, settings.retrieve_hub_damping)
        )
        if contribution <= 0:
            continue
        reason = f"links [[{row.name}]] like seed note {scored[seed].path}"
        for note in notes_of[concept]:
            if note == seed or note not in info:
                continue
            target = scored.get(note)
            if target is None:
                source_name, path, kind = info[note]
                target = scored[note] = _Scored(note, source_name, path, kind)
            target.graph += contribution
            target.reasons[reason] = target.reasons.get(reason, 0.0) + contribution


# -- the pack -------------------------------------------------------------------------------


def _pack(
    conn: Connection,
    query: str,
    terms: list[Term],
    ranked: list[_Scored],
    k: int,
    budget_tokens: int,
) -> Retrieval:
    rows = {
        int(r.id): r
        for r in conn.execute(
            select(T_FILES.c.id, T_FILES.c.text, T_FILES.c.facts).where(
                T_FILES.c.id.in_([s.file_id for s in ranked])
            )
        )
    }
    highlighter = Highlighter(terms)
    stems = [Highlighter([t]).stems for t in terms]
    items: list[RetrievedItem] = []
    used = 0
    truncated = False
    for rank, s in enumerate(ranked, start=1):
        row = rows.get(s.file_id)
        text = (row.text if row is not None else None) or ""
        facts = row.facts if row is not None else None
        why = []
        if s.lexical > 0:
            head = (s.path + "\n" + text[:_SCAN_CHARS]).lower()
            matched = [t.text for t, st in zip(terms, stems, strict=True) if _holds(head, st)]
            if matched:
                why.append(f"matches {', '.join(matched)}")
        why.extend(r for r, _ in sorted(s.reasons.items(), key=lambda kv: -kv[1])[:3])
        excerpt = ""
        if not truncated:  # the pack stops adding excerpts once one does not fit
            excerpt = (
                _code_excerpt(text, facts, highlighter)
                if s.kind == "code"
                else _note_excerpt(text, highlighter, s.reasons)
            )
            if used + _tokens(excerpt) > budget_tokens:
                truncated = True
                excerpt = excerpt[: budget_tokens * CHARS_PER_TOKEN] if not items else ""
        used += _tokens(excerpt)
        items.append(
            RetrievedItem(
                rank=rank,
                uri=file_uri(s.source, s.path),
                path=s.path,
                source=s.source,
                kind="note" if s.kind == "note" else "code",
                score=s.score,
                why=tuple(why),
                excerpt=excerpt,
            )
        )
    return Retrieval(query, k, budget_tokens, used, truncated, tuple(items))


def _holds(lowered: str, stems: tuple[str, ...]) -> bool:
    return any(stem in lowered for stem in stems)


def _tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _code_excerpt(text: str, facts: str | None, highlighter: Highlighter) -> str:
    """The most relevant symbols of a code file: signature plus docstring or first lines.

    A symbol's relevance is how often the query's words occur in its name (thrice) and its body
    (at most ten); the matches of the whole file are found once and counted per symbol's lines.
    """
    lines = text.splitlines()
    symbols = _symbol_lines(facts)
    if not symbols:
        return "\n".join(lines[:MAX_EXCERPT_LINES])
    offsets = [0]
    for raw in lines:
        offsets.append(offsets[-1] + len(raw) + 1)  # splitlines dropped one separator
    starts = [offsets[s] for s in range(len(lines))]
    per_line = [0] * (len(lines) + 1)
    for begin, _ in highlighter.spans(text):
        per_line[bisect.bisect_right(starts, begin) - 1] += 1
    cumulative = [0]
    for n in per_line:
        cumulative.append(cumulative[-1] + n)
    symbol_starts = sorted({line for _, line in symbols})
    scored: list[tuple[int, int, str]] = []
    for qualname, line in symbols:
        end = (
            symbol_starts[bisect.bisect_right(symbol_starts, line)]
            if line < symbol_starts[-1]
            else len(lines) + 1
        )
        body_hits = cumulative[min(end, len(lines) + 1) - 1] - cumulative[line - 1]
        lowered = qualname.lower()
        name_hits = sum(1 for stem in highlighter.stems if stem in lowered)
        if name_hits or body_hits:
            scored.append((-(3 * name_hits + min(body_hits, 10)), line, qualname))
    if not scored:
        return "\n".join(lines[:MAX_EXCERPT_LINES])
    chosen = sorted(scored)[:MAX_SYMBOL_EXCERPTS]
    return "\n...\n".join(
        _symbol_head(lines, line) for _, line, _ in sorted(chosen, key=lambda t: t[1])
    )


def _symbol_lines(facts: str | None) -> list[tuple[str, int]]:
    """(qualified name, first line) of each symbol in a file's cached facts.

    Reads just the ``symbols`` list of :meth:`FileFacts.to_json` (``[qualname, kind, line,
    bases, refs]``) instead of rebuilding every fact: the pack needs only these two.
    """
    if not facts:
        return []
    from contextgraph.codegraph.model import FACTS_VERSION

    try:
        data = json.loads(facts)
        if not isinstance(data, dict) or data.get("v") != FACTS_VERSION:
            return []
        return [
            (str(entry[0]), int(entry[2]))
            for entry in data.get("symbols", ())
            if isinstance(entry, list) and len(entry) >= 3 and int(entry[2]) > 0
        ]
    except (ValueError, TypeError):
        return []


def _symbol_head(lines: list[str], line: int) -> str:
    """A symbol's signature and docstring (or first lines), at most ``MAX_EXCERPT_LINES``."""
    out: list[str] = []
    indent: int | None = None
    for raw in lines[line - 1 : line - 1 + MAX_EXCERPT_LINES]:
        stripped = raw.strip()
        current = len(raw) - len(raw.lstrip())
        if out and indent is not None and stripped and current <= indent and not _continues(out):
            break
        if indent is None:
            indent = current
        out.append(raw)
    return "\n".join(out).rstrip()


def _continues(out: list[str]) -> bool:
    """Whether the signature is still open (a multi-line ``def f(`` …)."""
    text = "\n".join(out)
    return text.count("(") > text.count(")") or text.count("[") > text.count("]")


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def _note_excerpt(text: str, highlighter: Highlighter, reasons: dict[str, float]) -> str:
    """The paragraphs of a note that hold the query's words or link a seed's concepts."""
    body = text[body_start(text) : body_start(text) + _SCAN_CHARS]
    bounds: list[tuple[int, int]] = []
    pos = 0
    for brk in _PARAGRAPH_BREAK.finditer(body):
        if body[pos : brk.start()].strip():
            bounds.append((pos, brk.start()))
        pos = brk.end()
    if body[pos:].strip():
        bounds.append((pos, len(body)))
    if not bounds:
        return ""
    hits = [0] * len(bounds)
    starts = [b for b, _ in bounds]
    for begin, _ in highlighter.spans(body):
        hits[max(0, bisect.bisect_right(starts, begin) - 1)] += 1
    linked = {m.group(1) for r in reasons for m in re.finditer(r"\[\[([^\]]+)\]\]", r)}
    scored: list[tuple[int, int]] = []
    for i, (begin, end) in enumerate(bounds):
        links = 0
        if linked:
            squashed = "-".join(body[begin:end].lower().split())
            links = sum(1 for c in linked if c in squashed)
        if hits[i] or links:
            scored.append((-(hits[i] + 2 * links), i))
    chosen = sorted(i for _, i in sorted(scored)[:MAX_PARAGRAPHS]) or [0]
    return "\n\n".join(body[bounds[i][0] : bounds[i][1]].strip()[:1200] for i in chosen)


__all__ = ["Retrieval", "RetrievedItem", "retrieve"]
