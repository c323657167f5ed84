"""Read Python written for a newer interpreter than the running one (SPEC §7).

When :mod:`ast` of the running Python refuses a file, tree-sitter-python (whose grammar knows
3.12–3.14 syntax) parses it, and the few newer constructs are rewritten into older syntax with
the *same facts*: the same names used and bound, on the same lines. :mod:`ast` then parses the
result and the usual extractor runs, so a file gets exactly the facts a newer Python's ``ast``
would give it through the same extractor:

- ``type X[T] = V`` (3.12) → ``(V)``: the extractor walks a ``TypeAlias`` for the names its value
  uses and binds nothing (its ``name`` field is not walked), so neither does the rewrite;
- type parameters of ``def f[T]()`` / ``class C[T]:`` (3.12, defaults 3.13) are dropped: the
  extractor never walks ``type_params``;
- f-strings that 3.11 cannot read (3.12: nested quotes, backslashes, comments) and t-strings
  (3.14) → a tuple of their interpolated expressions, the only part with facts;
- ``except A, B:`` (3.14) → ``except (A, B):``.

Line numbers are kept: a rewritten span keeps its line breaks (inside brackets, or as
backslash continuations where no bracket is open).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache

import tree_sitter

Node = tree_sitter.Node

_TARGETS = """
(string) @string
(concatenated_string) @string
(function_definition type_parameters: (type_parameter) @params)
(class_definition type_parameters: (type_parameter) @params)
(except_clause) @except
"""


@lru_cache(maxsize=1)
def _parser() -> tuple[tree_sitter.Parser, tree_sitter.Query]:
    import tree_sitter_python

    language = tree_sitter.Language(tree_sitter_python.language())
    return tree_sitter.Parser(language), tree_sitter.Query(language, _TARGETS)


def _prefix(string: Node) -> str:
    start = string.children[0] if string.child_count else None
    if start is None or start.type != "string_start":
        return ""
    text = (start.text or b"").decode("utf-8", "replace")
    return text.rstrip("'\"").lower()


def _is_interpolated(node: Node) -> bool:
    if node.type == "concatenated_string":
        return any(_is_interpolated(c) for c in node.named_children if c.type == "string")
    prefix = _prefix(node)
    return "f" in prefix or "t" in prefix


def _interpolations(node: Node) -> list[Node]:
    """The expressions interpolated into a string (also from nested format specs), in order."""
    out: list[Node] = []
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        if child.type in ("interpolation", "format_expression"):
            expression = child.child_by_field_name("expression")
            if expression is not None:
                out.append(expression)
            spec = [c for c in child.children if c.type == "format_specifier"]
            stack.extend(reversed(spec))
        elif child.type in ("string", "format_specifier"):
            stack.extend(reversed(child.children))
    return out


# ``type`` is a soft keyword: ``type(x).attr = …`` is no alias, though the grammar may say so.
_ALIAS_HEAD = re.compile(rb"type[ \t\\\n]+(?:[^\W\d]|[\x80-\xff])[^\s\[=().]*\s*")


_ALIAS_LINE = re.compile(
    rb"^[ \t]*(type[ \t]+(?:[^\W\d]|[\x80-\xff])[^\s\[=().]*[ \t]*[\[=])", re.M
)


def _alias_starts(source: bytes, root: Node) -> list[int]:
    """Where ``type X… =`` statements start. Found in the text, not the tree: the grammar
    does not know 3.13 type parameter defaults and loses such a statement in an ERROR node."""
    out = []
    for match in _ALIAS_LINE.finditer(source):
        start = match.start(1)
        node: Node | None = root.descendant_for_byte_range(start, start + 4)
        while node is not None and node.type not in ("string", "comment"):
            node = node.parent
        if node is None:  # not inside a string or a comment
            out.append(start)
    return out


def _logical_line(
    src: bytes,
    start: int,
    marks: frozenset[int] = frozenset(),
    known: dict[int, tuple[int, int]] | None = None,
) -> tuple[int, int]:
    """Where the logical line from ``start`` ends (before its newline), and where its code
    ends (at a trailing comment, else the same).

    A scan from a position of ``marks`` is the rest of any scan that reaches it outside
    brackets and strings, so its answer is remembered in ``known``: one logical line of
    thousands of backslash-continued aliases was scanned again from each (quadratic: 37 kB
    12.6 s).
    """
    known = {} if known is None else known
    depth, i, quote = 0, start, b""
    seen: list[int] = []
    result = (len(src), len(src))
    while i < len(src):
        if not quote and depth == 0 and i in marks:
            if i in known:
                result = known[i]
                break
            seen.append(i)
        if quote:
            if src.startswith(quote, i):
                i, quote = i + len(quote), b""
            else:
                i += 2 if src[i : i + 1] == b"\\" else 1
            continue
        ch = src[i : i + 1]
        if src.startswith((b'"""', b"'''"), i):
            quote, i = src[i : i + 3], i + 3
            continue
        if ch in (b'"', b"'"):
            quote, i = ch, i + 1
            continue
        if ch == b"#":
            newline = src.find(b"\n", i)
            newline = len(src) if newline < 0 else newline
            if depth <= 0:
                result = (newline, i)
                break
            i = newline
            continue
        if ch == b"\\" and src[i + 1 : i + 2] == b"\n":
            i += 2
            continue
        if ch in (b"(", b"[", b"{"):
            depth += 1
        elif ch in (b")", b"]", b"}"):
            depth -= 1
        elif ch == b"\n" and depth <= 0:
            result = (i, i)
            break
        i += 1
    for mark in seen:
        known[mark] = result
    return result


