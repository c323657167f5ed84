"""Extract WikiLink concepts, title and creation date from a markdown note (SPEC §2).

Pure functions: no I/O, no database. The pieces live in three small modules:
:mod:`contextgraph.notes.links` (link syntax, targets, normalisation and the regex fast path),
:mod:`contextgraph.notes.frontmatter` (YAML frontmatter) and :mod:`contextgraph.notes.markdown`
(links as markdown-it-py reads the note). This module chooses between the two ways of finding links:

1. Fast path: when the body provably holds no code and no HTML that could hold a link
   (:func:`~contextgraph.notes.links.fast_path_ok`), one regular expression scans it.
2. Otherwise markdown-it-py parses the note
   (:func:`~contextgraph.notes.markdown.find_links_markdown`).

Both give the same links wherever the fast path applies (differential tests, and over the real
vaults).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from contextgraph.notes.frontmatter import (
    MAX_FRONTMATTER_CHARS,
    Frontmatter,
    body_offset,
    parse_frontmatter,
    read_frontmatter,
)
from contextgraph.notes.links import (
    ATTACHMENT_EXTENSIONS,
    MAX_CONCEPT_LENGTH,
    Link,
    count_concepts_fast,
    fast_path_ok,
    find_links_fast,
    is_attachment,
    is_valid_concept,
    normalize,
)
from contextgraph.notes.markdown import find_links_markdown

log = logging.getLogger(__name__)

__all__ = [
    "ATTACHMENT_EXTENSIONS",
    "MAX_CONCEPT_LENGTH",
    "MAX_FRONTMATTER_CHARS",
    "Frontmatter",
    "Link",
    "NoteFacts",
    "extract_note",
    "find_links",
    "is_valid_concept",
    "normalize",
    "parse_frontmatter",
]


def find_links(text: str) -> list[Link]:
    """Return all links outside frontmatter, code and HTML, with offsets into ``text``."""
    return _find_links_from(text, body_offset(text))


def _find_links_from(text: str, start: int) -> list[Link]:
    """Find links in ``text[start:]`` (the body), by the fast path when it is exact."""
    if text.find("[[", start) < 0:
        return []
    if fast_path_ok(text, start):
        return find_links_fast(text, start)
    try:
        return find_links_markdown(text, start)
    except Exception as exc:  # markdown-it-py 4.3.0 raises IndexError on e.g. "> - <pre>\n>"
        # Rather every link than no note at all.
        log.info(
            "markdown-it failed on a note (%s: %s); scanning it as plain text",
            type(exc).__name__,
            exc,
        )
        return find_links_fast(text, start)


@dataclass(frozen=True)
class NoteFacts:
    """Everything extracted from one note."""

    concepts: dict[str, int]
    title: str | None
    created: datetime | None
    dropped: int
    warnings: tuple[str, ...]
    body_start: int


def extract_note(text: str) -> NoteFacts:
    """Extract concepts with mention counts, title, created date and warnings from a note."""
    title, created, body_start, warnings = read_frontmatter(text)
    start = body_start or (1 if text.startswith("\ufeff") else 0)
    if text.find("[[", start) >= 0 and fast_path_ok(text, start):
        concepts, dropped = count_concepts_fast(text, start)
        return NoteFacts(concepts, title, created, dropped, tuple(warnings), body_start)
    concepts = {}
    dropped = 0
    for link in _find_links_from(text, start):
        if link.concept:
            concepts[link.concept] = concepts.get(link.concept, 0) + 1
        elif not is_attachment(link.target):
            dropped += 1
    return NoteFacts(concepts, title, created, dropped, tuple(warnings), body_start)
