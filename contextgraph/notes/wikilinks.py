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
import threading
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
    LINK_RE,
    MAX_CONCEPT_LENGTH,
    Link,
    count_concepts_fast,
    fast_path_ok,
    find_links_fast,
    is_attachment,
    is_valid_concept,
    make_link,
    normalize,
)
from contextgraph.notes.markdown import BLANK_LINE_RE, find_links_markdown

log = logging.getLogger(__name__)

__all__ = [
    "ATTACHMENT_EXTENSIONS",
    "MAX_CONCEPT_LENGTH",
    "MAX_FRONTMATTER_CHARS",
    "Frontmatter",
    "Link",
    "LinkIndex",
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


class LinkIndex:
    """A note's links by concept, found no further into the body than a question needs.

    :meth:`first` answers where the first link to a concept starts, as :func:`find_links`
    would, reading the body up to the first blank line after the concept's first possible
    link (a ``[[…]]`` that names it): lines after a blank line cannot change how markdown-it
    reads any line before it. A link reference definition (``]:``) anywhere in the body can
    (it makes ``[label]`` a link, whose label holds no code span), so such a body is read
    whole. Each further read takes in at least twice what was read before, so all of a
    note's reads cost at most about twice one read of the whole note. A long note that a
    preview quotes for a concept it links early is read no further (the logseq docs'
    194 kB changelog needs a full markdown parse: tenths of a second). Where markdown-it
    fails on a note, each read scans it as plain text, as :func:`find_links` does.

    Shared by the threads of a process (:func:`contextgraph.notes.preview.note_of`).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.start = body_offset(text)
        self.read = self.start  # the links of text[:read] are known
        self.starts: dict[str, list[int]] = {}  # concept -> link starts in text[:read]
        self._whole = text.find("]:", self.start) >= 0
        self._lock = threading.Lock()

    def first(self, concept: str) -> int | None:
        """Where the first link to ``concept`` (normalised) starts, or None."""
        with self._lock:
            while True:
                starts = self.starts.get(concept)
                if starts:
                    return starts[0]
                beyond = self._next_named(concept, self.read)
                if beyond is None:
                    return None
                self._read_to(beyond)

    def all(self, concept: str) -> list[int]:
        """Where every link to ``concept`` starts, in text order (the whole body read)."""
        with self._lock:
            if self.read < len(self.text):
                self._read_to(len(self.text))
            return list(self.starts.get(concept, ()))

    def _next_named(self, concept: str, pos: int) -> int | None:
        """The end of the first ``[[…]]`` from ``pos`` on that names ``concept``."""
        text = self.text
        for m in LINK_RE.finditer(text, max(pos, self.start)):
            if make_link(text, m.start(), m.end(), False).concept == concept:
                return m.end()
        return None

    def _read_to(self, end: int) -> None:
        """Find the links up to the first blank line after ``end`` and at least twice as far
        into the body as before (the whole body if it has a link reference)."""
        text = self.text
        cut = len(text)
        if not self._whole:
            at = max(end, self.start + 2 * (self.read - self.start))
            blank = BLANK_LINE_RE.search(text, at)
            if blank is not None:
                cut = blank.end()
        starts: dict[str, list[int]] = {}
        for link in _find_links_from(text[:cut], self.start):
            if link.concept:
                starts.setdefault(link.concept, []).append(link.start)
        self.starts, self.read = starts, cut


@dataclass(frozen=True)
class NoteFacts:
    """Everything extracted from one note."""

    concepts: dict[str, int]
    title: str | None
    created: datetime | None
    dropped: int
    warnings: tuple[str, ...]
    body_start: int


def extract_note(text: str, max_length: int = MAX_CONCEPT_LENGTH) -> NoteFacts:
    """Extract concepts with mention counts, title, created date and warnings from a note.

    ``max_length``: concept names longer than this are dropped (and counted so), as every name
    over :data:`MAX_CONCEPT_LENGTH` is (the setting ``max_concept_length``)."""
    title, created, body_start, warnings = read_frontmatter(text)
    start = body_start or (1 if text.startswith("\ufeff") else 0)
    if text.find("[[", start) >= 0 and fast_path_ok(text, start):
        concepts, dropped = count_concepts_fast(text, start)
    else:
        concepts, dropped = {}, 0
        for link in _find_links_from(text, start):
            if link.concept:
                concepts[link.concept] = concepts.get(link.concept, 0) + 1
            elif not is_attachment(link.target):
                dropped += 1
    if max_length < MAX_CONCEPT_LENGTH:
        for name in [name for name in concepts if len(name) > max_length]:
            dropped += concepts.pop(name)
    return NoteFacts(concepts, title, created, dropped, tuple(warnings), body_start)