def _closing(text: bytes, opening: int) -> int:
    """The index of the bracket closing the one at ``opening`` (-1 if none)."""
    depth = 0
    for i in range(opening, len(text)):
        if text[i] in b"([{":
            depth += 1
        elif text[i] in b")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_top_level(text: bytes) -> list[bytes]:
    """Split at the commas outside brackets (and outside simple string literals)."""
    parts: list[bytes] = []
    depth, start, quote = 0, 0, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1 : i] != b"\\":
                quote = 0
        elif ch in b"'\"":
            quote = ch
        elif ch in b"([{":
            depth += 1
        elif ch in b")]}":
            depth -= 1
        elif ch == ord(",") and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


_PARAM_NAME = re.compile(rb"\s*\*{0,2}\s*\w+")


def _alias_params(params: bytes) -> list[bytes]:
    """The bound and default expressions of a type alias's type parameters: a newer Python's
    ``ast`` gives a ``TypeVar`` whose ``bound``/``default_value`` the extractor walks."""
    out: list[bytes] = []
    for param in _split_top_level(params):
        out += _bound_and_default(param)
    return out


def _bound_and_default(param: bytes) -> list[bytes]:
    """What ``\\s*\\*{0,2}\\s*\\w+\\s*(?::(?P<bound>[^=]+?))?\\s*(?:=(?P<default>.+))?\\s*$``
    (``re.S``) gives one type parameter: its bound and default, stripped, the empty ones left
    out; nothing where the pattern does not match. Read with string methods: that pattern's
    lazy bound and the blanks around it backtracked, cubic in a run of blanks (2 kB: 10 s).
    """
    name = _PARAM_NAME.match(param)
    if name is None:
        return []
    rest = param[name.end() :].lstrip()
    bound: bytes | None = None
    default: bytes | None = None
    if rest.startswith(b":"):
        body = rest[1:]
        if not body or body.startswith(b"="):
            return []  # a bound is one character or more, none of them '='
        bound, eq, after = body.partition(b"=")
        if eq:
            default = after
    elif rest.startswith(b"="):
        default = rest[1:]
    elif rest:
        return []
    if default is not None and not default:
        return []  # '=' with nothing after it
    return [g.strip() for g in (bound, default) if g and g.strip()]


