"""Read an outline (nested bullet lists of text, as Logseq writes notes) without markdown-it.

markdown-it's block parse of a long outline costs about a millisecond per kilobyte, and a
Logseq note is one outline: its items nest by tabs, so the regex fast path cannot rule out
indented code, and almost every part of it holds a code span somewhere. What decides where
its links are, though, is little: which lines are paragraph text (not code, not HTML) and
where each paragraph starts (a code span cannot cross from one paragraph into the next).
:func:`outline_blocks` works that out for a part whose every line has one of three shapes,
following CommonMark's block rules, and gives up (None) on anything else, which markdown-it
then parses as before. The shapes, each after the line's indentation:

- an item: a bullet (``-``, ``+`` or ``*``), one space, then content: text or an ATX heading;
- text: a line not starting with a character that may open a block (a fence, HTML, block
  quote, list item, thematic break, setext underline);
- an ATX heading (``## Title``; ``#tag`` is text).

A part holds no ``]:`` (the caller checks: a link reference definition could start a
paragraph) and starts where nothing is open (see :func:`contextgraph.notes.markdown._parse`).
Each line then is, by the rules:

- a blank line ends the open paragraph, and no list item: the next line's indentation decides
  which go on (a part's blank lines are followed by indented lines only);
- a text line continues the open paragraph if there is one, lazily if its indentation falls
  short of the innermost list items (indented code cannot interrupt a paragraph); otherwise
  it starts one inside the list items its indentation reaches (the others close), unless it
  is indented four or more columns past the last of them: that is indented code (give up);
- an item line starts a list item inside the items its indentation reaches (a bullet item
  with content interrupts a paragraph); four or more columns past the last of them, it is
  text of the open paragraph instead if it reaches every open item, and code otherwise (with
  no paragraph open, too): give up. markdown-it lets an item or a heading that falls short of
  the innermost item's content interrupt the paragraph there, however far it is indented
  past the items it reaches. Its content opens a paragraph, or is a heading, after which no
  paragraph is open;
- a heading line closes the items its indentation does not reach; four or more columns past
  the last it reaches, it is text or code, as an item line is.

Columns count tabs to the next multiple of four, as markdown-it does. Item content starts
two columns past the bullet (one space: more, or a tab, gives up). Past eight levels of
nesting the reader gives up too: markdown-it stops tokenizing at its nesting limit.

A heading's text goes out as a one-line paragraph whose text may keep a closing ``#``
sequence: neither a link nor a code span can end in one, so the links found are the same.
"""

from __future__ import annotations

import re

Paragraph = tuple[int, list[str]]  # (first line, the text of each of its lines)
_HEADING_RE = re.compile(r"#{1,6}(?:[ \t]|$)")
# What opens a block where a line's text starts, but a heading: an ordered list item, a
# thematic break or setext underline, a fence; and a bullet item, HTML or a block quote, whose
# first characters are checked apart (a line starting ``**`` or ``_`` is text, as is one
# starting with a code span).
_ORDERED_RE = re.compile(r"[0-9]{1,9}[.)](?:[ \t]|$)")
_RULE_RE = re.compile(r"(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,}|=+[ \t]*|-+[ \t]*")
_FENCE_RE = re.compile(r"```|~~~")
_MAX_DEPTH = 8


def _width(indent: str) -> int:
    """The columns ``indent`` (spaces and tabs) spans from the start of a line."""
    if "\t" not in indent:
        return len(indent)
    col = 0
    for ch in indent:
        col = col + 4 - col % 4 if ch == "\t" else col + 1
    return col


def _is_text(content: str) -> bool:
    """True if ``content`` (a line's text after its indentation, and bullet) opens no block."""
    first = content[0]
    if first in "<>":
        return False
    if first in "-+*" and content[1:2] in ("", " ", "\t"):
        return False
    if first.isdigit():
        return _ORDERED_RE.match(content) is None
    if first in "`~":
        return _FENCE_RE.match(content) is None
    return first not in "*_=-" or _RULE_RE.fullmatch(content) is None


def outline_blocks(chunk: str) -> list[Paragraph] | None:
    """The paragraphs and headings of ``chunk``, if it is an outline; else None.

    Each is (its first line, relative to ``chunk``; its lines' text): each line's text a
    suffix of its source line with the surrounding blanks stripped, as the ``inline`` token
    of markdown-it's paragraph holds them (joined by line breaks). Not markdown-it's tokens:
    creating three of them per paragraph cost as much as reading the outline.
    """
    lines = chunk.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    stack: list[int] = []  # content columns of the open list items, outermost first
    paragraphs: list[Paragraph] = []
    open_ = False  # whether the last paragraph is open
    for number, line in enumerate(lines):
        body = line.lstrip(" \t")
        indent = line[: len(line) - len(body)]
        rest = body.rstrip()
        if not rest:  # a blank line ends the open paragraph, not the list items
            open_ = False
            continue
        width = _width(indent)
        reached = 0  # the list items whose content column the line reaches
        while reached < len(stack) and stack[reached] <= width:
            reached += 1
        past = width - (stack[reached - 1] if reached else 0)
        if rest[0] in "-*" and _RULE_RE.fullmatch(rest):
            return None  # a thematic break (``* **``, ``- - -``), not an item: it wins
        item = rest[0] in "-+*" and rest[1:2] == " "
        content = rest[2:] if item else rest
        heading = bool(content) and _HEADING_RE.match(content) is not None
        if not item and not heading:
            if not _is_text(rest):
                return None
            if open_:
                paragraphs[-1][1].append(rest)
                continue
        if past >= 4:  # as text of the open paragraph, or indented code
            if not open_ or reached < len(stack):
                # Short of the innermost item, the line ends its paragraph (markdown-it lets
                # an item or heading there interrupt it), and past the last item it reaches,
                # it is indented code.
                return None
            paragraphs[-1][1].append(rest)
            continue
        if item:
            if not content or content[0] in " \t" or not (heading or _is_text(content)):
                return None
            stack[reached:] = [width + 2]
        else:
            del stack[reached:]
        if len(stack) > _MAX_DEPTH:
            return None
        if heading:
            text = content.lstrip("#").strip()
            if text:
                paragraphs.append((number, [text]))
            open_ = False
        else:
            paragraphs.append((number, [content]))
            open_ = True
    return paragraphs


__all__ = ["Paragraph", "outline_blocks"]
