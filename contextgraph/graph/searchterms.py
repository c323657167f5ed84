"""What the full-text index holds beside a file's text, so code is findable as people ask for it.

FTS5's ``unicode61`` tokenizer splits at ``_``, ``.`` and ``/`` but not inside ``CamelCase``:
``token_validator`` is indexed as ``token`` ``validator`` while ``TokenValidator`` is the single
token ``tokenvalidator``. Two extra columns close the gap without a custom tokenizer (which
Python's ``sqlite3`` cannot register):

* ``search_parts`` — for every identifier of the text that the tokenizer would not split the way
  a reader does, the other spelling: ``TokenValidator`` adds ``token validator``,
  ``token_validator`` adds ``tokenvalidator``. Each spelling once per file.
* ``search_meta`` — what names a file rather than what it says: the words of its path (split
  like identifiers), its first ``#`` heading, and for code the names of the symbols it defines
  in both spellings. The index weighs this column above the body (``search.COLUMN_WEIGHTS``).

The query side (:mod:`contextgraph.graph.ftsquery`) asks for both spellings of every word, so the
query ``TokenValidator`` and the words ``token validator`` find all four forms.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from functools import lru_cache

# An identifier-like run: letters, digits and underscores (ASCII; other scripts have no case
# boundaries worth splitting at).
_IDENT = re.compile(r"[A-Za-z0-9_]{2,}")
# Case boundaries: "HTTPServerError" -> HTTP Server Error; digits stay with what precedes them.
_CAMEL = re.compile(r"[A-Z]+[0-9]*(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
# The opening of an ATX heading: one to six `#`, then blanks (see _heading_text).
_HEADING_OPEN = re.compile(r"#{1,6}[ \t]+")
# Frontmatter: a leading '---' line, up to the next '---' or '...' line.
_FRONTMATTER = re.compile(
    r"\A---[ \t]*\r?\n(?:.*?\r?\n)?(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL
)


def _class_table() -> bytes:
    """A ``bytes.translate`` table to character classes: a lowercase letter -> ``a``, a digit
    -> ``0``, an uppercase letter -> ``A``, ``_`` -> ``_``, any other byte -> space."""
    table = bytearray(b" " * 256)
    for chars, cls in (
        (string.ascii_lowercase, "a"),
        (string.digits, "0"),
        (string.ascii_uppercase, "A"),
        ("_", "_"),
    ):
        for char in chars:
            table[ord(char)] = ord(cls)
    return bytes(table)


_CLASSES = _class_table()
# Where an identifier has another spelling, in a text's classes: a case boundary (the B of aB,
# a1B or ABc) or an underscore between two letters or digits. Each pattern starts with one
# literal, which the regex engine finds with a fast search; a pattern led by a character set
# (``[A-Z_]``, on the text itself) is tried at every character, and took twice as long over
# bench's long notes. Any identifier run holding such a position is a compound word.
_HINTS = (
    re.compile(rb"A(?:(?<=[a0]A)|(?<=AA)(?=a))"),
    re.compile(rb"_(?<=[aA0]_)(?=_*[aA0])"),
)
MAX_PARTS_CHARS = 200_000  # a huge generated file does not get a second copy of itself


def camel_parts(token: str) -> list[str]:
    """Split one token at its case boundaries: ``HTTPServerV2`` → http server v2.

    Only an ASCII token is split, as only ASCII identifier runs get a split spelling in the
    index (:func:`compound_words`): ``ÅNGSTRÖM`` stays one word, not ``ngstr`` and ``m``."""
    return list(_camel_parts(token))


@lru_cache(maxsize=1 << 16)
def _camel_parts(token: str) -> tuple[str, ...]:
    if not token.isascii():
        return (token.lower(),)
    return tuple(p.lower() for p in _CAMEL.findall(token)) or (token.lower(),)


@lru_cache(maxsize=1 << 16)
def spellings(word: str) -> tuple[str, str | None, str | None]:
    """The ways the index may hold ``word``: (as tokenized, joined, case-split).

    ``token_validator`` → ("token validator", "tokenvalidator", None);
    ``TokenValidator`` → ("tokenvalidator", None, "token validator");
    ``get_HTTPServer`` → ("get httpserver", "gethttpserver", "get http server").
    A spelling is ``None`` where it equals the tokenized one. Cached: a vault repeats its words.
    """
    pieces = [p for p in word.split("_") if p]
    tokenized = " ".join(p.lower() for p in pieces)
    joined = "".join(p.lower() for p in pieces) if len(pieces) > 1 else None
    split = " ".join(part for p in pieces for part in _camel_parts(p))
    return tokenized, joined, (split if split != tokenized else None)


def compound_words(text: str) -> list[str]:
    """The identifier runs of ``text`` (``[A-Za-z0-9_]``, maximal) that have another spelling.

    Each once, in order of first appearance: a run with an inner underscore between two letters
    or digits, or a case boundary (``aB``, ``a1B``, ``ABc``).
    """
    # One class per character: encoding to ASCII replaces each other character with one "?".
    classes = text.encode("ascii", "replace").translate(_CLASSES)
    runs: dict[int, int] = {}  # start -> end of each compound run
    for pattern in _HINTS:
        match = pattern.search(classes)
        while match is not None:  # one search per run, however many hints it holds
            start = classes.rfind(b" ", 0, match.start()) + 1
            end = classes.find(b" ", match.end())
            if end < 0:
                end = len(classes)
            runs[start] = end
            match = pattern.search(classes, end)
    return list(dict.fromkeys(text[start : runs[start]] for start in sorted(runs)))


def identifier_parts(text: str) -> str:
    """The other spellings of the identifiers in ``text``, one per line, each once.

    Only words with an inner underscore or a case boundary have another spelling, and a prose
    text usually has none, so :func:`compound_words` finds just those (in C) and each distinct
    word is spelled once (:func:`spellings` is cached across files).
    """
    seen: dict[str, None] = {}
    size = 0
    for word in compound_words(text):
        _, joined, split = spellings(word)
        for spelling in (joined, split):
            if spelling and spelling not in seen:
                seen[spelling] = None
                size += len(spelling) + 1
        if size > MAX_PARTS_CHARS:
            break
    return "\n".join(seen)


def body_start(text: str) -> int:
    """Offset where a note's body starts (after a YAML frontmatter block, if any)."""
    match = _FRONTMATTER.match(text)
    return match.end() if match else 0


