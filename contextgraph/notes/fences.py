"""Follow the fenced code blocks of a part of a note without markdown-it, where that is exact.

:func:`contextgraph.notes.markdown._parse` must know whether a part without ``[[`` leaves a
top-level fenced code block open at its end (a fence whose code holds blank lines spans parts),
and where that fence ends. markdown-it's block parse found out at about a millisecond per
kilobyte, for parts whose only markup was a code block: over half the parses of long notes.

In a part that holds no HTML block and no link reference definition (the caller checks
those), a line stands at the top level, outside any container, unless a line before it may
have opened a block quote or a list item; :func:`top_level_fences` follows the fences up to
such a line, and gives up if a fence opens after it. At the top level CommonMark's fence rules
are short. Where no fence is open, a line of at most three spaces, then three or more backticks
or tildes (a backtick fence's info string holding no backtick), opens one: a fence interrupts a
paragraph, a table, a setext heading's text, and ends an indented code block, the only other
blocks such a line could be in. Its lines are code, whatever they look like, up to the first
line of at most three spaces, then at least as many of its marker, then only spaces or tabs;
nothing else ends a top-level fence but the end of the document.
"""

from __future__ import annotations

import re
from functools import lru_cache

# A line that may open a block quote or a list item, or belong to one (more lines than do).
_CONTAINER_RE = re.compile(r"^[ \t]*(?:>|(?:[-+*]|[0-9]{1,9}[.)])(?:[ \t]|$))", re.M)
_OPENER_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.M)


@lru_cache(maxsize=64)
def _closer(marker: str, length: int) -> re.Pattern[str]:
    return re.compile(rf"^ {{0,3}}{re.escape(marker)}{{{length},}}[ \t]*$", re.M)


def top_level_fences(src: str, start: int, end: int) -> list[tuple[int, int]] | None:
    """The top-level fenced code blocks of the part ``src[start:end]``, or None if unsure.

    Each is (where its opening line starts, where its closing line ends); the last one's
    closing line may lie past the part (the first line after it that closes the fence), and
    ``len(src)`` stands for its end when no line does. None when a line before an opening line
    may belong to a block quote or a list item: the fence may then be inside it.
    """
    found: list[tuple[int, int]] = []
    at = start
    while True:
        opener = _OPENER_RE.search(src, at, end)
        while opener is not None and opener[1][0] == "`" and "`" in opener[2]:
            opener = _OPENER_RE.search(src, opener.end(), end)  # a code span, not a fence
        if opener is None:
            return found
        if _CONTAINER_RE.search(src, at, opener.start()) is not None:
            return None
        closer = _closer(opener[1][0], len(opener[1]))
        closed = closer.search(src, opener.end(), end) or closer.search(src, end)
        at = len(src) if closed is None else closed.end()
        found.append((opener.start(), at))
        if at >= end:
            return found


__all__ = ["top_level_fences"]
