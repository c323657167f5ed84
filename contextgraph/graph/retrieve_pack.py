"""The pack of a retrieval (SPEC §13): items with reasons and excerpts, within a token budget.

Tokens are estimated as characters / 4. Excerpts are added in rank order until one would pass
``budget_tokens``; from there on the pack adds none (the first item always keeps one, cut to fit)
and says it truncated. For code an excerpt is the symbols whose names or bodies hold the query's
words (signature plus docstring or first lines); for notes the paragraphs that hold them or link
a seed's concepts.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from contextgraph.graph.ftsquery import Term
from contextgraph.graph.search import Highlighter
from contextgraph.graph.searchterms import body_start
from contextgraph.store.identity import file_uri
from contextgraph.store.models import T_FILES
from contextgraph.store.sqlcore import ByIds

CHARS_PER_TOKEN = 4
_SCAN_CHARS = 50_000  # of a file's text, read for the matched words of its "why"
MAX_SYMBOL_EXCERPTS = 3
MAX_EXCERPT_LINES = 12
MAX_PARAGRAPHS = 2


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # where the code parsers end a line


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
class Scored:
    """A file on its way into the pack."""

    file_id: int
    source: str
    path: str
    kind: str
    lexical: float = 0.0
    graph: float = 0.0
    reasons: dict[str, float] = field(default_factory=dict)  # graph reason -> contribution
    score: float = 0.0


def pack(
    conn: Connection,
    query: str,
    terms: list[Term],
    ranked: list[Scored],
    k: int,
    budget_tokens: int,
) -> Retrieval:
    rows = {
        int(fid): (text, facts)
        for fid, text, facts in _TEXTS.rows(conn, [s.file_id for s in ranked])
    }
    highlighter = Highlighter(terms)
    # A "why" names the matched words among the query's first MAX_STEMS: a question of 1,000
    # words looked for each in 50 kB of each item (about 0.4 s of a retrieval of 50).
    named = terms[: Highlighter.MAX_STEMS]
    stems = [Highlighter([t]).stems for t in named]
    items: list[RetrievedItem] = []
    used = 0
    truncated = False
    for rank, s in enumerate(ranked, start=1):
        text, facts = rows.get(s.file_id, (None, None))
        text = text or ""
        why = []
        if s.lexical > 0:
            head = (s.path + "\n" + text[:_SCAN_CHARS]).lower()
            matched = [t.text for t, st in zip(named, stems, strict=True) if _holds(head, st)]
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


_TEXTS = ByIds(  # (id, text, facts): what the pack's excerpts are cut from
    select(T_FILES.c.id, T_FILES.c.text, T_FILES.c.facts), T_FILES.c.id
)


def _holds(lowered: str, stems: tuple[str, ...]) -> bool:
    return any(stem in lowered for stem in stems)


def _tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _code_excerpt(text: str, facts: str | None, highlighter: Highlighter) -> str:
    """The most relevant symbols of a code file: signature plus docstring or first lines.

    A symbol's relevance is how often the query's words occur in its name (thrice) and its body
    (at most ten); the matches of the whole file are found once and counted per symbol's lines.
    """
    lines, starts = _source_lines(text)
    symbols = _symbol_lines(facts)
    if not symbols:
        return "\n".join(lines[:MAX_EXCERPT_LINES])
    per_line = [0] * (len(lines) + 1)
    for begin, _ in highlighter.spans(text):
        per_line[bisect.bisect_right(starts, begin) - 1] += 1
    cumulative = [0, *itertools.accumulate(per_line)]
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
    heads: list[str] = []
    shown = 0  # the last line the heads so far show
    for _, line, _ in sorted(chosen, key=lambda t: t[1]):
        if line <= shown:  # a class's head showed this method already: not twice
            continue
        head = _symbol_head(lines, line)
        heads.append(head)
        shown = line + head.count("\n")
    return "\n...\n".join(heads)


def _source_lines(text: str) -> tuple[list[str], list[int]]:
    """``text``'s lines as the parsers number them, and where each starts.

    Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` only: ``str.splitlines`` also breaks at form
    feeds, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, which a Python file may hold
    between its definitions, and every symbol's line number after one would point too early.
    """
    lines = _LINE_BREAK.split(text)
    starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]
    if len(lines) > 1 and not lines[-1]:  # the break that ends the last line starts none
        lines.pop()
        starts.pop()
    return lines, starts


def _symbol_lines(facts: str | None) -> list[tuple[str, int]]:
    """(qualified name, first line) of each symbol in a file's cached facts.

    Reads just the ``symbols`` list of :meth:`FileFacts.to_json` (``[qualname, kind, line,
    bases, refs]``) instead of rebuilding every fact: the pack needs only these two.
    """
    if not facts:
        return []
    from contextgraph.code.model import FACTS_VERSION

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


__all__ = ["CHARS_PER_TOKEN", "Retrieval", "RetrievedItem", "Scored", "pack"]