def first_heading(text: str) -> str | None:
    """The text of the first ATX heading of a note's body, if any.

    The first line from the body's start that ``^#{1,6}[ \\t]+(.+?)[ \\t#]*$`` matches (in
    MULTILINE mode), its group stripped. The lines that start with ``#`` are found with
    ``str.find`` (a search led by ``^`` tried the pattern at every character of a note without
    a heading: 18,347 notes and code files took 0.096 s, now 0.049), and each is read by
    :func:`_heading_text` in one pass: that pattern's lazy group backtracks over a long line of
    ``# # # … x`` once per character (a 16 kB line: 0.9 s, and four times as long for twice
    the line).
    """
    start = body_start(text)  # 0, or just after a line break
    at = start if text.startswith("#", start) else _line_after(text.find("\n#", start))
    while at >= 0:  # at: the start of a line that starts with "#"
        end = text.find("\n", at)
        heading = _heading_text(text[at:] if end < 0 else text[at:end])
        if heading is not None or end < 0:
            if heading is not None and any(text.find(m, start, at) >= 0 for m in _HIDING):
                return _first_heading_outside_code(text, start)
            return heading
        at = _line_after(text.find("\n#", end))
    return None


_HIDING = ("```", "~~~", "<!--")  # what can hide a "#" line: a code fence, an HTML comment