class _Rewriter:
    def __init__(self, source: bytes, root: Node, query: tree_sitter.Query) -> None:
        self.source = source
        # (start, end, replacement factory); zero-width entries are insertions.
        self.edits: list[tuple[int, int, Callable[[], bytes]]] = []
        self._alias_end = 0
        captures = tree_sitter.QueryCursor(query).captures(root)
        for node in captures.get("string", []):
            if node.parent is not None and node.parent.type == "concatenated_string":
                continue  # the whole concatenation is one edit
            if _is_interpolated(node) and _interpolations(node):
                self.edits.append((node.start_byte, node.end_byte, self._string(node)))
        starts = _alias_starts(source, root)
        self._marks = frozenset(starts)  # where _logical_line remembers its answers
        self._known: dict[int, tuple[int, int]] = {}
        for start in starts:
            make = self._alias(start)
            if make is not None:
                self.edits.append((start, self._alias_end, make))
        for node in captures.get("params", []):
            self.edits.append((node.start_byte, node.end_byte, self._drop(node)))
        for node in captures.get("except", []):
            self._except(node)
        # Insertions before the edit that starts where they do; outer edits before inner ones.
        self.edits.sort(key=lambda e: (e[0], e[1] != e[0], -e[1]))
        self._starts = [e[0] for e in self.edits]

    def render(self, start: int, end: int) -> bytes:
        """The source between ``start`` and ``end`` with every edit inside it applied.

        Only the edits that start in the range are looked at (found by bisection): each
        f-string and alias renders its own parts, and looking at every edit of the file each
        time was quadratic (348 kB of 3.12 f-strings: 10.4 s).
        """
        out: list[bytes] = []
        pos = start
        for i in range(bisect_left(self._starts, start), len(self.edits)):
            s, e, make = self.edits[i]
            if s >= end:
                break  # sorted by start: every later edit starts past the range too
            if s < pos or e > end or (s == e and not start <= s < end):
                continue  # outside, or inside an edit already applied
            out.append(self.source[pos:s])
            out.append(make())
            pos = e
        out.append(self.source[pos:end])
        return b"".join(out)

    def _padded(self, node: Node, body: bytes) -> bytes:
        missing = self.source[node.start_byte : node.end_byte].count(b"\n") - body.count(b"\n")
        return b"(" + body + b"\n" * max(missing, 0) + b")"

    def _string(self, node: Node) -> Callable[[], bytes]:
        def make() -> bytes:
            # Each in brackets: an interpolation may be a bare tuple (``f"{a, b}"``).
            parts = [
                b"(" + self.render(x.start_byte, x.end_byte) + b")" for x in _interpolations(node)
            ]
            return self._padded(node, b", ".join(parts) + b",")

        return make

    def _alias(self, start: int) -> Callable[[], bytes] | None:
        # Read the statement from the text, not the tree: tree-sitter-python does not know
        # 3.13 type parameter defaults and mis-nests an alias that has them.
        stop, comment = _logical_line(self.source, start, self._marks, self._known)
        text = self.source[start:comment]
        header = _ALIAS_HEAD.match(text)
        if header is None:
            return None
        pos, params = header.end(), b""
        if text[pos : pos + 1] == b"[":
            close = _closing(text, pos)
            if close < 0:
                return None
            params, pos = text[pos + 1 : close], close + 1
        equals = text.find(b"=", pos)
        if equals < 0 or text[pos:equals].strip():
            return None
        value_start = start + equals + 1
        self._alias_end = stop

        def make() -> bytes:
            parts = [*_alias_params(params), self.render(value_start, comment).strip()]
            body = b", ".join(parts) if len(parts) > 1 else parts[0]
            missing = self.source[start:stop].count(b"\n") - body.count(b"\n")
            return b"(" + body + b"\n" * max(missing, 0) + b")"

        return make

    def _drop(self, node: Node) -> Callable[[], bytes]:
        def make() -> bytes:
            return b"\\\n" * self.source[node.start_byte : node.end_byte].count(b"\n")

        return make

    def _except(self, node: Node) -> None:
        values = [
            c
            for c in node.named_children
            if c.type not in ("block", "comment") and c.type != "as_pattern"
        ]
        commas = [c for c in node.children if c.type == ","]
        if len(values) < 2 or not commas:
            return
        self.edits.append((values[0].start_byte, values[0].start_byte, lambda: b"("))
        self.edits.append((values[-1].end_byte, values[-1].end_byte, lambda: b")"))


# Text every construct the rewrite changes holds (a superset: a match may be no such construct):
# a type alias line, '[' after def/class before the parameters, an f- or t-string prefix, and a
# comma after 'except'. A file the running Python refuses that holds none of them gets nothing
# from the rewrite, whose tree-sitter query is quadratic over a deep error tree (x = ~ ** ~ ...,
# 200 kB: 11 s).
_NEWER_MARKERS = (
    _ALIAS_LINE,
    re.compile(rb"\b(?:def|class)\b[^(:]*\["),
    re.compile(rb"(?<![A-Za-z0-9_\x80-\xff])(?:[fFtT]|[rR][fFtT]|[fFtT][rR])['\"]"),
    re.compile(rb"\bexcept\b[^:]*,"),
)


def may_hold_newer_syntax(text: str) -> bool:
    """False when :func:`downlevel` would leave ``text`` as it is: none of its constructs."""
    source = text.encode("utf-8", "surrogatepass")
    return any(marker.search(source) for marker in _NEWER_MARKERS)


def downlevel(text: str) -> str:
    """Rewrite 3.12–3.14 syntax in ``text`` into 3.11 syntax with the same facts (see above)."""
    parser, query = _parser()
    source = text.encode("utf-8", "surrogatepass")
    tree = parser.parse(source)
    rewriter = _Rewriter(source, tree.root_node, query)
    if not rewriter.edits:
        return text
    return rewriter.render(0, len(source)).decode("utf-8", "surrogatepass")


__all__ = ["downlevel", "may_hold_newer_syntax"]
