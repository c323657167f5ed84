"""WikiLink syntax, targets and concept names (SPEC §2), and the regex fast path.

A *concept* is the normalised target of a WikiLink ``[[target]]`` (or an embed ``![[target]]``).

Link syntax
    ``[[inner]]`` or ``![[inner]]``, not preceded by ``[`` and not followed by ``]``; ``inner``
    contains no ``[``, ``]`` or line break, so ``[[[x]]]`` is no link. Backslash escapes are not
    interpreted around the brackets (``\\[[x]]`` is a link; ``\\[\\[x\\]\\]`` is none).

Target (``inner`` -> target), in this order
    1. Cut at the first ``|`` (Obsidian: ``[[target|alias]]``). ``\\|``, as written inside
       markdown tables, counts as ``|``: the cut happens at that ``|`` and the backslash before it
       is dropped too, so ``[[a\\|b]]`` -> ``a``. The target is the part *before* the pipe, so
       Dendron's alias-first ``[[label|target]]`` links yield the *label* as concept.
    2. Cut at the first ``#`` when non-blank text follows it (``[[Note#Heading]]``,
       ``[[Note#^block]]``, Dendron ``![[note#h,1:#*]]`` -> ``Note``/``note``); ``[[C#]]`` stays
       ``C#``. ``[[#Heading]]`` (a link into the same note) thus has an empty target and is
       counted as dropped.
    3. Drop a trailing ``.md`` (case-insensitive, trailing blanks ignored).
    Targets whose extension names an attachment (:data:`ATTACHMENT_EXTENSIONS`,
    case-insensitive) are not concepts.

Normalisation (:func:`normalize`)
    Unicode NFC, strip, ``lower()``, every run of whitespace, ``_``, ``/``, ``\\`` and ``-``
    becomes a single ``-``, leading/trailing ``-`` removed. Punctuation is kept (``c#``,
    ``node.js``). Empty names and names over :data:`MAX_CONCEPT_LENGTH` characters are dropped
    (and counted).

Fast path
    When a body provably holds no code and no HTML that could hold a link
    (:func:`fast_path_ok`), one regular expression over the raw text finds exactly what the
    markdown parse (:mod:`contextgraph.notes.markdown`) would.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from contextgraph import limits

MAX_CONCEPT_LENGTH = limits.MAX_CONCEPT_LENGTH
ATTACHMENT_EXTENSIONS: frozenset[str] = frozenset(
    {
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "bmp",
        "pdf",
        "mp3",
        "mp4",
        "webm",
        "wav",
        "ogg",
        "m4a",
        "mov",
        "canvas",
        "excalidraw",
    }
)

_SEPARATORS_RE = re.compile(r"[\s_/\\-]+")


def normalize(name: str) -> str:
    """Normalise a link target to its concept name ("" when nothing is left).

    The length limit is not applied here; see :func:`is_valid_concept`.
    """
    s = unicodedata.normalize("NFC", name).strip().lower()
    if not unicodedata.is_normalized("NFC", s):  # lower() may leave a non-NFC string
        s = unicodedata.normalize("NFC", s)
    return _SEPARATORS_RE.sub("-", s).strip("-")


def is_valid_concept(name: str) -> bool:
    """Return True if ``name`` normalises to a non-empty name of at most 200 characters."""
    n = normalize(name)
    return 0 < len(n) <= MAX_CONCEPT_LENGTH


def is_attachment(target: str) -> bool:
    """Return True if the target names an attachment file."""
    t = target.rstrip()
    dot = t.rfind(".")
    return dot >= 0 and t[dot + 1 :].lower() in ATTACHMENT_EXTENSIONS


def target_of(inner: str) -> str:
    """Apply the ``|``, ``#`` and ``.md`` cuts to the text between the brackets."""
    bar = inner.find("|")
    if bar >= 0:
        inner = inner[: bar - 1] if bar and inner[bar - 1] == "\\" else inner[:bar]
    hash_at = inner.find("#")
    if hash_at >= 0 and inner[hash_at + 1 :].strip():
        inner = inner[:hash_at]
    stripped = inner.rstrip()
    if stripped[-3:].lower() == ".md":
        inner = stripped[:-3]
    return inner


def _concept_of(target: str) -> str:
    """Return the concept for a target, "" when dropped or an attachment."""
    if is_attachment(target):
        return ""
    concept = normalize(target)
    return concept if len(concept) <= MAX_CONCEPT_LENGTH else ""


@dataclass(frozen=True)
class Link:
    """One WikiLink occurrence; offsets index the text given to ``find_links``."""

    start: int
    end: int
    target: str
    concept: str
    embed: bool


