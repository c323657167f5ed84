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

The block parse runs in parts (:func:`_parse`): a part starts where markdown-it has nothing
open but possibly a fenced code block or an HTML block, which is checked. Parts the regex fast
path is exact for, and parts without ``[[`` that cannot leave a block open, are not parsed, so a
long note with one code span pays for the part that holds it. A part that is an outline (nested
bullet lists of text, as Logseq writes) is read by :mod:`contextgraph.notes.outline` instead,
which tells its paragraphs apart as markdown-it would.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate, count
from operator import add
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline, backtick, html_inline, image
from markdown_it.token import Token

from contextgraph.notes.fences import top_level_fences
from contextgraph.notes.links import LINK_RE, Link, fast_path_ok, make_link, scan
from contextgraph.notes.outline import Paragraph, outline_blocks

_CODE = "contextgraph_code"  # env key: code span ranges, in the inline content's offsets
_COMMENTS = "contextgraph_comments"  # env key: HTML comment ranges
_BASES = "contextgraph_bases"  # env key: offset of the source a nested inline parse reads
_WALKS = "contextgraph_comment_walks"  # env key: per inline source, _comment_end's answers

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


def _comment_end(src: str, start: int, walks: dict[int, int]) -> int:
    """Where markdown-it's comment pattern ``<!--(?:[^-]|-[^-]|--[^>])*-->`` ends when the
    comment's body starts at ``start``, or -1 when it does not match.

    The pattern's loop is deterministic: a character other than ``-`` is one step, ``-x`` two,
    ``--x`` three (x may be ``-``), and it stops only at a ``-->`` that starts a step, where the
    match ends; a run that reaches the end of ``src`` fails whatever it backtracks to. A body
    holding ``--->`` (a comment CommonMark takes, this pattern not) runs on to the end of the
    inline source, and markdown-it tried that run from every ``<!--``: 16,000 such comments in
    one paragraph took 29 s. Runs from different starts meet at the same steps, so each dash
    that starts a step remembers its answer in ``walks``: all of a source's runs cost one.
    """
    path: list[int] = []
    end, pos, size = -1, src.find("-", start), len(src)
    while pos >= 0:
        known = walks.get(pos)
        if known is not None:
            end = known
            break
        path.append(pos)
        if pos + 1 >= size:
            break
        if src[pos + 1] != "-":
            pos = src.find("-", pos + 2)
            continue
        if pos + 2 >= size:
            break
        if src[pos + 2] == ">":
            end = pos + 3
            break
        pos = src.find("-", pos + 3)
    for step in path:
        walks[step] = end
    return end


def _html_inline(state: StateInline, silent: bool) -> bool:
    """markdown-it's ``html_inline``, refusing at once a ``<!--`` its pattern cannot match."""
    src, pos = state.src, state.pos
    if (
        src.startswith("<!--", pos)
        and not src.startswith(("<!-->", "<!--->"), pos)
        and _comment_end(src, pos + 4, state.env.setdefault(_WALKS, {}).setdefault(src, {})) < 0
    ):
        return False
    return html_inline(state, silent)


def _inline_rules(md: MarkdownIt, names: list[str]) -> MarkdownIt:
    """``md`` with only the inline rules ``names``, its backticks and HTML rules noting where
    they matched (:func:`_noting`) and its image rule keeping the label's offset."""
    md.inline.ruler.enableOnly(names)
    md.inline.ruler.at("backticks", _noting(backtick, _CODE, "code_inline"))
    md.inline.ruler.at("html_inline", _noting(_html_inline, _COMMENTS, "html_inline", "<!--"))
    md.inline.ruler.at("image", _image)
    return md


# The inline parse is asked only where code spans and HTML comments lie, so it runs only the
# rules that can move them: escapes (``\```` opens no code span), autolinks and inline HTML
# (a backtick inside one is theirs), links and images (one in a link's destination is the
# link's). The rules left off (emphasis, line breaks, entities) match only at ``*``, ``_``,
# a line break or ``&``, where none of those can, and they consume none of the characters
# where those can: without them the parse steps over the same text. Nor is emphasis
# post-processed: :func:`code_and_comments` only tokenizes. A link or an image needs a ``](``
# or a link reference defined: a paragraph without either (most) goes to :data:`_PLAIN`,
# which spares trying a link at every ``[``.
_MD = _inline_rules(
    MarkdownIt("commonmark"),
    ["text", "escape", "backticks", "link", "image", "autolink", "html_inline"],
)
_MD.core.ruler.disable("inline")  # the inline parse runs per paragraph that holds a `[[`
_PLAIN = _inline_rules(
    MarkdownIt("commonmark"), ["text", "escape", "backticks", "autolink", "html_inline"]
)

_LEAVES = frozenset({"fence", "code_block", "html_block", "hr"})
_OPEN_ENDED = frozenset({"fence", "html_block"})  # the top-level blocks a blank line may not end


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


class _Ranges:
    """Ranges (start, end) of a paragraph, and which of them meet a stretch of it.

    The code spans and comments of one inline parse come in order without overlapping, so the
    ranges meeting a link are found by bisection: a paragraph of thousands of links and code
    spans took the square of their number to check them all against each other (a 200 kB
    note: 10 s). Ranges that do overlap are checked one by one, as before.
    """

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        self.ranges = sorted(ranges)
        self.starts = [a for a, _ in self.ranges]
        self.ends = [b for _, b in self.ranges]
        self.ordered = all(
            end <= next_start for end, next_start in zip(self.ends, self.starts[1:], strict=False)
        )

    def meeting(self, start: int, end: int) -> list[tuple[int, int]]:
        """The ranges that overlap ``[start, end)``."""
        if not self.ordered:
            return [r for r in self.ranges if r[0] < end and r[1] > start]
        return self.ranges[bisect_right(self.ends, start) : bisect_left(self.starts, end)]


def code_and_comments(
    content: str, env: dict[str, Any]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Where markdown-it's inline parse of ``content`` (one paragraph's or heading's) finds
    code spans and HTML comments, as (start, end) in ``content``; ``env`` is the block
    parse's (its link references)."""
    env[_CODE], env[_COMMENTS], env[_BASES] = [], [], [0]
    md = _MD if "](" in content or env.get("references") else _PLAIN
    md.inline.tokenize(StateInline(content, md, env, []))
    return env[_CODE], env[_COMMENTS]


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
    code, comments = code_and_comments(content, env)
    masked = _blank(content, code + comments)
    found = [(m.start(), m.end()) for m in LINK_RE.finditer(masked)]
    if code_in_links and code:
        code_spans, comment_spans = _Ranges(code), _Ranges(comments)
        for m in LINK_RE.finditer(content):
            s, e = m.start(), m.end()
            inside = code_spans.meeting(s, e)
            if (
                inside
                and all(s + 2 <= a and b <= e - 2 for a, b in inside)
                and not comment_spans.meeting(s, e)
            ):
                found.append((s, e))
        found.sort()
    out = []
    for s, e in found:
        embed = s > 0 and masked[s - 1] == "!"
        out.append((s - 1 if embed else s, e, embed))
    return out


# A blank line: lines after it cannot change how markdown-it classifies any line before it
# (a block still open there runs on either way), given every link reference is known.
BLANK_LINE_RE = re.compile(r"\n[ \t]*\n")
# Where a part starts (see _parts): an unindented line after a blank line, or an unindented
# bullet list item with content.
_RESTART_RE = re.compile(r"\n[ \t]*\n(?=[^ \t\n])|\n(?=[-+*][ \t]+[^ \t\n])")
# What a part must hold to leave a fenced code block or an HTML block open at its end: a fence
# marker, or a `<` with nothing before it on its line but container and list markers and
# blanks (_BEFORE_HTML_RE). A part that defines a link reference holds `]:`.
_FENCE_MARKERS = ("```", "~~~")
_BEFORE_HTML_RE = re.compile(r"[ \t>*+.)0-9-]*")


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
        blank = BLANK_LINE_RE.search(src, last) if last >= 0 else None
        if blank is not None:
            src = src[: blank.end()]
        self.src = src
        self.lines = src.split("\n")
        # The offset in the original text of each line: with LF line ends, the lengths of the
        # lines before it plus one per line (summed in C: a long note has thousands of lines).
        self.starts: list[int] = (
            list(map(add, accumulate(map(len, self.lines[:-1]), initial=start), count()))
            if "\r" not in body
            else _crlf_starts(text, start, self.lines)
        )


def _crlf_starts(text: str, start: int, lines: list[str]) -> list[int]:
    """Where each of ``lines`` starts in ``text``, whose lines end in CR LF, CR or LF."""
    starts = []
    pos = start
    for line in lines:
        starts.append(pos)
        pos += len(line)
        if text.startswith("\r\n", pos):
            pos += 2
        else:
            pos += 1
    return starts


def _part_starts(src: str) -> list[int]:
    """Where each part of ``src`` starts, then ``len(src)``.

    A part starts at an unindented line after a blank line, or at an unindented bullet list
    item with content (``- x``, which ends every paragraph, block quote, list item, indented
    code block and link reference definition before it). There every block before it has
    ended, but for a list that goes on with this item (an item parsed as if it started a new
    list: the same), a fenced code block and an HTML block; :func:`_parse` checks those.
    """
    return [0, *[m.end() for m in _RESTART_RE.finditer(src)], len(src)]


def _parts_holding(
    src: str, starts: list[int], needle: str, *, line_start: bool = False
) -> set[int]:
    """The parts of ``src`` (indices into ``starts``) that hold ``needle``; with
    ``line_start``, only where nothing but :data:`_BEFORE_HTML_RE` precedes it on its line.

    ``needle`` holds no line break, so an occurrence lies in one part; after a part's first,
    the search goes on at the next part. With ``line_start`` only a line's first occurrence
    can qualify (a later one has the first one before it), so after one that does not, the
    search goes on at the next line: each line is looked at once, however long."""
    held: set[int] = set()
    pos = src.find(needle)
    while pos >= 0:
        if line_start and not _BEFORE_HTML_RE.fullmatch(src, src.rfind("\n", 0, pos) + 1, pos):
            end = src.find("\n", pos)
            pos = src.find(needle, end) if end >= 0 else -1
            continue
        part = bisect_right(starts, pos) - 1
        held.add(part)
        pos = src.find(needle, starts[part + 1])
    return held


def _open_block(tokens: list[Token], lines: int) -> tuple[int, int] | None:
    """(index, first line) of a top-level fence or HTML block that reaches line ``lines``."""
    for i, tok in enumerate(tokens):
        if tok.level == 0 and tok.type in _OPEN_ENDED and tok.map and tok.map[1] >= lines:
            return i, tok.map[0]
    return None


def _parse(
    src: str, env: dict[str, Any]
) -> tuple[list[tuple[int, list[Token]]], list[tuple[int, list[Paragraph]]]]:
    """markdown-it's block tokens for ``src``, as (line offset, tokens) per piece parsed, and
    the paragraphs of the parts read as outlines, as (line offset, paragraphs) per part.

    The parts (:func:`_part_starts`) are parsed one by one: as each starts where nothing is
    open, markdown-it's parse of the whole ``src`` gives the same tokens, but for where a list
    that goes on at a part's start is closed. A part is not parsed when the regex fast path
    is exact for it (:func:`~contextgraph.links.fast_path_ok`) and it defines no link
    reference: its lines are then scanned as written; nor when it is an outline
    (:func:`~contextgraph.notes.outline.outline_blocks` gives its paragraphs). A part that
    holds no ``[[`` is not parsed when it cannot leave anything open (no fence marker, no line
    starting with ``<``, no ``]:``), nor when its only such markup is fences that
    :func:`~contextgraph.notes.fences.top_level_fences` can follow: a fence left open at its
    end runs to its closing line, and the parse goes on after that line. When a parse leaves
    a top-level fence or HTML block open at its end, the tokens before that block stand, and
    the parse starts again at the block's first line (where nothing else is open), taking in
    2, 4, 8, ... more parts until the block ends.
    """
    out: list[tuple[int, list[Token]]] = []
    outlines: list[tuple[int, list[Paragraph]]] = []
    starts = _part_starts(src)
    parts = len(starts) - 1
    # The parts worth a look, found with a few fast searches of the whole source rather than a
    # test of each part (a long note has thousands of parts, most of them skipped).
    linked = _parts_holding(src, starts, "[[")
    references = _parts_holding(src, starts, "]:")
    html = _parts_holding(src, starts, "<", line_start=True)
    fenced = set().union(*(_parts_holding(src, starts, marker) for marker in _FENCE_MARKERS))
    counted = line = 0  # line is the number of line breaks in src[:counted]
    i = 0
    for k in sorted(linked | references | html | fenced):
        if k < i:  # taken in by a parse grown past it, or by a fence
            continue
        i = k
        a, b = starts[i], starts[i + 1]
        line += src.count("\n", counted, a)
        counted = a
        i += 1
        if k in linked and k not in references:
            chunk = src[a:b]
            if fast_path_ok(chunk, 0):
                continue
            outline = outline_blocks(chunk)
            if outline is not None:
                outlines.append((line, outline))
                continue
        elif not (k in linked or k in references or k in html) and (
            (fences := top_level_fences(src, a, b)) is not None
        ):
            if not fences or fences[-1][1] < b:
                continue  # every fence of the part closes in it
            opening, closing = fences[-1]
            line += src.count("\n", a, opening)
            inside = src.count("\n", opening, closing) + 1
            out.append((line, [Token("fence", "code", 0, map=[0, inside], block=True)]))
            line += inside
            a = counted = min(closing + 1, len(src))  # the line after the fence
            i = bisect_right(starts, a) - 1  # the part that line is in
            if a == starts[i]:
                continue
            i += 1  # the rest of its part is parsed: it may hold a link, or more fences
            b = starts[i]
        grow = 1
        while True:
            tokens: list[Token] = []
            _MD.block.parse(src[a:b], _MD, env, tokens)
            still_open = _open_block(tokens, src.count("\n", a, b)) if i < parts else None
            if still_open is None:
                break
            opened, first = still_open
            out.append((line, tokens[:opened]))
            for _ in range(first):  # to the open block's first line
                a = src.index("\n", a) + 1
            line += first
            counted = a
            grow *= 2
            i = min(parts, i + grow)
            b = starts[i]
        out.append((line, tokens))
    return out, outlines


def find_links_markdown(text: str, start: int, *, code_in_links: bool = True) -> list[Link]:
    """Find the links of ``text[start:]`` (the body) by markdown-it's reading of it."""
    source = _Source(text, start)
    lines, starts = source.lines, source.starts
    env: dict[str, Any] = {}
    # Every reference definition is known before the inline parses.
    parsed, outlines = _parse(source.src, env)
    covered = bytearray(len(lines))
    links: list[Link] = []

    def add(line: int, col: int, s: int, e: int, embed: bool) -> None:
        offset = starts[line] + col
        links.append(make_link(text, offset, offset + (e - s), embed))

    def paragraph(first: int, content: str) -> None:
        """The links of a paragraph or setext heading whose inline content is ``content``,
        starting on line ``first``: its line k is a suffix of source line first + k (after
        container markers and indentation), stripped at both ends."""
        found = links_in_inline(content, env, code_in_links=code_in_links)
        pieces = content.split("\n")
        piece_starts = [0]
        for piece in pieces[:-1]:
            piece_starts.append(piece_starts[-1] + len(piece) + 1)
        k, shifted = 0, -1
        for s, e, embed in found:
            while k + 1 < len(pieces) and piece_starts[k + 1] <= s:
                k += 1
            line = first + k
            if shifted != k:  # once per line, not per link (each rstrip copies the line)
                shift = len(lines[line].rstrip()) - len(pieces[k].rstrip())
                shifted = k
            add(line, shift + s - piece_starts[k], s, e, embed)

    for base, tokens in parsed:
        for i, tok in enumerate(tokens):
            if tok.map is None:
                continue
            a, b = tok.map[0] + base, tok.map[1] + base
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
            if tok.type == "heading_open" and tok.markup not in ("=", "-"):  # ATX: one line
                found = links_in_inline(content, env, code_in_links=code_in_links)
                line_text = lines[a]
                hashes = line_text.index("#")
                while hashes < len(line_text) and line_text[hashes] == "#":
                    hashes += 1
                col = line_text.find(content, hashes)
                for s, e, embed in found:
                    add(a, col + s, s, e, embed)
                continue
            paragraph((inline.map or tok.map)[0] + base, content)
    for base, paragraphs in outlines:
        for first, texts in paragraphs:
            a = base + first
            covered[a : a + len(texts)] = b"\x01" * len(texts)
            content = "\n".join(texts)
            if "[[" in content:
                paragraph(a, content)
    # The lines outside every block that hold a "[[" are scanned as written.
    src, counted, line = source.src, 0, 0
    at = src.find("[[")
    while at >= 0:
        line += src.count("\n", counted, at)
        counted = at
        if not covered[line]:
            scan(lines[line], starts[line], text, links)
        end = src.find("\n", at)
        at = src.find("[[", end) if end >= 0 else -1
    links.sort(key=lambda link: link.start)
    return links


__all__ = ["BLANK_LINE_RE", "find_links_markdown", "links_in_inline"]
