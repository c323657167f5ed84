"""What an edit does to a note's text (SPEC §14): append, prepend, replace text, replace a section.

Pure text in, text out; :mod:`contextgraph.sync.writing` reads the file, calls :func:`edited`,
and writes and syncs the result. A note that starts with a byte order mark keeps it first: the
edit works on the text after it (where its frontmatter and first heading are), and the mark is
put back in front.
"""

from __future__ import annotations

import re

from contextgraph.errors import InvalidArgument, NotFound
from contextgraph.limits import EDIT_COUNT, EDIT_FIND, EDIT_HEADING

OPERATIONS: tuple[str, ...] = ("append", "prepend", "replace_text", "replace_section")
BOM = "\ufeff"
FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n.*?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")


def edited(
    text: str,
    operation: str,
    content: str | None,
    find: str | None,
    replace: str | None,
    count: int,
    heading: str | None,
) -> str:
    """``text`` after ``operation`` (one of :data:`OPERATIONS`); InvalidArgument or NotFound
    when the edit cannot apply as asked (nothing is changed then)."""
    EDIT_COUNT.check(count)  # every operation, as the CLI and MCP bound it
    mark = BOM if text.startswith(BOM) else ""
    text = text[len(mark) :]
    if operation == "replace_text":
        if not find:
            raise InvalidArgument("replace_text needs the text to find")
        EDIT_FIND.check(find)
        if replace is None:
            raise InvalidArgument("replace_text needs the replacement text")
        found = text.count(find)
        if found != count:
            raise InvalidArgument(
                f"the text to find occurs {found} time(s), not {count}: nothing changed"
            )
        return mark + text.replace(find, replace)
    if content is None:
        raise InvalidArgument(f"{operation} needs content")
    if operation == "append":
        joiner = "" if not text or text.endswith("\n") else "\n"
        return mark + text + joiner + content
    if operation == "prepend":
        match = FRONTMATTER.match(text)
        head, body = (text[: match.end()], text[match.end() :]) if match else ("", text)
        joiner = "" if content.endswith("\n") or not body else "\n"
        return mark + head + content + joiner + body
    if not heading or not heading.strip("# \t"):
        raise InvalidArgument("replace_section needs a heading")
    EDIT_HEADING.check(heading)
    return mark + _replace_section(text, heading, content)


def _replace_section(text: str, heading: str, content: str) -> str:
    wanted = " ".join(heading.strip().lstrip("#").split()).lower()
    lines = text.splitlines(keepends=True)
    headings: list[tuple[int, int]] = []  # (line index, level)
    fence: str | None = None
    for i, line in enumerate(lines):
        bare = line.rstrip("\r\n")
        opened = _FENCE.match(bare)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        match = _HEADING.match(bare)
        if match:
            headings.append((i, len(match.group(1))))
    hits = [
        (i, level)
        for i, level in headings
        if " ".join(_HEADING.match(lines[i].rstrip("\r\n")).group(2).split()).lower() == wanted  # type: ignore[union-attr]
    ]
    if not hits:
        raise NotFound(f"no heading {heading.strip()[:200]!r} in the note")
    if len(hits) > 1:
        raise InvalidArgument(
            f"{len(hits)} headings read {heading.strip()[:200]!r}: make it unique first"
        )
    start, level = hits[0]
    end = next((i for i, lv in headings if i > start and lv <= level), len(lines))
    body = content if not content or content.endswith("\n") else content + "\n"
    if end < len(lines) and body and not body.endswith("\n\n"):
        body += "\n"  # keep a blank line before the next heading
    heading_line = lines[start] if lines[start].endswith("\n") else lines[start] + "\n"
    return "".join(lines[:start]) + heading_line + body + "".join(lines[end:])


__all__ = ["BOM", "FRONTMATTER", "OPERATIONS", "edited"]
