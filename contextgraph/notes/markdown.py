"""Find WikiLinks in a note with markdown-it-py deciding what is code and HTML (SPEC §2).

markdown-it-py (``commonmark`` preset) parses the body. Nothing is scanned in fenced or indented
code, HTML blocks or thematic breaks; paragraphs and headings are parsed inline, where
markdown-it's own ``backticks`` and ``html_inline`` rules find the code spans and HTML comments
(wrapped here only to note where they matched: parsing is unchanged); source lines outside any
block, such as link reference definitions, are scanned as written.

In a paragraph or heading the links are then read from its text with the code spans and HTML
comments blanked out, so code binds tighter than a link, as in CommonMark: ``[[a`]] `b` `` is no
link, and neither is ``[[x]]`` inside a code span. A code span lying wholly between a link's
``[[`` and ``]]`` is part of the link, as Obsidian reads it (``[[Functions#hasTag|`hasTag`]]``
links ``functions``). Why not an inline rule that emits WikiLink tokens (as basic-memory's
``markdown/plugins.py`` does)? Such a rule runs at ``[[`` before markdown-it has seen a backtick
later in the line, so a code span that starts inside a link and ends after it would lose, and
it would take ``\\[[x]]`` and Logseq's ``[label]([[page]])`` differently from the regex fast path
that serves most notes: the results must not depend on which path a note takes.

Other inline HTML tags and link destinations are scanned as written; backslash escapes are not
interpreted around the brackets.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline, backtick, html_inline, image
from markdown_it.token import Token

from contextgraph.notes.links import LINK_RE, Link, make_link, scan

_CODE = "contextgraph_code"  # env key: code span ranges, in the inline content's offsets
_COMMENTS = "contextgraph_comments"  # env key: HTML comment ranges
_BASES = "contextgraph_bases"  # env key: offset of the source a nested inline parse reads

InlineRule = Callable[[StateInline, bool], bool]


def _noting(rule: InlineRule, key: str, token_type: str, prefix: str = "") -> InlineRule:
    """Wrap an inline rule so that each ``token_type`` token it pushes (whose source starts
    with ``prefix``) appends its source range to ``env[key]``.

    Only pushed tokens count: the backticks rule also consumes a run that nothing closes, as
    plain text.
    """

    def wrapped(state: StateInline, silent: bool) -> bool:
        start, pushed = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if (
            not silent
            and len(state.tokens) > pushed
            and state.tokens[-1].type == token_type
            and state.src.startswith(prefix, start)
        ):
            base = state.env[_BASES][-1]
            state.env[key].append((base + start, base + state.pos))
        return True

    return wrapped


def _image(state: StateInline, silent: bool) -> bool:
    # The image rule parses its label in a new inline state over ``src[label_start:...]``.
    if silent:
        return image(state, silent)
    bases = state.env[_BASES]
    bases.append(bases[-1] + state.pos + 2)  # after the `![`
    try:
        return image(state, silent)
    finally:
        bases.pop()


_MD = MarkdownIt("commonmark")
_MD.core.ruler.disable("inline")  # the inline parse runs per paragraph that holds a `[[`
_MD.inline.ruler.at("backticks", _noting(backtick, _CODE, "code_inline"))
_MD.inline.ruler.at("html_inline", _noting(html_inline, _COMMENTS, "html_inline", "<!--"))
_MD.inline.ruler.at("image", _image)

_LEAVES = frozenset({"fence", "code_block", "html_block", "hr"})


def _blank(content: str, regions: list[tuple[int, int]]) -> str:
    """``content`` with each region replaced by line breaks (which no link crosses)."""
    if not regions:
        return content
    parts: list[str] = []
    last = 0
    for a, b in sorted(regions):
        if a < last:
            continue
        parts.append(content[last:a])
        parts.append("\n" * (b - a))
        last = b
    parts.append(content[last:])
    return "".join(parts)


def links_in_inline(
    content: str, env: dict[str, Any], *, code_in_links: bool = True
) -> list[tuple[int, int, bool]]:
    """(start, end, embed) of every link in one paragraph's or heading's inline content.

    ``code_in_links=False`` leaves out the links that hold a code span (SPEC §2's Obsidian rule),
    giving what a plain CommonMark reading gives.
    """
    if "`" not in content and "<!--" not in content:  # nothing to blank out: skip the parse
        found = [(m.start(), m.end()) for m in LINK_RE.finditer(content)]
        return [
            (s - 1, e, True) if s and content[s - 1] == "!" else (s, e, False) for s, e in found
        ]
    env[_CODE], env[_COMMENTS], env[_BASES] = [], [], [0]
    _MD.inline.parse(content, _MD, env, [])
    code, comments = env[_CODE], env[_COMMENTS]
    masked = _blank(content, code + comments)
    found = [(m.start(), m.end()) for m in LINK_RE.finditer(masked)]
    if code_in_links and code:
        for m in LINK_RE.finditer(content):
            s, e = m.start(), m.end()
            inside = [r for r in code if r[0] < e and r[1] > s]
            if (
                inside
                and all(s + 2 <= a and b <= e - 2 for a, b in inside)
                and not any(a < e and b > s for a, b in comments)
            ):
                found.append((s, e))
        found.sort()
    out = []
    for s, e in found:
        embed = s > 0 and masked[s - 1] == "!"
        out.append((s - 1 if embed else s, e, embed))
    return out


_BLANK_LINE_RE = re.compile(r"\n[ \t]*\n")


class _Source:
    """The body as markdown-it sees it (LF line ends, NUL replaced) and where its lines start.

    Lines after the first blank line that follows the last ``[[`` cannot change how any line
    before them is classified (a block still open there runs to the end either way): they are
    dropped, which spares most of the parse of a long note.
    """

    def __init__(self, text: str, start: int) -> None:
        body = text[start:]
        src = body.replace("\r\n", "\n").replace("\r", "\n") if "\r" in body else body
        if "\0" in src:
            src = src.replace("\0", "\ufffd")  # as markdown-it does; one character for one
        last = src.rfind("[[")
        blank = _BLANK_LINE_RE.search(src, last) if last >= 0 else None
        if blank is not None:
            src = src[: blank.end()]
        self.src = src
        self.lines = src.split("\n")
        self.starts: list[int] = []  # offset in the original text of each line
        pos = start
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line)
            if text.startswith("\r\n", pos):
                pos += 2
            else:
                pos += 1


def find_links_markdown(text: str, start: int, *, code_in_links: bool = True) -> list[Link]:
    """Find the links of ``text[start:]`` (the body) by markdown-it's reading of it."""
    source = _Source(text, start)
    lines, starts = source.lines, source.starts
    env: dict[str, Any] = {}
    tokens: list[Token] = _MD.parse(source.src, env)
    covered = bytearray(len(lines))
    links: list[Link] = []

    def add(line: int, col: int, s: int, e: int, embed: bool) -> None:
        offset = starts[line] + col
        links.append(make_link(text, offset, offset + (e - s), embed))

    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        a, b = tok.map
        if tok.type in _LEAVES:
            covered[a:b] = b"\x01" * (b - a)
            continue
        if tok.type not in ("paragraph_open", "heading_open"):
            continue
        covered[a:b] = b"\x01" * (b - a)
        inline = tokens[i + 1]
        content = inline.content
        if "[[" not in content:
            continue
        found = links_in_inline(content, env, code_in_links=code_in_links)
        if tok.type == "heading_open" and tok.markup not in ("=", "-"):  # ATX: one line
            line_text = lines[a]
            hashes = line_text.index("#")
            while hashes < len(line_text) and line_text[hashes] == "#":
                hashes += 1
            col = line_text.find(content, hashes)
            for s, e, embed in found:
                add(a, col + s, s, e, embed)
            continue
        # A paragraph or setext heading: content line k is a suffix of source line a + k
        # (after container markers and indentation), stripped at both ends of the content.
        first = (inline.map or tok.map)[0]
        pieces = content.split("\n")
        piece_starts = [0]
        for piece in pieces[:-1]:
            piece_starts.append(piece_starts[-1] + len(piece) + 1)
        k = 0
        for s, e, embed in found:
            while k + 1 < len(pieces) and piece_starts[k + 1] <= s:
                k += 1
            piece, line = pieces[k], first + k
            shift = len(lines[line].rstrip()) - len(piece.rstrip())
            add(line, shift + s - piece_starts[k], s, e, embed)
    for line, covers in enumerate(covered):
        if not covers and "[[" in lines[line]:
            scan(lines[line], starts[line], text, links)
    links.sort(key=lambda link: link.start)
    return links


__all__ = ["find_links_markdown", "links_in_inline"]