def _first_heading_outside_code(text: str, start: int) -> str | None:
    """:func:`first_heading` line by line, past fenced code blocks and HTML comments: a shell
    comment in a fence (``# install deps first``) is no heading, in CommonMark as in a note."""
    fence = ""  # the open fence's marker run, "" when none is open
    comment = False
    pos = start
    while pos >= 0:  # line by line as the fast path reads lines, up to the heading only
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        pos = end + 1 if end >= 0 else -1
        inner = line.lstrip(" ") if len(line) - len(line.lstrip(" ")) <= 3 else ""
        if fence:
            run = inner[: len(inner) - len(inner.lstrip(fence[0]))]
            if len(run) >= len(fence) and not inner[len(run) :].strip():
                fence = ""
            continue
        if comment:
            comment = "-->" not in line
            continue
        if inner.startswith(("```", "~~~")):
            marker = inner[0]
            run = inner[: len(inner) - len(inner.lstrip(marker))]
            if marker == "~" or "`" not in inner[len(run) :]:  # a backtick fence's info has none
                fence = run
                continue
        if inner.startswith("<!--"):
            comment = "-->" not in inner[4:]
            continue
        if line.startswith("#"):
            heading = _heading_text(line)
            if heading is not None:
                return heading
    return None


def _line_after(line_break: int) -> int:
    """The start of the line after ``line_break`` (an index), or -1 when that is -1 (none)."""
    return line_break + 1 if line_break >= 0 else -1


def _heading_text(line: str) -> str | None:
    """What ``#{1,6}[ \\t]+(.+?)[ \\t#]*$`` matched on ``line`` (no line break in it) as its
    group, stripped; None where it does not match.

    The group is the shortest that leaves only blanks and ``#`` after it: up to the line's last
    other character; else (nothing but ``#`` and blanks after the opening) the one character
    after the opening (a ``#``), or, at the line's end, one of the opening's blanks if it has
    two or more (the pattern's blanks give one back).
    """
    opening = _HEADING_OPEN.match(line)
    if opening is None:
        return None
    after = opening.end()
    last = len(line.rstrip(" \t#"))  # the trailing blanks and hashes start here
    if last > after:
        return line[after:last].strip()
    if after < len(line):
        return line[after].strip()
    blanks = after - (len(line) - len(line.lstrip("#")))
    return "" if blanks >= 2 else None


def display_title(title: str | None, text: str | None, path: str) -> str:
    """A file's title for people: frontmatter ``title``, else the first heading, else the name."""
    if title and title.strip():
        return title.strip()
    if text and path.lower().endswith(".md"):
        heading = first_heading(text)
        if heading:
            return heading
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return stem or name


def _words(names: Iterable[str], out: dict[str, None] | None = None) -> list[str]:
    """The spellings of the words of ``names``, each once, in order: after those of ``out``."""
    out = {} if out is None else out
    for name in names:
        for word in _IDENT.findall(name):
            for spelling in spellings(word):
                if spelling:
                    out.setdefault(spelling, None)
    return list(out)


@lru_cache(maxsize=4096)
def _folder_words(folder: str) -> tuple[str, ...]:
    """:func:`_words` of a folder's path, cached: a sync reads a folder's files one after
    another, and each file's index terms start with the same words."""
    return tuple(_words(re.split(r"[/.]", folder)))


def symbol_names(facts: str | None) -> list[str]:
    """The qualified names of the symbols a code file defines, from its cached facts."""
    if not facts:
        return []
    from contextgraph.code.model import FileFacts

    try:
        return [s.qualname for s in FileFacts.from_json(facts).symbols]
    except ValueError:
        return []


def meta_terms(path: str, text: str | None, facts: str | None) -> str:
    """Path words, first heading and defined symbol names: what the index weighs highest."""
    return meta_terms_of(path, text, symbol_names(facts))


def meta_terms_of(path: str, text: str | None, symbols: Iterable[str]) -> str:
    """:func:`meta_terms` with the symbols' qualified names given (no facts to parse)."""
    parts = [path.replace("/", " ").replace(".", " ")]
    if text is not None and path.lower().endswith(".md"):
        heading = first_heading(text)
        if heading:
            parts.append(heading)
    folder, _, name = path.rpartition("/")
    before = dict.fromkeys(_folder_words(folder)) if folder else None
    parts.extend(_words([*name.split("."), *symbols], before))
    return "\n".join(parts)


__all__ = [
    "body_start",
    "camel_parts",
    "compound_words",
    "display_title",
    "first_heading",
    "identifier_parts",
    "meta_terms",
    "meta_terms_of",
    "spellings",
    "symbol_names",
]
