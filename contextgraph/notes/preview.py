"""Sentence-aware excerpts of notes, for content previews in context results.

:func:`content_preview` picks one sentence of a note's body: the first that links the related
concept, else the first that links the query concept, else the start of the body.

Sentences are split on ``.``, ``!`` or ``?`` followed by whitespace (never inside a
``[[...]]`` link, so ``[[node.js]]`` stays whole), at blank lines, and at line breaks that start
a block element (heading, list item, block quote, fence, thematic break).  Fenced code blocks
are never part of a preview, and a link counts only where
:func:`contextgraph.notes.wikilinks.find_links` finds it (so links in code or HTML comments do not).
The excerpt keeps the markdown of the sentence (links stay ``[[...]]``) but drops leading block
markers (``#``, ``-``, ``*``, ``+``, ``>``, ``1.``) and collapses whitespace runs to one space.

The fallback "start of the body" skips headings (the title is shown elsewhere) unless the note
has nothing else, and takes whole sentences while they fit in ``limit``.  A chosen sentence
longer than ``limit`` is cut at the last word boundary (not inside a ``[[...]]`` link when
avoidable) and gets ``…``; so the result has at most ``limit + 1`` characters, and never more
than ``hard_limit``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from contextgraph.notes.wikilinks import LinkIndex, parse_frontmatter

__all__ = ["Note", "content_preview", "forget_notes", "note_of"]

_ELLIPSIS = "…"
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
# A setext underline (group 1) or a thematic break.
_RULE_RE = re.compile(r"[ \t]{0,3}(=+|-+)[ \t]*|[ \t]{0,3}([-*_])[ \t]*(?:\2[ \t]*){2,}")
# A line that starts a block element (so the line break before it ends a sentence).
_BLOCK_START_RE = re.compile(r"[ \t]*(?:(?:#{1,6}|[-*+]|\d{1,9}[.)])(?:[ \t]|$)|>)")
_HEADING_RE = re.compile(r" {0,3}(?:>[ \t]?)*#{1,6}(?:[ \t]|$)")
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})")
# A wikilink (skipped whole) or a sentence end: punctuation followed by whitespace.
_SPLIT_RE = re.compile(r"!?\[\[[^\[\]\r\n]*\]\]|[.!?]+(?=\s)")
# Block markers at the start of a line of a sentence.
_MARKERS_RE = re.compile(
    r"^[ \t]*(?:>[ \t]?)*[ \t]*(?:#{1,6}(?=[ \t]|$)|[-*+](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$))?",
    re.MULTILINE,
)
_SPACES_RE = re.compile(r"\s+")
_LINK_SPAN_RE = re.compile(r"!?\[\[[^\[\]]*\]\]")


def _blocks(text: str, start: int) -> list[tuple[int, int, bool]]:
    """Split the body into (start, end, is_heading) ranges of consecutive lines.

    Blank lines, thematic breaks, setext underlines and fenced code blocks separate blocks and
    are left out; a line that starts a block element (heading, list item, quote) starts a new
    block, except that the lines of one block quote stay together.
    """
    blocks: list[tuple[int, int, bool]] = []
    current: list[int] | None = None  # [start, end] of the open block
    heading = quote = False
    fence: str | None = None
    for m in _LINE_RE.finditer(text, start):
        line_start, line_end = m.span()
        if line_start == line_end:
            break
        line = text[line_start:line_end].rstrip("\r\n")
        if fence is not None:
            if line.strip(" \t").startswith(fence) and not line.strip(" \t").strip(fence[0]):
                fence = None
            continue
        opened = _FENCE_RE.match(line)
        rule = _RULE_RE.fullmatch(line)
        if rule and rule.group(1) and current is not None and not quote:
            heading = True  # setext underline: the open block was a heading
        starts = _BLOCK_START_RE.match(line) is not None
        continues_quote = quote and line.lstrip(" \t").startswith(">")
        if opened or rule or not line.strip() or heading or (starts and not continues_quote):
            if current is not None:
                blocks.append((current[0], current[1], heading))
            current = None
            heading = quote = False
        if opened:
            fence = opened.group(1)
            continue
        if rule or not line.strip():
            continue
        if current is None:
            current = [line_start, line_start + len(line)]
            heading = _HEADING_RE.match(line) is not None
            quote = line.lstrip(" \t").startswith(">")
        else:
            current[1] = line_start + len(line)
    if current is not None:
        blocks.append((current[0], current[1], heading))
    return blocks


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` into sentence ranges."""
    out: list[tuple[int, int]] = []
    first = start
    for m in _SPLIT_RE.finditer(text, start, end):
        if m.group().endswith("]]"):
            continue
        out.append((first, m.end()))
        first = m.end()
    if text[first:end].strip():
        out.append((first, end))
    return out


def _clean(sentence: str) -> str:
    """Drop leading block markers of each line and collapse whitespace."""
    return _SPACES_RE.sub(" ", _MARKERS_RE.sub("", sentence)).strip()