# `[[inner]]`, the `[[` not preceded by `[`, the `]]` not followed by `]`; a `!` before it
# makes an embed. (Starting the pattern with the literal `[[` lets the regex engine skip
# ahead quickly; `(?!...)` after it checks the character before.)
LINK_RE = re.compile(r"\[\[(?<!\[\[\[)[^\[\]\n\r]*\]\](?!\])")
# The same links, capturing the text between the brackets (an embed's ``!`` is outside it).
_INNER_RE = re.compile(r"\[\[(?<!\[\[\[)([^\[\]\n\r]*)\]\](?!\])")


def _resolve_inner(inner: str) -> tuple[str, str]:
    """Return (target, concept) for the text between the brackets."""
    target = target_of(inner)
    return target, _concept_of(target)


_resolve_inner_cached = lru_cache(maxsize=8192)(_resolve_inner)  # names repeat a lot


def make_link(text: str, start: int, end: int, embed: bool) -> Link:
    """Build a Link from its span in the original text."""
    inner = text[start + (3 if embed else 2) : end - 2]
    resolve = _resolve_inner_cached if len(inner) <= 2 * MAX_CONCEPT_LENGTH else _resolve_inner
    target, concept = resolve(inner)
    return Link(start, end, target, concept, embed)


def scan(s: str, base: int, text: str, out: list[Link], pos: int = 0) -> None:
    """Append the links found in ``s[pos:]``; ``s[i]`` is ``text[base + i]``."""
    for m in LINK_RE.finditer(s, pos):
        start = m.start()
        embed = start > 0 and s[start - 1] == "!"
        if embed:
            start -= 1
        out.append(make_link(text, base + start, base + m.end(), embed))


# --- the fast path ----------------------------------------------------------------------------

# Characters that may precede the first character of a line's content: indentation, block
# quote markers and list markers.
_PREFIX = r"[ \t>*+.)0-9-]*"
_HTML_LINE_RE = re.compile(rf"^{_PREFIX}<", re.MULTILINE)
_PREFIX_RE = re.compile(_PREFIX)


def normalise_newlines(s: str) -> str:
    """Replace CRLF and lone CR by LF."""
    return s.replace("\r\n", "\n").replace("\r", "\n") if "\r" in s else s


def fast_path_ok(text: str, start: int) -> bool:
    """Return True if ``text[start:]`` provably holds no code or HTML that could hide a link.

    No backtick, ``~~~`` or ``<!--``; no line starting (after container and list markers) with
    ``<``; no line holding ``[[`` with a tab or four spaces in that prefix (indented code).
    """
    body = text[start:] if start else text
    if "`" in body or "~~~" in body or "<!--" in body:
        return False
    if "<" in body and _HTML_LINE_RE.search(normalise_newlines(body)):
        return False
    return not (("\t" in body or "    " in body) and _indented_link_line(normalise_newlines(body)))


def _indented_link_line(src: str) -> bool:
    """Return True if a line with ``[[`` has a tab or four spaces in its prefix (LF text)."""
    pos = src.find("[[")
    while pos >= 0:
        line_start = src.rfind("\n", 0, pos) + 1
        prefix = _PREFIX_RE.match(src, line_start)
        if prefix is not None and ("\t" in prefix.group() or "    " in prefix.group()):
            return True
        line_end = src.find("\n", pos)
        if line_end < 0:
            break
        pos = src.find("[[", line_end)
    return False


def count_concepts_fast(text: str, start: int) -> tuple[dict[str, int], int]:
    """Concept -> mentions, and links dropped, in ``text[start:]`` (exact if :func:`fast_path_ok`).

    What :func:`find_links_fast` finds, counted as a note's extraction counts it, without building
    a :class:`Link` per occurrence: the regex hands over the inner texts in one call.
    """
    concepts: dict[str, int] = {}
    dropped = 0
    limit = 2 * MAX_CONCEPT_LENGTH
    for inner in _INNER_RE.findall(text, start):
        target, concept = (
            _resolve_inner_cached(inner) if len(inner) <= limit else _resolve_inner(inner)
        )
        if concept:
            concepts[concept] = concepts.get(concept, 0) + 1
        elif not is_attachment(target):
            dropped += 1
    return concepts, dropped


def find_links_fast(text: str, start: int) -> list[Link]:
    """Scan ``text[start:]`` with one regex (exact only when :func:`fast_path_ok`)."""
    links: list[Link] = []
    scan(text, 0, text, links, start)
    return links


__all__ = [
    "ATTACHMENT_EXTENSIONS",
    "LINK_RE",
    "MAX_CONCEPT_LENGTH",
    "Link",
    "count_concepts_fast",
    "fast_path_ok",
    "find_links_fast",
    "is_attachment",
    "is_valid_concept",
    "make_link",
    "normalize",
    "scan",
    "target_of",
]
