"""Extract WikiLink concepts, title and creation date from a markdown note.

Pure functions: no I/O, no database.

A *concept* is the normalised target of a WikiLink ``[[target]]`` (or an embed ``![[target]]``).

Link syntax
    ``[[inner]]`` or ``![[inner]]``, not preceded by ``[`` and not followed by ``]``; ``inner``
    contains no ``[``, ``]`` or line break, so ``[[[x]]]`` is no link.  Backslash escapes are not
    interpreted around the brackets (``\\[[x]]`` is a link).

Target (``inner`` -> target), in this order
    1. Cut at the first ``|`` (Obsidian: ``[[target|alias]]``).  ``\\|``, as written inside
       markdown tables, counts as ``|``: the cut happens at that ``|`` and the backslash before it
       is dropped too, so ``[[a\\|b]]`` -> ``a``.  The target is the part *before* the pipe, so
       Dendron's alias-first ``[[label|target]]`` links yield the *label* as concept.
    2. Cut at the first ``#`` when non-blank text follows it (``[[Note#Heading]]``,
       ``[[Note#^block]]``, Dendron ``![[note#h,1:#*]]`` -> ``Note``/``note``); ``[[C#]]`` stays
       ``C#``.  ``[[#Heading]]`` (a link into the same note) thus has an empty target and is
       counted as dropped.
    3. Drop a trailing ``.md`` (case-insensitive, trailing blanks ignored).
    Targets whose extension names an attachment (:data:`ATTACHMENT_EXTENSIONS`,
    case-insensitive) are not concepts.

Normalisation (:func:`normalize`)
    Unicode NFC, strip, ``lower()``, every run of whitespace, ``_``, ``/``, ``\\`` and ``-``
    becomes a single ``-``, leading/trailing ``-`` removed.  Punctuation is kept (``c#``,
    ``node.js``).  Empty names and names over :data:`MAX_CONCEPT_LENGTH` characters are dropped
    (and counted).

What is not scanned
    YAML frontmatter, fenced and indented code blocks, inline code spans, HTML blocks and HTML
    comments, all as CommonMark (markdown-it-py, ``commonmark`` preset) defines them.  Everything
    else is scanned as written: other inline HTML tags are *not* masked, link reference
    definitions (``[x]: x.md "X"``, Foam footers) are scanned like text and never turn ``[[x]]``
    into an ordinary link, and a wikilink inside an inline link's destination counts (Logseq's
    ``[label]([[page]])``).  (A backtick inside an inline link's destination is taken to open a
    code span, where markdown-it would not; no real vault in the test corpora does that.)

Frontmatter (:func:`parse_frontmatter`)
    The text may start with a BOM.  The first line must be ``---`` (trailing blanks allowed) and a
    later line ``---`` or ``...`` closes it; unclosed means there is no frontmatter.  A closed
    block is *always* skipped as frontmatter, even when its YAML is invalid or not a mapping
    (then ``title``/``created`` are ``None`` and a warning is reported).  Frontmatter over
    :data:`MAX_FRONTMATTER_CHARS` characters, or nested more than 64 levels, is not parsed
    (warning).  YAML is only loaded with ``yaml.safe_load``; since that costs ~0.5 ms per note,
    the common simple shapes (``key: scalar`` lines, nested block mappings/sequences of plain or
    quoted scalars, ``|``/``>`` block scalars) are first read by a small subset reader that
    uses PyYAML's own resolver and constructors and gives exactly what ``safe_load`` gives
    (differential test); anything outside the subset goes to ``safe_load``.
    ``created``: a YAML date or datetime, or an ISO-8601 string; converted to UTC (naive values
    are taken as UTC, dates become midnight UTC).  Anything else (e.g. Dendron's epoch
    milliseconds) gives ``None`` and a warning.  ``title``: ``str()`` of a scalar.

Performance design of :func:`find_links` (the cheapest applicable exact method is used)
    1. Fast path: when the body provably contains no code and no HTML that could hold a link, a
       single regular expression scans it (:func:`_fast_path_ok`, :func:`_find_links_fast`).
    2. Medium path: when no block-level code/HTML can exist, code spans are masked per chunk of
       non-blank lines, if provably the same as per paragraph (:func:`_find_links_medium`).
    3. Otherwise a block classifier that ports markdown-it-py's block rules (without tokens)
       finds code/HTML lines and paragraph boundaries (:func:`_find_links_blocks`); inside
       paragraphs and headings, code spans and HTML comments are masked exactly as markdown-it's
       inline rules would find them.
    4. :func:`_find_links_slow` does the same using markdown-it-py itself (block parse with the
       core ``inline`` rule disabled); it is the reference and the fallback.
    All give identical results (differential tests, and over the real vaults).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from itertools import accumulate
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.common.html_re import HTML_TAG_RE
from markdown_it.common.utils import normalizeReference
from markdown_it.helpers import parseLinkDestination, parseLinkTitle
from markdown_it.rules_block.html_block import HTML_SEQUENCES
from markdown_it.rules_inline.autolink import AUTOLINK_RE, EMAIL_RE

from contextgraph.names import normalize

__all__ = [
    "ATTACHMENT_EXTENSIONS",
    "MAX_CONCEPT_LENGTH",
    "Frontmatter",
    "Link",
    "NoteFacts",
    "extract_note",
    "find_links",
    "is_valid_concept",
    "normalize",
    "parse_frontmatter",
]

MAX_CONCEPT_LENGTH = 200
MAX_FRONTMATTER_CHARS = 100_000
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

# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------

# normalize() lives in contextgraph.names (queries import it without the markdown parser).


def is_valid_concept(name: str) -> bool:
    """Return True if ``name`` normalises to a non-empty name of at most 200 characters."""
    n = normalize(name)
    return 0 < len(n) <= MAX_CONCEPT_LENGTH


def _is_attachment(target: str) -> bool:
    """Return True if the target names an attachment file."""
    t = target.rstrip()
    dot = t.rfind(".")
    return dot >= 0 and t[dot + 1 :].lower() in ATTACHMENT_EXTENSIONS


def _target_of(inner: str) -> str:
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
    if _is_attachment(target):
        return ""
    concept = normalize(target)
    return concept if len(concept) <= MAX_CONCEPT_LENGTH else ""


@dataclass(frozen=True)
class Link:
    """One WikiLink occurrence; offsets index the text given to :func:`find_links`."""

    start: int
    end: int
    target: str
    concept: str
    embed: bool


# `[[inner]]`, the `[[` not preceded by `[`, the `]]` not followed by `]`; a `!` before it
# makes an embed.  (Starting the pattern with the literal `[[` lets the regex engine skip
# ahead quickly; `(?!...)` after it checks the character before.)
_LINK_RE = re.compile(r"\[\[(?<!\[\[\[)[^\[\]\n\r]*\]\](?!\])")


def _scan(s: str, base: int, text: str, out: list[Link], pos: int = 0) -> None:
    """Append the links found in ``s[pos:]``; ``s[i]`` is ``text[base + i]``."""
    for m in _LINK_RE.finditer(s, pos):
        start = m.start()
        embed = start > 0 and s[start - 1] == "!"
        if embed:
            start -= 1
        out.append(_make_link(text, base + start, base + m.end(), embed))


def _resolve_inner(inner: str) -> tuple[str, str]:
    """Return (target, concept) for the text between the brackets."""
    target = _target_of(inner)
    return target, _concept_of(target)


_resolve_inner_cached = lru_cache(maxsize=8192)(_resolve_inner)  # names repeat a lot


def _make_link(text: str, start: int, end: int, embed: bool) -> Link:
    """Build a Link from its span in the original text."""
    inner = text[start + (3 if embed else 2) : end - 2]
    resolve = _resolve_inner_cached if len(inner) <= 2 * MAX_CONCEPT_LENGTH else _resolve_inner
    target, concept = resolve(inner)
    return Link(start, end, target, concept, embed)


# --------------------------------------------------------------------------------------------
# Frontmatter
# --------------------------------------------------------------------------------------------

_FM_OPEN_RE = re.compile(r"---[ \t]*(?:\r\n|\r|\n)")
_FM_CLOSE_RE = re.compile(r"[\n\r](?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|\Z)")


def _frontmatter_bounds(text: str) -> tuple[int, int, int] | None:
    """Return (yaml_start, yaml_end, body_start) of a closed frontmatter block, else None."""
    first = 1 if text.startswith("\ufeff") else 0
    opener = _FM_OPEN_RE.match(text, first)
    if opener is None:
        return None
    closer = _FM_CLOSE_RE.search(text, opener.end() - 1)  # from the opener's line break
    if closer is None:
        return None
    return opener.end(), max(opener.end(), closer.start() + 1), closer.end()


def _body_offset(text: str) -> int:
    """Return where link scanning starts: after the frontmatter, or after a BOM."""
    bounds = _frontmatter_bounds(text)
    if bounds is not None:
        return bounds[2]
    return 1 if text.startswith("\ufeff") else 0


@dataclass(frozen=True)
class Frontmatter:
    """What the frontmatter says; ``created`` is timezone-aware UTC."""

    title: str | None
    created: datetime | None
    body_start: int
    warning: str | None


# A deliberately small YAML subset, read exactly as yaml.safe_load reads it (checked by a
# differential test): block mappings (`key: value`, keys like identifiers) and block sequences
# (`- value`), nested by indentation (spaces only), whose scalars are empty, plain without
# indicators or comments, quoted without escapes, or, as mapping values, block scalars (`|`,
# `|-`, `>`, `>-`) of equally indented, non-blank lines.  Scalars are resolved with PyYAML's
# own resolver and constructors.  Anything else goes to yaml.safe_load.
_YAML_BAD_RE = re.compile(
    "[\t\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
)
_FLAT_KEY = r"[A-Za-z_][A-Za-z0-9_.-]*(?: [A-Za-z0-9_.-]+)*"  # words joined by single spaces
_YAML_KEY_RE = re.compile(rf"({_FLAT_KEY}):((?: .*)?)")
_FLAT_VALUE = (
    r"(?:[^\s\-?:,\[\]{}#&*!|>'\"%@`][^\s:]*(?:(?::(?=\S)| +(?=[^\s#]))[^\s:]*)*"  # plain
    r"|'(?:[^'\n]|'')*'"  # single-quoted
    r"|\"[^\"\\\n]*\")"  # double-quoted without escapes
)
_FLAT_LINE = rf"(?:{_FLAT_KEY}:(?: +{_FLAT_VALUE})?)? *"
_FLAT_YAML_RE = re.compile(rf"{_FLAT_LINE}(?:\n{_FLAT_LINE})*")
_FLAT_DATE_VALUE_RE = re.compile(r"^[^:\n]*: +([0-9]{4}-[^\n]*)", re.MULTILINE)
_FLOW_ITEM_BAD_RE = re.compile(r"[\[\]{}:#'\"]|^[-?,&*!|>%@`]|^$")
_DQ_ESCAPE_RE = re.compile(
    r"\\(?:([0abtnvfre \"\\/N_LP])|x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8}))"
)
_DQ_ESCAPES = {
    "0": "\0",
    "a": "\x07",
    "b": "\x08",
    "t": "\x09",
    "n": "\x0a",
    "v": "\x0b",
    "f": "\x0c",
    "r": "\x0d",
    "e": "\x1b",
    " ": "\x20",
    '"': '"',
    "\\": "\\",
    "/": "/",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_PLAIN_BAD_FIRST = frozenset("-?:,[]{}#&*!|>'\"%@`")
_BLOCK_SCALAR_HEADERS = frozenset({"|", "|-", ">", ">-"})
_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")
_WANTED_KEYS = ("title", "created")
_WANTED_LINES = tuple((key, f"\n{key}:", f"{key}:") for key in _WANTED_KEYS)
_SCALAR_TYPES = (str, int, float, bool, date)
_YAML_RESOLVER = yaml.resolver.Resolver()
_YAML_CONSTRUCTORS: dict[Any, Any] = yaml.constructor.SafeConstructor.yaml_constructors
_YAML_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
# First characters some implicit resolver applies to (all of them if one applies to any).
_RESOLVER_FIRST_CHARS: frozenset[str] | None = (
    frozenset(ch for ch in yaml.resolver.Resolver.yaml_implicit_resolvers if ch)
    if None not in yaml.resolver.Resolver.yaml_implicit_resolvers
    else None
)
_MAX_YAML_NESTING = 64


class _NotSimple(Exception):
    """The frontmatter is outside the simple subset."""


class _Plain(str):
    """A plain scalar read by _SimpleYaml, to be resolved later."""

    __slots__ = ()


class _SimpleYaml:
    """Recursive-descent reader for the simple subset; collects the wanted top-level keys."""

    __slots__ = ("checks", "lines", "n", "result")

    def __init__(self, source: str) -> None:
        self.lines = _LINE_BREAK_RE.split(source)
        self.n = len(self.lines)
        # Plain scalars are constructed only once the whole block is known to be in the
        # subset (constructing may fail, and PyYAML could read the block differently).
        self.result: dict[str, Any] = {}
        self.checks: list[str] = []

    def next_content(self, i: int) -> tuple[int, int]:
        """Skip blank and comment lines; return (index, indentation) of the next line."""
        lines = self.lines
        while i < self.n:
            content = lines[i].lstrip(" ")
            if content and content[0] != "#":
                return i, len(lines[i]) - len(content)
            i += 1
        return i, -1

    def mapping(self, i: int, indent: int, top: bool) -> int:
        """Read mapping entries at ``indent``; return the index of the first line after."""
        while True:
            i, width = self.next_content(i)
            if width < indent:
                return i
            if width > indent:
                raise _NotSimple
            m = _YAML_KEY_RE.fullmatch(self.lines[i], width)
            if m is None:
                raise _NotSimple
            key = m.group(1)
            wanted = top and key in _WANTED_KEYS
            value, i = self.value(i + 1, indent, m.group(2).strip(" "), wanted, in_mapping=True)
            if wanted:
                self.result[key] = value

    def sequence(self, i: int, indent: int) -> int:
        """Read sequence items at ``indent``; return the index of the first line after."""
        while True:
            i, width = self.next_content(i)
            if width != indent:
                if width > indent:
                    raise _NotSimple
                return i
            content = self.lines[i][width:]
            if content == "-":
                rest = ""
            elif content.startswith("- "):
                rest = content[2:].strip(" ")
                if rest.startswith("#"):
                    raise _NotSimple
            else:
                return i  # e.g. the next key of a mapping at the same indentation
            _, i = self.value(i + 1, indent, rest, False, in_mapping=False)

    def value(
        self, i: int, indent: int, rest: str, wanted: bool, *, in_mapping: bool
    ) -> tuple[Any, int]:
        """Read the value after ``key:`` or ``-`` (``rest`` is the rest of that line)."""
        if not rest:
            j, width = self.next_content(i)
            if width < 0 or width < indent or (width == indent and not in_mapping):
                return None, i
            line = self.lines[j]
            if line.startswith("- ", width) or (len(line) == width + 1 and line[width] == "-"):
                if width == indent and not in_mapping:
                    raise _NotSimple
                return [], self.sequence(j, width)
            if width == indent:
                return None, i
            if _YAML_KEY_RE.fullmatch(line, width) is None:
                raise _NotSimple  # e.g. a multi-line plain scalar
            return {}, self.mapping(j, width, False)
        if rest in _BLOCK_SCALAR_HEADERS:
            if not in_mapping:
                raise _NotSimple
            block: list[str] = []
            lines = self.lines
            first_width = 0
            while i < self.n and lines[i].startswith(" " * (indent + 1)):
                content = lines[i].lstrip(" ")
                width = len(lines[i]) - len(content)
                if not content or (first_width and width != first_width):
                    raise _NotSimple
                first_width = width
                block.append(content)
                i += 1
            if not block:
                raise _NotSimple
            text = (" " if rest[0] == ">" else "\n").join(block)
            if rest.endswith("-") or i == self.n:  # strip, or no line break after the last line
                return text, i
            return text + "\n", i
        if rest[0] == "'":
            inner = rest[1:-1]
            if len(rest) < 2 or rest[-1] != "'" or "'" in inner.replace("''", ""):
                raise _NotSimple
            return inner.replace("''", "'"), i
        if rest[0] == '"':
            return _double_quoted(rest), i
        if rest[0] == "[" and rest[-1] == "]":
            inner = rest[1:-1].strip(" ")
            for item in inner.split(",") if inner else ():
                item = item.strip(" ")
                if _FLOW_ITEM_BAD_RE.search(item):
                    raise _NotSimple
                self.checks.append(item)
            return [], i
        if rest[0] in _PLAIN_BAD_FIRST or ": " in rest or " #" in rest or rest[-1] == ":":
            raise _NotSimple
        self.checks.append(rest)  # also for wanted keys: a later duplicate may replace it
        return (_Plain(rest) if wanted else None), i


def _double_quoted(rest: str) -> str:
    """Decode a one-line double-quoted scalar (PyYAML's escapes); raise _NotSimple if unsure."""
    inner = rest[1:-1]
    if len(rest) < 2 or rest[-1] != '"':
        raise _NotSimple
    if "\\" not in inner:
        if '"' in inner:
            raise _NotSimple
        return inner
    parts: list[str] = []
    last = 0
    for m in _DQ_ESCAPE_RE.finditer(inner):
        plain = inner[last : m.start()]
        if "\\" in plain or '"' in plain:
            raise _NotSimple
        parts.append(plain)
        simple, *codes = m.groups()
        if simple is not None:
            parts.append(_DQ_ESCAPES[simple])
        else:
            parts.append(chr(int(next(c for c in codes if c is not None), 16)))
        last = m.end()
    tail = inner[last:]
    if "\\" in tail or '"' in tail:
        raise _NotSimple
    parts.append(tail)
    return "".join(parts)


def _resolve(value: str) -> str:
    """Return the implicit tag PyYAML gives a plain scalar."""
    tag: str = _YAML_RESOLVER.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    return tag


def _plain_scalar(value: str) -> Any:
    """Resolve and construct a plain scalar like PyYAML does."""
    if _RESOLVER_FIRST_CHARS is not None and value[0] not in _RESOLVER_FIRST_CHARS:
        return value  # no implicit resolver can apply: a str
    if value.isascii() and value.isdigit() and (value[0] != "0" or value == "0"):
        return int(value)  # what the int resolver and constructor give for plain decimals
    tag = _resolve(value)
    return _YAML_CONSTRUCTORS[tag](_YAML_CONSTRUCTOR, yaml.ScalarNode(tag, value))


def _check_plain(value: str) -> None:
    """Construct a plain scalar only where that can fail (timestamps), to fail like PyYAML."""
    if "0" <= value[0] <= "9" and _resolve(value) == _TIMESTAMP_TAG:
        _YAML_CONSTRUCTORS[_TIMESTAMP_TAG](
            _YAML_CONSTRUCTOR, yaml.ScalarNode(_TIMESTAMP_TAG, value)
        )


def _simple_yaml(source: str) -> dict[str, Any] | None:
    """Return the top-level ``title``/``created`` entries exactly as ``yaml.safe_load`` would.

    Return None for an empty document and raise _NotSimple outside the subset.  Values of other
    keys are only checked where constructing them could fail (timestamps).
    """
    if _YAML_BAD_RE.search(source):
        raise _NotSimple
    if "\r" in source:
        source = _normalise_newlines(source)
    if _FLAT_YAML_RE.fullmatch(source):
        # Every line is `key: scalar` or blank: look only at the lines that matter.
        if ":" not in source:
            return None
        for m in _FLAT_DATE_VALUE_RE.finditer(source):
            _check_plain(m.group(1).rstrip(" "))
        result: dict[str, Any] = {}
        for key, inner_line, first_line in _WANTED_LINES:
            at = source.rfind(inner_line)
            if at < 0 and not source.startswith(first_line):
                continue
            at += 1  # start of the (last) line with the key; 0 when it is the first line
            end = source.find("\n", at)
            result[key] = _flat_scalar(source[at + len(key) + 1 : end if end >= 0 else None])
        return result
    reader = _SimpleYaml(source)
    start, width = reader.next_content(0)
    if width < 0:
        return None
    if width > 0 or reader.mapping(start, 0, True) < reader.n:
        raise _NotSimple
    for value in reader.checks:
        _check_plain(value)
    return {
        key: _plain_scalar(value) if isinstance(value, _Plain) else value
        for key, value in reader.result.items()
    }


def _flat_scalar(rest: str) -> Any:
    """Construct a one-line scalar already checked by _FLAT_YAML_RE."""
    rest = rest.strip(" ")
    if not rest:
        return None
    if rest[0] == "'":
        return rest[1:-1].replace("''", "'")
    if rest[0] == '"':
        return rest[1:-1]
    return _plain_scalar(rest)


def _yaml_nesting(source: str) -> int:
    """Estimate (from above) how deeply the YAML nests: flow brackets plus line prefixes."""
    depth = deepest = 0
    for m in re.finditer(r"[\[\]{}]", source):
        depth += 1 if m.group() in "[{" else -1
        deepest = max(deepest, depth)
    prefix = max((len(m.group()) for m in re.finditer(r"(?m)^[ \t?:-]+", source)), default=0)
    return deepest + prefix


def _load_yaml(source: str) -> Any:
    """Load YAML safely, trying the exact simple-subset reader first."""
    try:
        return _simple_yaml(source)
    except _NotSimple:
        pass
    if _yaml_nesting(source) > _MAX_YAML_NESTING:
        raise ValueError("nested too deeply")
    return yaml.safe_load(source)


def _short_reason(exc: BaseException) -> str:
    """Return a one-line description of a YAML failure."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if isinstance(problem, str):
        reason = problem
        if mark is not None:
            reason += f" (line {mark.line + 1}, column {mark.column + 1})"
    else:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return reason[:120]


def _to_utc(value: object) -> datetime | str | None:
    """Convert a ``created`` value; a str result is the warning explaining the failure."""
    if value is None:
        return None
    try:
        if isinstance(value, datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                return value.replace(tzinfo=UTC)
            return value.astimezone(UTC)
        if isinstance(value, date):
            return datetime(value.year, value.month, value.day, tzinfo=UTC)
        if isinstance(value, int) and not isinstance(value, bool):
            # Epoch time, as Dendron writes it (milliseconds); seconds when it is too small
            # to be milliseconds of a date after 1973.
            seconds = value / 1000 if abs(value) >= 10**11 else value
            return datetime.fromtimestamp(seconds, UTC)
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.strip())
            except ValueError:
                return f"'created' is not an ISO-8601 date: {value.strip()[:40]!r}"
            return _to_utc(parsed)
    except (OverflowError, ValueError, OSError):
        return "'created' is out of range"
    return f"'created' has unsupported type {type(value).__name__}"


def _read_frontmatter(text: str) -> tuple[str | None, datetime | None, int, list[str]]:
    """Return title, created, body start and warnings."""
    bounds = _frontmatter_bounds(text)
    if bounds is None:
        return None, None, 0, []
    yaml_start, yaml_end, body_start = bounds
    if yaml_end - yaml_start > MAX_FRONTMATTER_CHARS:
        return None, None, body_start, [f"frontmatter too large ({yaml_end - yaml_start} chars)"]
    try:
        data = _load_yaml(text[yaml_start:yaml_end])
    except Exception as exc:  # yaml errors, RecursionError, ValueError from bad dates, ...
        return None, None, body_start, [f"invalid YAML frontmatter: {_short_reason(exc)}"]
    if data is None:
        return None, None, body_start, []
    if not isinstance(data, dict):
        kind = type(data).__name__
        return None, None, body_start, [f"invalid YAML frontmatter: not a mapping ({kind})"]
    warnings: list[str] = []
    title: str | None = None
    raw_title = data.get("title")
    if raw_title is not None:
        if isinstance(raw_title, _SCALAR_TYPES):
            title = str(raw_title)
        else:
            warnings.append(f"'title' is not a scalar ({type(raw_title).__name__})")
    created_or_warning = _to_utc(data.get("created"))
    created: datetime | None = None
    if isinstance(created_or_warning, str):
        warnings.append(created_or_warning)
    else:
        created = created_or_warning
    return title, created, body_start, warnings


def parse_frontmatter(text: str) -> Frontmatter:
    """Parse the leading YAML frontmatter leniently (bad YAML becomes a warning)."""
    title, created, body_start, warnings = _read_frontmatter(text)
    return Frontmatter(title, created, body_start, "; ".join(warnings) or None)


# --------------------------------------------------------------------------------------------
# Fast path
# --------------------------------------------------------------------------------------------

# Characters that may precede the first character of a line's content: indentation, block
# quote markers and list markers.
_PREFIX = r"[ \t>*+.)0-9-]*"
_HTML_LINE_RE = re.compile(rf"^{_PREFIX}<", re.MULTILINE)
_PREFIX_RE = re.compile(_PREFIX)


def _normalise_newlines(s: str) -> str:
    """Replace CRLF and lone CR by LF."""
    return s.replace("\r\n", "\n").replace("\r", "\n") if "\r" in s else s


def _fast_path_ok(text: str, start: int | None = None) -> bool:
    """Return True if the body provably holds no code or HTML that could contain a link."""
    if start is None:
        start = _body_offset(text)
    body = text[start:] if start else text
    if "`" in body or "~~~" in body or "<!--" in body:
        return False
    if "<" in body and _HTML_LINE_RE.search(_normalise_newlines(body)):
        return False
    return not (("\t" in body or "    " in body) and _indented_link_line(_normalise_newlines(body)))


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


def _find_links_fast(text: str, start: int | None = None) -> list[Link]:
    """Scan the whole body with one regex (valid only when :func:`_fast_path_ok`)."""
    if start is None:
        start = _body_offset(text)
    links: list[Link] = []
    _scan(text, 0, text, links, start)
    return links


# --------------------------------------------------------------------------------------------
# Shared machinery for the block-level paths
# --------------------------------------------------------------------------------------------


class _Body:
    """The body as markdown-it sees it (LF newlines, NUL replaced) plus an offset table."""

    __slots__ = ("line_ends", "line_starts", "lines", "orig_starts", "src")

    def __init__(self, text: str, start: int, *, truncate: bool) -> None:
        body = text[start:]
        src = _normalise_newlines(body)
        if "\0" in src:
            src = src.replace("\0", "\ufffd")
        if truncate:
            # Lines after the first blank line that follows the last `[[` cannot change how
            # any earlier line is classified: drop them.
            last = src.rfind("[[")
            blank = _BLANK_AFTER_RE.search(src, last) if last >= 0 else None
            if blank is not None:
                src = src[: blank.end()]
        self.src = src
        lines = src.split("\n")
        starts = list(accumulate([len(line) + 1 for line in lines], initial=0))
        starts.pop()
        ends = [s - 1 for s in starts[1:]]
        ends.append(len(src))
        self.lines = lines
        self.line_starts = starts
        self.line_ends = ends
        if "\r" in body:
            orig = [start]
            orig.extend(start + m.end() for m in _LINE_BREAK_RE.finditer(body))
            self.orig_starts = orig
        else:
            self.orig_starts = [start + s for s in starts]


_BLANK_AFTER_RE = re.compile(r"\n[ \t]*\n")
_INLINE_SPECIAL_RE = re.compile(r"[`\\<]")
_ANGLE_RE = re.compile(r"[<>]")
_MD = MarkdownIt("commonmark")


def _backtick_runs(s: str) -> dict[int, int]:
    """Map each backtick run length to the start of its last occurrence."""
    last: dict[int, int] = {}
    pos = s.find("`")
    n = len(s)
    while pos >= 0:
        end = pos + 1
        while end < n and s[end] == "`":
            end += 1
        last[end - pos] = pos
        pos = s.find("`", end)
    return last


def _angle(s: str, i: int, last: dict[str, int]) -> tuple[int, bool] | None:
    """At a ``<``: return (end, is_comment) of an autolink or inline HTML, else None.

    ``last`` caches the last position of each terminator (markdown-it's quick rejections).
    """

    def rfind(term: str) -> int:
        found = last.get(term)
        if found is None:
            found = last[term] = s.rfind(term)
        return found

    n = len(s)
    close = _ANGLE_RE.search(s, i + 1)  # an autolink ends at the first `>`, fails at a `<`
    if close is not None and close.group() == ">":
        gt = close.start()
        url = s[i + 1 : gt]
        if AUTOLINK_RE.search(url) is not None:
            if _MD.validateLink(_MD.normalizeLink(url)):
                return gt + 1, False
        elif EMAIL_RE.search(url) is not None and _MD.validateLink(
            _MD.normalizeLink("mailto:" + url)
        ):
            return gt + 1, False
    if i + 2 >= n:
        return None
    ch = s[i + 1]
    if ch not in "!?/" and not ("a" <= ch <= "z" or "A" <= ch <= "Z"):
        return None
    if s.startswith("<!--", i):
        last_gt = rfind(">")
        if last_gt < i + 4:
            return None
        if not s.startswith("<!-->", i) and not s.startswith("<!--->", i) and rfind("-->") < i + 4:
            return None
    elif s.startswith("<![CDATA[", i):
        if rfind("]]>") < i + 9:
            return None
    elif ch == "?":
        if rfind("?>") < i + 2:
            return None
    elif ch == "!":
        if rfind(">") < i + 3:
            return None
    elif rfind(">") < i + 2:
        return None
    m = HTML_TAG_RE.match(s, i)
    if m is None:
        return None
    return m.end(), s.startswith("<!--", i)


def _mask_inline(s: str) -> str:
    """Blank out (with newlines) inline code spans and HTML comments, as markdown-it finds them.

    Follows markdown-it's inline rule precedence for the characters that matter: a backslash
    escapes the next character, a backtick run opens a code span only if a run of the same
    length follows, and at ``<`` an autolink or an HTML tag/comment is consumed whole.
    """
    if "`" not in s and "<" not in s:
        return s
    return _mask_inline_checked(s)[0]


def _mask_inline_checked(s: str) -> tuple[str, bool]:
    """Return :func:`_mask_inline` of ``s`` and whether a consumed construct spans lines."""
    crosses = False
    regions: list[tuple[int, int]] = []
    runs: dict[int, int] | None = None
    terminators: dict[str, int] = {}
    pos = 0
    n = len(s)
    search = _INLINE_SPECIAL_RE.search
    while True:
        m = search(s, pos)
        if m is None:
            break
        i = m.start()
        c = s[i]
        if c == "\\":
            pos = i + 2
        elif c == "`":
            j = i + 1
            while j < n and s[j] == "`":
                j += 1
            length = j - i
            if runs is None:
                runs = _backtick_runs(s)
            pos = j
            if runs.get(length, -1) >= j:
                k = s.find("`", j)
                while k >= 0:
                    e = k + 1
                    while e < n and s[e] == "`":
                        e += 1
                    if e - k == length:
                        regions.append((i, e))
                        pos = e
                        crosses = crosses or s.find("\n", i, e) >= 0
                        break
                    k = s.find("`", e)
        else:
            found = _angle(s, i, terminators)
            if found is None:
                pos = i + 1
            else:
                pos, is_comment = found
                if is_comment:
                    regions.append((i, pos))
                crosses = crosses or s.find("\n", i, pos) >= 0
    if not regions:
        return s, crosses
    parts: list[str] = []
    last = 0
    for a, b in regions:
        parts.append(s[last:a])
        parts.append("\n" * (b - a))
        last = b
    parts.append(s[last:])
    return "".join(parts), crosses


# A group is one paragraph or heading: (first_line, end_line, start_col, end_col).  With
# start_col == -1 every line counts from after its container prefix to its end; otherwise the
# group is the single line first_line, columns [start_col, end_col).
_Group = tuple[int, int, int, int]


def _collect(
    text: str, body: _Body, nlines: int, covered: bytearray, groups: list[_Group]
) -> list[Link]:
    """Find links in paragraph/heading content (masked) and in lines outside any block."""
    src = body.src
    lines = body.lines
    starts = body.line_starts
    ends = body.line_ends
    orig = body.orig_starts
    groups.sort()
    firsts = [g[0] for g in groups]
    links: list[Link] = []
    wanted: list[int] = []  # indices of groups holding a `[[`
    pos = src.find("[[")
    while pos >= 0:
        line = bisect_right(starts, pos) - 1
        pos = src.find("[[", ends[line])
        if line >= nlines or not covered[line]:
            _scan(lines[line], orig[line], text, links)
            continue
        k = bisect_right(firsts, line) - 1
        if k >= 0 and groups[k][1] > line and (not wanted or wanted[-1] != k):
            wanted.append(k)
    for k in wanted:
        first, end, col, end_col = groups[k]
        if col >= 0:
            _scan(_mask_inline(lines[first][col:end_col]), orig[first] + col, text, links)
            continue
        if end == first + 1:
            piece = lines[first]
            cut = len(piece) - len(piece.lstrip(" \t>"))
            _scan(_mask_inline(piece[cut:] if cut else piece), orig[first] + cut, text, links)
            continue
        pieces: list[str] = []
        bases: list[int] = []  # offset of each piece in the joined string
        origins: list[int] = []  # original offset of each piece's first character
        offset = 0
        for line in range(first, end):
            piece = lines[line]
            cut = len(piece) - len(piece.lstrip(" \t>"))
            if cut:
                piece = piece[cut:]
            pieces.append(piece)
            bases.append(offset)
            origins.append(orig[line] + cut)
            offset += len(piece) + 1
        joined = _mask_inline("\n".join(pieces))
        for m in _LINK_RE.finditer(joined):
            start = m.start()
            embed = start > 0 and joined[start - 1] == "!"
            if embed:
                start -= 1
            j = bisect_right(bases, start) - 1
            shift = origins[j] - bases[j]
            links.append(_make_link(text, start + shift, m.end() + shift, embed))
    links.sort(key=lambda link: link.start)
    return links


# --------------------------------------------------------------------------------------------
# Medium path: code can only be inline
# --------------------------------------------------------------------------------------------

_FENCE_LINE_RE = re.compile(rf"^{_PREFIX}(?:```|~~~)", re.MULTILINE)
_DEFINITION_LINE_RE = re.compile(rf"^{_PREFIX}\[(?!\[)", re.MULTILINE)
_LONG_PREFIX_RE = re.compile(rf"^{_PREFIX[:-1]}{{5,}}+(?=\S)", re.MULTILINE)
_CHUNK_SEP_RE = re.compile(r"\n[ \t]*\n")


def _blank_top_level_fences(body: str) -> str | None:
    """Replace fenced code blocks by spaces, if every fence line starts at column 0.

    A line starting with a fence at column 0 is always at the top level: it ends any list
    item or block quote (it is no lazy continuation), so fences pair up in order.  Returns
    None when some fence line is indented or inside a container (then it gives up).
    """
    spans: list[tuple[int, int]] = []
    open_at = -1
    marker = ""
    length = 0
    for m in _FENCE_LINE_RE.finditer(body):
        line_start = m.start()
        if m.end() - line_start != 3:
            return None  # a prefix before the fence
        line_end = body.find("\n", line_start)
        line = body[line_start : line_end if line_end >= 0 else None]
        ch = line[0]
        run = len(line) - len(line.lstrip(ch))
        if open_at < 0:
            if ch == "`" and "`" in line[run:]:
                continue  # no fence: inline code in a paragraph
            open_at, marker, length = line_start, ch, run
        elif ch == marker and run >= length and not line[run:].strip(" \t"):
            spans.append((open_at, len(body) if line_end < 0 else line_end))
            open_at = -1
    if open_at >= 0:
        spans.append((open_at, len(body)))  # an unclosed fence runs to the end
    parts: list[str] = []
    last = 0
    for a, b in spans:
        parts.append(body[last:a])
        parts.append("\n".join(" " * len(line) for line in body[a:b].split("\n")))
        last = b
    parts.append(body[last:])
    return "".join(parts)


def _find_links_medium(text: str, start: int | None = None) -> list[Link] | None:
    """Find links without a block parse when only inline code can hide them; None if unsure.

    It applies when the body (LF line ends) has, outside fenced code blocks that all start at
    column 0, no other fence line, no HTML block start, no HTML comment, no link reference
    definition, no line with a link and an indented prefix, and no container nesting deep
    enough to reach markdown-it's nesting limit: then every line with a link outside the
    fences is paragraph or heading text.  Code spans are masked per chunk of non-blank lines
    (a superset of a paragraph); if no code span or HTML tag of such a chunk crosses a line
    end, the result is the same as masking each paragraph, else it gives up.
    """
    if start is None:
        start = _body_offset(text)
    body = text[start:]
    if "\r" in body:
        return None
    if "```" in body or "~~~" in body:
        blanked = _blank_top_level_fences(body)
        if blanked is None:
            return None
        body = blanked  # same offsets, fenced code replaced by spaces
    if "<!--" in body:
        return None
    if "<" in body and _HTML_LINE_RE.search(body):
        return None
    if "]:" in body and _DEFINITION_LINE_RE.search(body):
        return None
    if ("\t" in body or "    " in body) and _indented_link_line(body):
        return None
    for m in _LONG_PREFIX_RE.finditer(body):  # 20 columns: room for 20 nested containers
        if len(m.group()) + 3 * m.group().count("\t") >= 20:
            return None
    links: list[Link] = []
    chunk_start = 0
    for sep in [*_CHUNK_SEP_RE.finditer(body), None]:
        chunk_end = len(body) if sep is None else sep.start()
        if body.find("[[", chunk_start, chunk_end) >= 0:
            chunk = body[chunk_start:chunk_end]
            if "`" in chunk or "<" in chunk:
                chunk, crosses = _mask_inline_checked(chunk)
                if crosses:
                    return None
            _scan(chunk, start + chunk_start, text, links)
        if sep is not None:
            chunk_start = sep.end()
    return links


# --------------------------------------------------------------------------------------------
# Slow path: markdown-it-py
# --------------------------------------------------------------------------------------------

_MD_BLOCKS = MarkdownIt("commonmark")
_MD_BLOCKS.core.ruler.disable("inline")


def _find_links_slow(text: str, start: int | None = None) -> list[Link]:
    """Find links using markdown-it-py's block parse (the reference implementation)."""
    if start is None:
        start = _body_offset(text)
    body = _Body(text, start, truncate=False)
    src = body.src
    tokens = _MD_BLOCKS.parse(src)
    nlines = len(body.line_starts)
    covered = bytearray(nlines + 1)
    groups: list[_Group] = []
    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        a, b = tok.map
        kind = tok.type
        if kind in ("fence", "code_block", "html_block", "hr"):
            covered[a:b] = b"\x01" * (b - a)
        elif kind == "paragraph_open":
            covered[a:b] = b"\x01" * (b - a)
            groups.append((a, b, -1, -1))
        elif kind == "heading_open":
            covered[a:b] = b"\x01" * (b - a)
            inline = tokens[i + 1]
            if tok.markup in ("=", "-"):  # setext: the content lines, underline excluded
                ia, ib = inline.map or (a, b - 1)
                groups.append((ia, ib, -1, -1))
            elif inline.content:
                line_text = src[body.line_starts[a] : body.line_ends[a]]
                hashes = line_text.index("#")
                while hashes < len(line_text) and line_text[hashes] == "#":
                    hashes += 1
                col = line_text.find(inline.content, hashes)
                if col >= 0:
                    groups.append((a, a + 1, col, col + len(inline.content)))
    return _collect(text, body, nlines, covered, groups)


# --------------------------------------------------------------------------------------------
# Block classifier: markdown-it-py's block rules, ported without tokens
# --------------------------------------------------------------------------------------------

_MAX_NESTING = 20  # markdown-it's `maxNesting` in the commonmark preset
_FENCE_CHARS = frozenset("`~")
_HR_CHARS = frozenset("*-_")
_BULLET_CHARS = frozenset("*-+")
_DIGITS = frozenset("0123456789")
_TERMINATOR_CHARS = frozenset("`~>*-_+<#0123456789")
_BLOCK_START_CHARS = _TERMINATOR_CHARS | {"["}
_LIST_TERMINATOR_CHARS = frozenset("`~>*-_")
_BLANK_CHARS = frozenset(" \t")


class _Blocks:
    """A token-free port of markdown-it-py's block parser (commonmark preset).

    It records which lines belong to a leaf block (``covered``) and the line ranges of
    paragraphs and headings (``groups``).  The rules mirror ``markdown_it/rules_block``
    one-to-one, including their quirks; only the dispatch is faster (by first character).
    """

    __slots__ = (
        "bMarks",
        "blkIndent",
        "bsCount",
        "covered",
        "eMarks",
        "groups",
        "level",
        "line",
        "lineMax",
        "listIndent",
        "parentType",
        "sCount",
        "src",
        "tShift",
    )

    def __init__(self, body: _Body) -> None:
        src = body.src
        lines = body.lines
        n = len(lines)
        if n and (src.endswith("\n") or not lines[-1].strip(" \t")):
            n -= 1  # no line after a final LF; no marker for a final blank line without LF
        b_marks = body.line_starts[:n]
        e_marks = body.line_ends[:n]
        t_shift = [
            len(line) - len(line.lstrip(" \t")) if line[:1] in _BLANK_CHARS else 0
            for line in lines[:n]
        ]
        s_count = t_shift[:]
        for i, line in enumerate(lines[:n]):
            if t_shift[i] and "\t" in line[: t_shift[i]]:
                col = 0
                for ch in line[: t_shift[i]]:
                    col = col + 4 - col % 4 if ch == "\t" else col + 1
                s_count[i] = col
        length = len(src)
        b_marks.append(length)
        e_marks.append(length)
        t_shift.append(0)
        s_count.append(0)
        self.src = src
        self.bMarks = b_marks
        self.eMarks = e_marks
        self.tShift = t_shift
        self.sCount = s_count
        self.bsCount = [0] * (n + 1)
        self.lineMax = n
        self.blkIndent = 0
        self.line = 0
        self.listIndent = -1
        self.parentType = "root"
        self.level = 0
        self.covered = bytearray(n + 1)
        self.groups: list[_Group] = []

    # -- helpers ---------------------------------------------------------------------------

    def _cover(self, a: int, b: int) -> None:
        self.covered[a:b] = b"\x01" * (b - a)

    def _is_empty(self, line: int) -> bool:
        return self.bMarks[line] + self.tShift[line] >= self.eMarks[line]

    def _is_code(self, line: int) -> bool:
        return self.sCount[line] - self.blkIndent >= 4

    def _skip_spaces(self, pos: int) -> int:
        src = self.src
        n = len(src)
        while pos < n and src[pos] in " \t":
            pos += 1
        return pos

    def _skip_chars(self, pos: int, ch: str) -> int:
        src = self.src
        n = len(src)
        while pos < n and src[pos] == ch:
            pos += 1
        return pos

    def _terminates(self, line: int, end_line: int, list_chain: bool = False) -> bool:
        """Run the terminator rules (``paragraph``/``reference``/``blockquote`` or ``list``).

        Silent mode of fence, blockquote, hr, list, html_block and heading, inlined.
        """
        src = self.src
        pos = self.bMarks[line] + self.tShift[line]
        maximum = self.eMarks[line]
        if pos >= maximum:
            return False
        ch = src[pos]
        if ch not in _TERMINATOR_CHARS:
            return False
        s_count = self.sCount[line]
        if s_count - self.blkIndent >= 4:
            return False  # every terminator rule refuses an indented code line
        if ch == "`" or ch == "~":
            rest = src[pos:maximum]
            run = len(rest) - len(rest.lstrip(ch))
            return run >= 3 and not (ch == "`" and "`" in rest[run:])
        if ch == ">":
            return True
        if ch in _HR_CHARS:
            rest = src[pos:maximum]
            if rest.count(ch) >= 3 and not rest.replace(ch, "").strip(" \t"):
                return True
        if list_chain:
            return False
        if ch in _BULLET_CHARS or ch in _DIGITS:
            if self.listIndent >= 0 and s_count - self.listIndent >= 4 and s_count < self.blkIndent:
                return False
            terminating_paragraph = self.parentType == "paragraph" and s_count >= self.blkIndent
            if ch in _DIGITS:
                after = self._skip_ordered(line)
                if after < 0:
                    return False
                if terminating_paragraph and int(src[pos : after - 1]) != 1:
                    return False
            else:
                after = pos + 1
                if after < maximum and src[after] not in " \t":
                    return False
            return not (terminating_paragraph and not src[after:maximum].strip(" \t"))
        if ch == "<":
            return self._html_block(line, end_line, True)
        return ch == "#" and self._heading(line, end_line, True)

    # -- tokenizer -------------------------------------------------------------------------

    def tokenize(self, start_line: int, end_line: int) -> None:
        """Classify lines in [start_line, end_line), like ``ParserBlock.tokenize``."""
        b_marks = self.bMarks
        t_shift = self.tShift
        e_marks = self.eMarks
        s_count = self.sCount
        src = self.src
        line = start_line
        while line < end_line:
            line_max = self.lineMax
            while line < line_max and b_marks[line] + t_shift[line] >= e_marks[line]:
                line += 1
            self.line = line
            if line >= end_line:
                break
            blk_indent = self.blkIndent
            if s_count[line] < blk_indent:
                break
            if self.level >= _MAX_NESTING:
                self.line = end_line
                break
            # The rules in upstream order; each is tried only if the first character fits.
            if s_count[line] - blk_indent >= 4:
                self._code(line, end_line)
            else:
                ch = src[b_marks[line] + t_shift[line]]
                if ch not in _BLOCK_START_CHARS or not (
                    (ch in _FENCE_CHARS and self._fence(line, end_line, False))
                    or (ch == ">" and self._blockquote(line, end_line, False))
                    or (ch in _HR_CHARS and self._hr(line, end_line, False))
                    or (
                        (ch in _BULLET_CHARS or ch in _DIGITS) and self._list(line, end_line, False)
                    )
                    or (ch == "[" and self._reference(line, end_line, False))
                    or (ch == "<" and self._html_block(line, end_line, False))
                    or (ch == "#" and self._heading(line, end_line, False))
                ):
                    self._paragraph(line, end_line)
            line = self.line
            if line < end_line and b_marks[line] + t_shift[line] >= e_marks[line]:
                line += 1
                self.line = line

    # -- rules -----------------------------------------------------------------------------

    def _code(self, start_line: int, end_line: int) -> None:
        last = next_line = start_line + 1
        while next_line < end_line:
            if self._is_empty(next_line):
                next_line += 1
                continue
            if self._is_code(next_line):
                next_line += 1
                last = next_line
                continue
            break
        self.line = last
        self._cover(start_line, last)

    def _fence(self, start_line: int, end_line: int, silent: bool) -> bool:
        src = self.src
        pos = self.bMarks[start_line] + self.tShift[start_line]
        maximum = self.eMarks[start_line]
        if self._is_code(start_line):
            return False
        if pos + 3 > maximum:
            return False
        marker = src[pos]
        if marker not in _FENCE_CHARS:
            return False
        mem = pos
        pos = self._skip_chars(pos, marker)
        length = pos - mem
        if length < 3:
            return False
        if marker == "`" and "`" in src[pos:maximum]:
            return False
        if silent:
            return True
        next_line = start_line
        have_end = False
        b_marks = self.bMarks
        t_shift = self.tShift
        e_marks = self.eMarks
        n = len(src)
        while True:
            next_line += 1
            if next_line >= end_line:
                break
            pos = mem = b_marks[next_line] + t_shift[next_line]
            maximum = e_marks[next_line]
            if pos < maximum and self.sCount[next_line] < self.blkIndent:
                break
            if pos >= n:
                break
            if src[pos] != marker:
                continue
            if self._is_code(next_line):
                continue
            pos = self._skip_chars(pos, marker)
            if pos - mem < length:
                continue
            pos = self._skip_spaces(pos)
            if pos < maximum:
                continue
            have_end = True
            break
        self.line = next_line + (1 if have_end else 0)
        self._cover(start_line, self.line)
        return True

    def _quote_line(self, line: int) -> tuple[int, int, int, int, bool]:
        """Consume ``>`` and the optional space; return new (bMark, bsCount, sCount, tShift, empty).

        Shared by the first and the following lines of a block quote (same code upstream).
        """
        src = self.src
        pos = self.bMarks[line] + self.tShift[line] + 1
        maximum = self.eMarks[line]
        initial = offset = self.sCount[line] + 1
        next_char = src[pos] if pos < len(src) else None
        adjust_tab = False
        if next_char == " ":
            pos += 1
            initial += 1
            offset += 1
            space_after_marker = True
        elif next_char == "\t":
            space_after_marker = True
            if (self.bsCount[line] + offset) % 4 == 3:
                pos += 1
                initial += 1
                offset += 1
            else:
                adjust_tab = True
        else:
            space_after_marker = False
        b_mark = pos
        bs = self.bsCount[line]
        while pos < maximum:
            ch = src[pos]
            if ch == "\t":
                offset += 4 - (offset + bs + (1 if adjust_tab else 0)) % 4
            elif ch == " ":
                offset += 1
            else:
                break
            pos += 1
        new_bs = self.sCount[line] + 1 + (1 if space_after_marker else 0)
        return b_mark, new_bs, offset - initial, pos - b_mark, pos >= maximum

    def _blockquote(self, start_line: int, end_line: int, silent: bool) -> bool:
        src = self.src
        b_marks = self.bMarks
        t_shift = self.tShift
        s_count = self.sCount
        bs_count = self.bsCount
        old_line_max = self.lineMax
        pos = b_marks[start_line] + t_shift[start_line]
        if self._is_code(start_line):
            return False
        if pos >= len(src) or src[pos] != ">":
            return False
        if silent:
            return True
        saved: list[tuple[int, int, int, int]] = []
        b_mark, new_bs, new_s, new_t, last_line_empty = self._quote_line(start_line)
        saved.append(
            (b_marks[start_line], t_shift[start_line], s_count[start_line], bs_count[start_line])
        )
        b_marks[start_line] = b_mark
        bs_count[start_line] = new_bs
        s_count[start_line] = new_s
        t_shift[start_line] = new_t
        old_parent_type = self.parentType
        self.parentType = "blockquote"
        next_line = start_line + 1
        while next_line < end_line:
            is_outdented = s_count[next_line] < self.blkIndent
            pos = b_marks[next_line] + t_shift[next_line]
            maximum = self.eMarks[next_line]
            if pos >= maximum:
                break
            if src[pos] == ">" and not is_outdented:
                b_mark, new_bs, new_s, new_t, last_line_empty = self._quote_line(next_line)
                saved.append(
                    (
                        b_marks[next_line],
                        t_shift[next_line],
                        s_count[next_line],
                        bs_count[next_line],
                    )
                )
                b_marks[next_line] = b_mark
                bs_count[next_line] = new_bs
                s_count[next_line] = new_s
                t_shift[next_line] = new_t
                next_line += 1
                continue
            if last_line_empty:
                break
            if self._terminates(next_line, end_line):
                self.lineMax = next_line
                if self.blkIndent != 0:
                    saved.append(
                        (
                            b_marks[next_line],
                            t_shift[next_line],
                            s_count[next_line],
                            bs_count[next_line],
                        )
                    )
                    s_count[next_line] -= self.blkIndent
                break
            saved.append(
                (b_marks[next_line], t_shift[next_line], s_count[next_line], bs_count[next_line])
            )
            s_count[next_line] = -1
            next_line += 1
        old_indent = self.blkIndent
        self.blkIndent = 0
        self.level += 1
        self.tokenize(start_line, next_line)
        self.level -= 1
        self.lineMax = old_line_max
        self.parentType = old_parent_type
        for i, (b, t, s, bs) in enumerate(saved):
            line = start_line + i
            b_marks[line] = b
            t_shift[line] = t
            s_count[line] = s
            bs_count[line] = bs
        self.blkIndent = old_indent
        return True

    def _hr(self, start_line: int, end_line: int, silent: bool) -> bool:
        pos = self.bMarks[start_line] + self.tShift[start_line]
        if self.sCount[start_line] - self.blkIndent >= 4:
            return False
        rest = self.src[pos : self.eMarks[start_line]]
        marker = rest[:1]
        # At least 3 markers, and nothing but markers, spaces and tabs.
        if marker not in _HR_CHARS or rest.count(marker) < 3:
            return False
        if rest.replace(marker, "").strip(" \t"):
            return False
        if silent:
            return True
        self.line = start_line + 1
        self._cover(start_line, start_line + 1)
        return True

    def _skip_bullet(self, line: int) -> int:
        src = self.src
        pos = self.bMarks[line] + self.tShift[line]
        maximum = self.eMarks[line]
        if pos >= len(src):
            return -1
        marker = src[pos]
        pos += 1
        if marker not in _BULLET_CHARS:
            return -1
        if pos < maximum and src[pos] not in " \t":
            return -1
        return pos

    def _skip_ordered(self, line: int) -> int:
        src = self.src
        start = pos = self.bMarks[line] + self.tShift[line]
        maximum = self.eMarks[line]
        if pos + 1 >= maximum:
            return -1
        if src[pos] not in _DIGITS:
            return -1
        pos += 1
        while True:
            if pos >= maximum:
                return -1
            ch = src[pos]
            pos += 1
            if ch in _DIGITS:
                if pos - start >= 10:
                    return -1
                continue
            if ch in ").":
                break
            return -1
        if pos < maximum and src[pos] not in " \t":
            return -1
        return pos

    def _list(self, start_line: int, end_line: int, silent: bool) -> bool:
        src = self.src
        b_marks = self.bMarks
        t_shift = self.tShift
        s_count = self.sCount
        is_terminating_paragraph = False
        if self._is_code(start_line):
            return False
        if (
            self.listIndent >= 0
            and s_count[start_line] - self.listIndent >= 4
            and s_count[start_line] < self.blkIndent
        ):
            return False
        if silent and self.parentType == "paragraph" and s_count[start_line] >= self.blkIndent:
            is_terminating_paragraph = True
        pos_after_marker = self._skip_ordered(start_line)
        if pos_after_marker >= 0:
            is_ordered = True
            first = b_marks[start_line] + t_shift[start_line]
            if is_terminating_paragraph and int(src[first : pos_after_marker - 1]) != 1:
                return False
        else:
            pos_after_marker = self._skip_bullet(start_line)
            if pos_after_marker < 0:
                return False
            is_ordered = False
        if (
            is_terminating_paragraph
            and self._skip_spaces(pos_after_marker) >= self.eMarks[start_line]
        ):
            return False
        marker_char = src[pos_after_marker - 1]
        if silent:
            return True
        self.level += 1
        next_line = start_line
        old_parent_type = self.parentType
        self.parentType = "list"
        while next_line < end_line:
            pos = pos_after_marker
            maximum = self.eMarks[next_line]
            initial = offset = (
                s_count[next_line] + pos_after_marker - (b_marks[start_line] + t_shift[start_line])
            )
            bs = self.bsCount[next_line]
            while pos < maximum:
                ch = src[pos]
                if ch == "\t":
                    offset += 4 - (offset + bs) % 4
                elif ch == " ":
                    offset += 1
                else:
                    break
                pos += 1
            content_start = pos
            indent_after_marker = 1 if content_start >= maximum else offset - initial
            if indent_after_marker > 4:
                indent_after_marker = 1
            indent = initial + indent_after_marker
            self.level += 1
            old_t_shift = t_shift[start_line]
            old_s_count = s_count[start_line]
            old_list_indent = self.listIndent
            self.listIndent = self.blkIndent
            self.blkIndent = indent
            t_shift[start_line] = content_start - b_marks[start_line]
            s_count[start_line] = offset
            if content_start >= maximum and self._is_empty(start_line + 1):
                self.line = min(self.line + 2, end_line)
            else:
                self.tokenize(start_line, end_line)
            self.blkIndent = self.listIndent
            self.listIndent = old_list_indent
            t_shift[start_line] = old_t_shift
            s_count[start_line] = old_s_count
            self.level -= 1
            next_line = start_line = self.line
            if next_line >= end_line:
                break
            blk_indent = self.blkIndent
            if s_count[next_line] < blk_indent or s_count[next_line] - blk_indent >= 4:
                break
            first = b_marks[next_line] + t_shift[next_line]
            ch = src[first] if first < len(src) else ""
            if ch in _LIST_TERMINATOR_CHARS and self._terminates(next_line, end_line, True):
                break
            if is_ordered:
                pos_after_marker = self._skip_ordered(next_line)
            elif ch in _BULLET_CHARS and (
                first + 1 >= self.eMarks[next_line] or src[first + 1] in " \t"
            ):
                pos_after_marker = first + 1
            else:
                break
            if pos_after_marker < 0 or marker_char != src[pos_after_marker - 1]:
                break
        self.level -= 1
        self.line = next_line
        self.parentType = old_parent_type
        return True

    def _next_reference_line(self, next_line: int) -> str | None:
        """``getNextLine`` of the reference rule."""
        if next_line >= self.lineMax or self._is_empty(next_line):
            return None
        is_continuation = self._is_code(next_line) or self.sCount[next_line] < 0
        if not is_continuation:
            old_parent_type = self.parentType
            self.parentType = "reference"
            terminate = self._terminates(next_line, self.lineMax)
            self.parentType = old_parent_type
            if terminate:
                return None
        pos = self.bMarks[next_line] + self.tShift[next_line]
        return self.src[pos : self.eMarks[next_line] + 1]

    def _reference(self, start_line: int, end_line: int, silent: bool) -> bool:
        src = self.src
        pos = self.bMarks[start_line] + self.tShift[start_line]
        maximum = self.eMarks[start_line]
        next_line = start_line + 1
        if self._is_code(start_line):
            return False
        if src[pos] != "[":
            return False
        # Quick rejection when the label closes on this line without escapes before it.
        close = src.find("]", pos, maximum)
        if (
            close > 0
            and src.find("\\", pos, close) < 0
            and (src.find("[", pos + 1, close) >= 0 or src[close + 1 : close + 2] != ":")
        ):
            return False
        string = src[pos : maximum + 1]
        maximum = len(string)
        label_end = -1
        pos = 1
        while pos < maximum:
            ch = string[pos]
            if ch == "[":
                return False
            if ch == "]":
                label_end = pos
                break
            if ch == "\n":
                more = self._next_reference_line(next_line)
                if more is not None:
                    string += more
                    maximum = len(string)
                    next_line += 1
            elif ch == "\\":
                pos += 1
                if pos < maximum and string[pos] == "\n":
                    more = self._next_reference_line(next_line)
                    if more is not None:
                        string += more
                        maximum = len(string)
                        next_line += 1
            pos += 1
        if label_end < 0 or string[label_end + 1 : label_end + 2] != ":":
            return False
        pos = label_end + 2
        while pos < maximum:
            ch = string[pos]
            if ch == "\n":
                more = self._next_reference_line(next_line)
                if more is not None:
                    string += more
                    maximum = len(string)
                    next_line += 1
            elif ch not in " \t":
                break
            pos += 1
        dest = parseLinkDestination(string, pos, maximum)
        if not dest.ok:
            return False
        if not _MD.validateLink(_MD.normalizeLink(dest.str)):
            return False
        pos = dest.pos
        dest_end_pos = pos
        dest_end_line = next_line
        start = pos
        while pos < maximum:
            ch = string[pos]
            if ch == "\n":
                more = self._next_reference_line(next_line)
                if more is not None:
                    string += more
                    maximum = len(string)
                    next_line += 1
            elif ch not in " \t":
                break
            pos += 1
        title_res = parseLinkTitle(string, pos, maximum, None)
        while title_res.can_continue:
            more = self._next_reference_line(next_line)
            if more is None:
                break
            string += more
            pos = maximum
            maximum = len(string)
            next_line += 1
            title_res = parseLinkTitle(string, pos, maximum, title_res)
        title = ""
        if pos < maximum and start != pos and title_res.ok:
            title = title_res.str
            pos = title_res.pos
        else:
            pos = dest_end_pos
            next_line = dest_end_line
        while pos < maximum and string[pos] in " \t":
            pos += 1
        if pos < maximum and string[pos] != "\n" and title:
            title = ""
            pos = dest_end_pos
            next_line = dest_end_line
            while pos < maximum and string[pos] in " \t":
                pos += 1
        if pos < maximum and string[pos] != "\n":
            return False
        if not normalizeReference(string[1:label_end]):
            return False
        if silent:
            return True
        self.line = next_line
        return True

    def _html_block(self, start_line: int, end_line: int, silent: bool) -> bool:
        src = self.src
        pos = self.bMarks[start_line] + self.tShift[start_line]
        maximum = self.eMarks[start_line]
        if self._is_code(start_line):
            return False
        if pos >= len(src) or src[pos] != "<":
            return False
        line_text = src[pos:maximum]
        seq = next((seq for seq in HTML_SEQUENCES if seq[0].search(line_text)), None)
        if seq is None:
            return False
        closer, can_terminate = seq[1], seq[2]
        if silent:
            return bool(can_terminate)
        next_line = start_line + 1
        ends_on_blank_line = bool(closer.search(""))
        if not closer.search(line_text):
            while next_line < end_line:
                if self.sCount[next_line] < self.blkIndent and (
                    ends_on_blank_line or not self._is_empty(next_line)
                ):
                    break
                pos = self.bMarks[next_line] + self.tShift[next_line]
                line_text = src[pos : self.eMarks[next_line]]
                if closer.search(line_text):
                    if line_text:
                        next_line += 1
                    break
                next_line += 1
        self.line = next_line
        self._cover(start_line, next_line)
        return True

    def _heading(self, start_line: int, end_line: int, silent: bool) -> bool:
        src = self.src
        pos = self.bMarks[start_line] + self.tShift[start_line]
        maximum = self.eMarks[start_line]
        if self._is_code(start_line):
            return False
        if pos >= maximum or src[pos] != "#":
            return False
        level = 1
        pos += 1
        while pos < maximum and src[pos] == "#" and level <= 6:
            level += 1
            pos += 1
        if level > 6 or (pos < maximum and src[pos] not in " \t"):
            return False
        if silent:
            return True
        # Cut tails like '    ###  ' from the end of the line.
        end = maximum
        while end > pos and src[end - 1] in " \t":
            end -= 1
        tmp = end
        while tmp > pos and src[tmp - 1] == "#":
            tmp -= 1
        if tmp > pos and src[tmp - 1] in " \t":
            end = tmp
        self.line = start_line + 1
        self._cover(start_line, start_line + 1)
        line_start = src.rfind("\n", 0, pos) + 1
        self.groups.append((start_line, start_line + 1, pos - line_start, end - line_start))
        return True

    def _paragraph(self, start_line: int, end_line: int) -> None:
        """``lheading`` followed, if no underline is found, by ``paragraph`` (merged scans)."""
        src = self.src
        b_marks = self.bMarks
        t_shift = self.tShift
        e_marks = self.eMarks
        s_count = self.sCount
        blk_indent = self.blkIndent
        # lheading
        old_parent_type = self.parentType
        self.parentType = "paragraph"
        next_line = start_line + 1
        underline = False
        while next_line < end_line:
            pos = b_marks[next_line] + t_shift[next_line]
            maximum = e_marks[next_line]
            if pos >= maximum:
                break  # empty line
            sc = s_count[next_line]
            if sc - blk_indent > 3:
                next_line += 1
                continue
            ch = src[pos]
            if sc >= blk_indent and (ch == "-" or ch == "="):
                run = src[pos:maximum].rstrip(" \t")  # a run of the marker, then blanks
                if run.count(ch) == len(run):
                    underline = True
                    break
            if sc < 0:
                next_line += 1
                continue
            if ch in _TERMINATOR_CHARS and self._terminates(next_line, end_line):
                break
            next_line += 1
        if underline:
            self.line = next_line + 1
            self._cover(start_line, next_line + 1)
            self.groups.append((start_line, next_line, -1, -1))
            self.parentType = old_parent_type
            return
        # paragraph; the parent type stays "paragraph", as upstream's lheading leaves it.
        # The scan above stopped at an empty line or a terminator (next_line < end_line) or
        # at end_line; only in the last case can the paragraph, bounded by lineMax, go on.
        line_max = self.lineMax
        if next_line < end_line or next_line >= line_max:
            end = min(next_line, line_max)
        else:
            end = next_line
            while end < line_max:
                pos = b_marks[end] + t_shift[end]
                if pos >= e_marks[end]:
                    break
                sc = s_count[end]
                if sc - blk_indent > 3 or sc < 0:
                    end += 1
                    continue
                if src[pos] in _TERMINATOR_CHARS and self._terminates(end, line_max):
                    break
                end += 1
        self.line = end
        self._cover(start_line, end)
        self.groups.append((start_line, end, -1, -1))


def _find_links_blocks(text: str, start: int | None = None) -> list[Link]:
    """Find links using the token-free port of markdown-it's block parser."""
    if start is None:
        start = _body_offset(text)
    body = _Body(text, start, truncate=True)
    if not body.src:
        return []
    blocks = _Blocks(body)
    blocks.tokenize(0, blocks.lineMax)
    return _collect(text, body, blocks.lineMax, blocks.covered, blocks.groups)


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def find_links(text: str) -> list[Link]:
    """Return all links outside frontmatter, code and HTML, with offsets into ``text``."""
    return _find_links_from(text, _body_offset(text))


def _find_links_from(text: str, start: int) -> list[Link]:
    """Find links in ``text[start:]`` (the body), choosing the cheapest exact method."""
    if text.find("[[", start) < 0:
        return []
    if _fast_path_ok(text, start):
        return _find_links_fast(text, start)
    try:
        links = _find_links_medium(text, start)
        return _find_links_blocks(text, start) if links is None else links
    except Exception:  # never expected (tests check they agree); markdown-it is the fallback
        pass
    try:
        return _find_links_slow(text, start)
    except Exception:  # markdown-it-py 4.3.0 raises IndexError on e.g. "> - <pre>\n>"
        return _find_links_fast(text, start)  # rather every link than no note at all


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
    title, created, body_start, warnings = _read_frontmatter(text)
    start = body_start or (1 if text.startswith("\ufeff") else 0)
    concepts: dict[str, int] = {}
    dropped = 0
    for link in _find_links_from(text, start):
        if link.concept:
            concepts[link.concept] = concepts.get(link.concept, 0) + 1
        elif not _is_attachment(link.target):
            dropped += 1
    return NoteFacts(concepts, title, created, dropped, tuple(warnings), body_start)