def _shorten(sentence: str, limit: int) -> str:
    """Cut ``sentence`` to at most ``limit`` characters plus an ellipsis, at a word boundary."""
    if len(sentence) <= limit:
        return sentence
    cut = sentence.rfind(" ", 0, limit + 1)
    for link in _LINK_SPAN_RE.finditer(sentence):
        if link.start() < cut < link.end():  # do not cut a link in two
            cut = sentence.rfind(" ", 0, link.start() + 1)
            break
        if link.start() > cut:
            break
    if cut < limit // 2:
        cut = limit  # no usable word boundary: cut inside the word
    return sentence[:cut].rstrip(" ,;:") + _ELLIPSIS


class Note:
    """A note's body read once: its blocks, and its links as far as they were asked for.

    Finding the links may take markdown-it's parse of the note (a long changelog: tenths of a
    second), so the links are found only as far into the body as the concepts quoted need
    (:class:`~contextgraph.notes.wikilinks.LinkIndex`), and a caller that quotes one note for
    several concepts reads it at most about twice in all.
    """

    __slots__ = ("blocks", "links", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        start = parse_frontmatter(text).body_start
        if start == 0 and text.startswith("\ufeff"):
            start = 1
        self.blocks = _blocks(text, start)
        self.links = LinkIndex(text)

    def first_link(self, concept: str) -> int | None:
        """Where the first link to ``concept`` (normalised) starts, or None."""
        return self.links.first(concept)

    def sentence_at(self, offset: int) -> str | None:
        """The sentence of the body that holds ``offset``, cleaned; None outside the blocks.

        Only the block that holds it is split into sentences (a long note has thousands)."""
        for block_start, block_end, _ in self.blocks:
            if block_start <= offset < block_end:
                for a, b in _sentences(self.text, block_start, block_end):
                    if a <= offset < b:
                        return _clean(self.text[a:b])
                return None
        return None


# Notes read lately, by content hash. A long-running process (an MCP server, a library loop)
# quotes the same notes question after question, and finding a long note's links may take a
# markdown parse each time (the logseq-docs changelog, 194 kB: 0.16-0.3 s). A hash names one
# text, so a kept note is exact; bounded by count and by characters.
_READ: OrderedDict[str, Note] = OrderedDict()
_READ_MAX_NOTES = 256
_READ_MAX_CHARS = 8_000_000
_read_chars = 0
_read_lock = threading.Lock()


def note_of(digest: str, text: str) -> Note:
    """The :class:`Note` of ``text``, whose content hash is ``digest``: the one an earlier call
    read (with the links it found) while it is among the last few hundred, else a new one."""
    global _read_chars
    with _read_lock:
        note = _READ.get(digest)
        if note is not None:
            _READ.move_to_end(digest)
            return note
    note = Note(text)
    with _read_lock:
        if digest not in _READ:
            _READ[digest] = note
            _read_chars += len(text)
            while len(_READ) > _READ_MAX_NOTES or _read_chars > _READ_MAX_CHARS:
                _, dropped = _READ.popitem(last=False)
                _read_chars -= len(dropped.text)
    return note


def forget_notes() -> None:
    """Drop the notes :func:`note_of` keeps, as a fresh process starts (for a benchmark)."""
    global _read_chars
    with _read_lock:
        _READ.clear()
        _read_chars = 0


def content_preview(
    text: str | Note, related: str, query: str, *, limit: int = 200, hard_limit: int = 240
) -> str:
    """Return a short excerpt of a note: the sentence linking ``related``, else ``query``.

    ``related`` and ``query`` are normalised concept names; ``text`` is the note's text, or a
    :class:`Note` read from it (the same excerpt, without reading the note again).  Without
    such a sentence the excerpt is the start of the body.  The result is at most ``limit``
    characters plus an ellipsis, and never longer than ``hard_limit``.
    """
    budget = min(limit, hard_limit - len(_ELLIPSIS))
    if budget < 1:
        return ""
    note = text if isinstance(text, Note) else Note(text)
    if not note.blocks:
        return ""
    chosen: str | None = None
    for wanted in (related, query):
        if not wanted or chosen is not None:
            continue
        first = note.first_link(wanted)  # the first sentence that links it holds this one
        if first is None:
            continue
        chosen = note.sentence_at(first)
        # The blocks may leave out a line a link is on (a fence that markdown-it does not
        # take for one): then the first sentence that holds one of the later links.
        for later in note.links.all(wanted)[1:] if chosen is None else ():
            chosen = note.sentence_at(later)
            if chosen is not None:
                break
    if chosen is None:
        chosen = _opening(note.text, note.blocks, budget)
    return _shorten(chosen, budget)[:hard_limit]


def _opening(text: str, blocks: list[tuple[int, int, bool]], budget: int) -> str:
    """Return the start of the body: whole sentences while they fit, headings skipped."""
    body = [b for b in blocks if not b[2]] or blocks[:1]
    opening = ""
    for block_start, block_end, _ in body:
        for a, b in _sentences(text, block_start, block_end):
            sentence = _clean(text[a:b])
            if not sentence:
                continue
            if opening and len(opening) + 1 + len(sentence) > budget:
                return opening
            opening = f"{opening} {sentence}" if opening else sentence
            if len(opening) >= budget:
                return opening
    return opening
