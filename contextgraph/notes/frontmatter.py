"""Read a note's YAML frontmatter: its extent, ``title`` and ``created`` (SPEC §2).

The text may start with a BOM. The first line must be ``---`` (trailing blanks allowed) and a later
line ``---`` or ``...`` closes it; unclosed means there is no frontmatter. A closed block is
*always* skipped as frontmatter, even when its YAML is invalid or not a mapping (then
``title``/``created`` are ``None`` and a warning is reported). Frontmatter over
:data:`MAX_FRONTMATTER_CHARS` characters, or nested more than 64 levels, is not parsed (warning).

YAML is loaded with PyYAML's ``CSafeLoader`` (libyaml), or its pure-Python ``SafeLoader`` where
libyaml is missing; both build the same values with the same safe constructors. Invalid YAML is
read again by ``SafeLoader`` so that the warning is worded the same either way. The common
frontmatter of a few ``key: value`` lines of plain ASCII words, whole numbers and dates is read
without the parser (:func:`_simple_mapping`); it gives the values the loader would, by asking
PyYAML's own resolver what each scalar is, and hands anything else to the loader.

``created``: a YAML date or datetime, an ISO-8601 string, or epoch time (Dendron writes
milliseconds); converted to UTC (naive values are taken as UTC, dates become midnight UTC).
Anything else gives ``None`` and a warning. ``title``: ``str()`` of a scalar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import yaml

from contextgraph.limits import join_surrogates

MAX_FRONTMATTER_CHARS = 100_000
_MAX_YAML_NESTING = 64
_SCALAR_TYPES = (str, int, float, bool, date)

try:
    _LOADER: type[Any] = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml
    _LOADER = yaml.SafeLoader

# One line of the frontmatter the parser is not needed for: ``key: value`` at column 0, the
# value a one-line plain scalar of ASCII words (no indicator first, no ``:``, ``#``, quote or
# tab anywhere), a one-line quoted string of printable ASCII without quote or backslash
# inside (``desc: ''``, as Dendron writes every note), or nothing. Anything else sends the
# whole block to the YAML loader.
# A plain value ends with a character other than a space, and the trailing spaces go to the
# final ``[ ]*``: a lazy value ``[…]*?`` shared its spaces with it, so a line such as
# ``title: a`` + 40,000 spaces + ``:`` (no match) was tried in every split, O(spaces²): 4.6 s.
_SIMPLE_LINE_RE = re.compile(
    r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ ]+(?:"
    r"([A-Za-z0-9](?:[A-Za-z0-9 ._/()+,-]*[A-Za-z0-9._/()+,-])?)"
    r"|'([ !#-&(-\[\]-~]*)'|\"([ !#-\[\]-~]*)\"))?[ ]*"
)
_SIMPLE_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_SIMPLE_INT_RE = re.compile(r"0|[1-9][0-9]*")
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_RESOLVER: Any = yaml.resolver.Resolver()
_SCALARS: dict[str, tuple[bool, Any]] = {}  # plain scalar -> what _simple_scalar says
_SCALARS_MAX = 4096

_FM_OPEN_RE = re.compile(r"---[ \t]*(?:\r\n|\r|\n)")
_FM_CLOSE_RE = re.compile(r"[\n\r](?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|\Z)")


@dataclass(frozen=True)
class Frontmatter:
    """What the frontmatter says; ``created`` is timezone-aware UTC."""

    title: str | None
    created: datetime | None
    body_start: int
    warning: str | None


def frontmatter_bounds(text: str) -> tuple[int, int, int] | None:
    """Return (yaml_start, yaml_end, body_start) of a closed frontmatter block, else None."""
    first = 1 if text.startswith("\ufeff") else 0
    opener = _FM_OPEN_RE.match(text, first)
    if opener is None:
        return None
    closer = _FM_CLOSE_RE.search(text, opener.end() - 1)  # from the opener's line break
    if closer is None:
        return None
    return opener.end(), max(opener.end(), closer.start() + 1), closer.end()


def body_offset(text: str) -> int:
    """Return where the body starts: after the frontmatter, or after a BOM."""
    bounds = frontmatter_bounds(text)
    if bounds is not None:
        return bounds[2]
    return 1 if text.startswith("\ufeff") else 0


def _yaml_nesting(source: str) -> int:
    """Estimate (from above) how deeply the YAML nests: flow brackets plus line prefixes."""
    depth = deepest = 0
    for m in re.finditer(r"[\[\]{}]", source):
        depth += 1 if m.group() in "[{" else -1
        deepest = max(deepest, depth)
    prefix = max((len(m.group()) for m in re.finditer(r"(?m)^[ \t?:-]+", source)), default=0)
    return deepest + prefix


def load_yaml(source: str) -> Any:
    """Load YAML safely (refusing nesting deep enough to exhaust the recursion limit).

    libyaml words its errors differently; the warning a note gets must not depend on whether
    libyaml is installed, so invalid YAML is read once more by the pure-Python loader, which
    raises the error reported.
    """
    if _yaml_nesting(source) > _MAX_YAML_NESTING:
        raise ValueError("nested too deeply")
    try:
        return yaml.load(source, Loader=_LOADER)
    except yaml.YAMLError:
        if _LOADER is yaml.SafeLoader:
            raise
    return yaml.load(source, Loader=yaml.SafeLoader)


def _simple_scalar(text: str) -> tuple[bool, Any]:
    """(True, value) when the plain scalar ``text`` is a str, a decimal int, a bool or a date;
    else False.

    The tag comes from PyYAML's resolver (the one its loaders use), so a word the loader takes
    for a bool, a null or a float is never read as a string here. Answers are remembered (a
    bounded table): keys and dates repeat from note to note, and every value is immutable.
    """
    known = _SCALARS.get(text)
    if known is None:
        if len(_SCALARS) >= _SCALARS_MAX:
            _SCALARS.clear()
        known = _SCALARS[text] = _resolve_scalar(text)
    return known


def _resolve_scalar(text: str) -> tuple[bool, Any]:
    tag = _RESOLVER.resolve(yaml.nodes.ScalarNode, text, (True, False))
    if tag == _STR_TAG:
        return True, text
    if tag == _INT_TAG and _SIMPLE_INT_RE.fullmatch(text):
        try:
            return True, int(text)
        except ValueError:  # past Python's limit on digits: the loader's error is the warning
            return False, None
    if tag == _BOOL_TAG:  # YAML 1.1's yes/no/on/off/true/false, as the loader reads them
        return True, yaml.constructor.SafeConstructor.bool_values[text.lower()]
    if tag == _TIMESTAMP_TAG and _SIMPLE_DATE_RE.fullmatch(text):
        try:
            return True, date(int(text[:4]), int(text[5:7]), int(text[8:10]))
        except ValueError:
            return False, None  # the loader words this failure
    return False, None


def _simple_mapping(source: str) -> dict[str, Any] | None:
    """The mapping the YAML loader would build from ``source``, when it is simple; else None.

    Simple: every line matches :data:`_SIMPLE_LINE_RE`, every key is a string and every value
    empty (None) or a scalar :func:`_simple_scalar` takes. A later key wins, as in the loader.
    """
    if not source.endswith("\n") or "\r" in source:
        return None
    data: dict[str, Any] = {}
    for line in source[:-1].split("\n"):
        match = _SIMPLE_LINE_RE.fullmatch(line)
        if match is None:
            return None
        key, raw, single, double = match.groups()
        if _simple_scalar(key) != (True, key):  # a key such as ``on`` or ``12`` is no string
            return None
        quoted = single if single is not None else double
        if quoted is not None:  # a quoted scalar is a string, as written
            data[key] = quoted
            continue
        if raw is None:
            data[key] = None
            continue
        ok, value = _simple_scalar(raw)
        if not ok:
            return None
        data[key] = value
    return data


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


def read_frontmatter(text: str) -> tuple[str | None, datetime | None, int, list[str]]:
    """Return title, created, body start (0 without frontmatter) and warnings."""
    bounds = frontmatter_bounds(text)
    if bounds is None:
        return None, None, 0, []
    yaml_start, yaml_end, body_start = bounds
    if yaml_end - yaml_start > MAX_FRONTMATTER_CHARS:
        return None, None, body_start, [f"frontmatter too large ({yaml_end - yaml_start} chars)"]
    source = text[yaml_start:yaml_end]
    data: Any = _simple_mapping(source)
    try:
        if data is None:
            data = load_yaml(source)
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
            # YAML's "\0" escape makes a NUL, which PostgreSQL refuses in text: U+FFFD.
            title = join_surrogates(str(raw_title)).replace("\x00", "\ufffd")
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
    title, created, body_start, warnings = read_frontmatter(text)
    return Frontmatter(title, created, body_start, "; ".join(warnings) or None)


__all__ = [
    "MAX_FRONTMATTER_CHARS",
    "Frontmatter",
    "body_offset",
    "frontmatter_bounds",
    "load_yaml",
    "parse_frontmatter",
    "read_frontmatter",
]
