"""Python facts extraction with :mod:`ast`.

A file the running Python's :mod:`ast` refuses is tried once more through
:mod:`.python_compat`, which reads 3.12–3.14 syntax with tree-sitter-python and rewrites it
into older syntax with the same facts, so what parses does not depend on the interpreter.

Symbols are the classes and functions defined at module level (also inside module-level
``if``/``try``/``with`` blocks, e.g. ``if TYPE_CHECKING:``) and the methods defined directly in
such a class body (``Class.method``). A name defined twice (``@property``/``@x.setter``,
``if``/``else`` variants) is one symbol whose references are merged.

References of a symbol are the dotted names it uses (``Name`` loads and ``Attribute`` chains
rooted at a name, which covers calls, decorators, annotations — string annotations included —
and default values), minus the names bound locally in it (parameters, assignments, loop and
``with`` targets, ``except ... as``, nested definitions; ``global`` names stay visible).
``self.m``/``cls.m`` where ``m`` is a method of the same class is recorded as ``Class.m``;
other ``self`` attributes are dropped. Imports anywhere (also inside functions) are recorded
as file-level imports and bindings. Code at module level outside any symbol yields
``module_refs``; the names it binds (assignments, loop targets…) are ``module_names``.
"""

from __future__ import annotations

import ast
import contextlib
import warnings
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from contextgraph.code.common import SymbolAcc, check_nul, undecodable
from contextgraph.code.model import (
    BindingFact,
    CodeParseError,
    FileFacts,
    ImportFact,
    SymbolFact,
)

_MAX_CHAIN = 6

_Name = ast.Name
_Attribute = ast.Attribute
_Constant = ast.Constant
_Load = ast.Load
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_IMPORTS = (ast.Import, ast.ImportFrom)
_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)

# Node classes the walk treats specially; every other class is walked through its fields.
_GENERIC, _SKIP, _NAME, _ATTR, _IMPORT, _DEF, _CLASS, _ARG, _ANN, _GLOBAL, _NAMED = range(11)
_DISPATCH: dict[type, int] = {
    type(None): _SKIP,
    ast.Constant: _SKIP,
    ast.Load: _SKIP,
    ast.Store: _SKIP,
    ast.Del: _SKIP,
    ast.Name: _NAME,
    ast.Attribute: _ATTR,
    ast.Import: _IMPORT,
    ast.ImportFrom: _IMPORT,
    ast.FunctionDef: _DEF,
    ast.AsyncFunctionDef: _DEF,
    ast.ClassDef: _CLASS,
    ast.arg: _ARG,
    ast.AnnAssign: _ANN,
    ast.Global: _GLOBAL,
    ast.Nonlocal: _GLOBAL,
    ast.ExceptHandler: _NAMED,
    ast.MatchAs: _NAMED,
    ast.MatchStar: _NAMED,
}
# Fields that never hold a child worth walking (names, operators, contexts, flags).
_NON_CHILD_FIELDS = frozenset(
    {"ctx", "op", "type_comment", "kind", "conversion", "is_async", "level", "module", "id"}
    | {"attr", "arg", "simple", "tag", "names", "name", "rest", "type_ignores"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f for f in cls._fields if f not in _NON_CHILD_FIELDS)
    for cls in (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)
}


def parse_python(path: str, text: str) -> FileFacts:
    """Facts of one Python file; newer syntax than the running Python's is read too."""
    check_nul(text)
    try:
        tree = _parse(path, text)
    except SyntaxError as e:
        # Undecoded bytes in comments and strings are harmless (a file in a legacy encoding);
        # a file that fails and is mostly undecodable is reported as binary.
        binary = undecodable(text)
        if binary:
            raise CodeParseError(binary) from None
        tree = _parse_newer(path, text, e)
    return facts_of(path, tree)


def facts_of(path: str, tree: ast.Module) -> FileFacts:
    """Extract the facts of a parsed module."""
    ex = _Extractor()
    ex.module_body(tree.body)
    return ex.facts(path)


def _parse(path: str, text: str) -> ast.Module:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except (RecursionError, MemoryError):
        raise CodeParseError("Python code too deeply nested to parse") from None
    except ValueError as e:
        raise CodeParseError(f"Python source rejected: {e}") from None


# Limits of CPython's tokenizer that no newer Python lifts: rewriting newer syntax cannot make such
# a file parse, and tree-sitter's query over its deep error tree takes time quadratic in the
# depth (100,000 unclosed brackets, a 100 KB file: 12 s).
_LIMITS_OF_EVERY_PYTHON = ("too many nested parentheses", "too many levels of indentation")


def _parse_newer(path: str, text: str, error: SyntaxError) -> ast.Module:
    """Parse a file the running ``ast`` refused, if it is newer Python (3.12+) syntax."""
    from contextgraph.code.python_compat import downlevel, may_hold_newer_syntax

    msg = error.msg or "invalid syntax"
    refused = CodeParseError(f"Python syntax error at line {error.lineno}: {msg}")
    if msg in _LIMITS_OF_EVERY_PYTHON or not may_hold_newer_syntax(text):
        raise refused
    try:
        return _parse(path, downlevel(text))
    except (SyntaxError, RecursionError, CodeParseError):
        raise refused from None


class _Scope:
    """Names used and bound while walking one symbol (or the module level)."""

    __slots__ = ("bound", "cls", "globals", "methods", "self_name", "uses")

    def __init__(
        self, cls: str | None = None, methods: frozenset[str] = frozenset(), self_name: str = ""
    ) -> None:
        self.uses: set[str] = set()
        self.bound: set[str] = set()
        self.globals: set[str] = set()
        self.cls = cls
        self.methods = methods
        self.self_name = self_name

    def refs(self) -> set[str]:
        hidden = self.bound - self.globals
        return {u for u in self.uses if u.partition(".")[0] not in hidden}


class _Extractor:
    def __init__(self) -> None:
        self.symbols: dict[str, SymbolAcc] = {}
        self.imports: list[ImportFact] = []
        self.bindings: list[BindingFact] = []
        self.module = _Scope()

    def facts(self, path: str) -> FileFacts:
        symbols = tuple(
            SymbolFact(
                q, s.kind, s.line, tuple(dict.fromkeys(s.bases)), tuple(sorted(s.refs - {q}))
            )
            for q, s in self.symbols.items()
        )
        bindings = tuple(dict.fromkeys(self.bindings))
        return FileFacts(
            path=path,
            language="python",
            symbols=symbols,
            imports=tuple(dict.fromkeys(self.imports)),
            bindings=bindings,
            module_refs=tuple(sorted(self.module.refs())),
            module_names=tuple(sorted(self.module.bound - self.symbols.keys())),
        )

    # -- module level ---------------------------------------------------------------------

    def module_body(self, body: Iterable[ast.stmt]) -> None:
        """Read the module-level statements, and those nested in its ifs, trys and withs, in
        source order. A stack of what is left to read, not a call per nesting: Python's own
        ``ast`` reads an ``if`` with a thousand ``elif`` branches, so this must too.
        """
        stack: list[Iterator[ast.stmt | Callable[[], None]]] = [iter(body)]
        while stack:
            st = next(stack[-1], None)
            if st is None:
                stack.pop()
            elif not isinstance(st, ast.stmt):
                st()  # a try's handler: its type and name, before its body
            elif isinstance(st, _FUNCS):
                self.function(st, None, frozenset())
            elif isinstance(st, ast.ClassDef):
                self.klass(st)
            elif isinstance(st, _IMPORTS):
                self.import_(st)
            elif isinstance(st, ast.If):
                self.walk([st.test], self.module)
                stack.append(iter([*st.body, *st.orelse]))
            elif isinstance(st, _TRY):
                todo: list[ast.stmt | Callable[[], None]] = [*st.body]
                for h in st.handlers:
                    todo += [partial(self._handler, h), *h.body]
                stack.append(iter([*todo, *st.orelse, *st.finalbody]))
            elif isinstance(st, ast.With | ast.AsyncWith):
                roots: list[ast.AST] = []
                for item in st.items:
                    roots.append(item.context_expr)
                    if item.optional_vars is not None:
                        roots.append(item.optional_vars)
                self.walk(roots, self.module)
                stack.append(iter(st.body))
            else:
                self.walk([st], self.module)

    def _handler(self, h: ast.ExceptHandler) -> None:
        if h.type is not None:
            self.walk([h.type], self.module)
        if h.name:
            self.module.bound.add(h.name)

    def _symbol(self, qual: str, kind: str, line: int) -> SymbolAcc:
        acc = self.symbols.get(qual)
        if acc is None:
            acc = self.symbols[qual] = SymbolAcc(kind, line)
        return acc

    def function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None, methods: frozenset[str]
    ) -> None:
        qual = node.name if cls is None else f"{cls}.{node.name}"
        acc = self._symbol(qual, "function" if cls is None else "method", node.lineno)
        self_name = ""
        if cls is not None:
            positional = node.args.posonlyargs + node.args.args
            static = any(
                isinstance(d, _Name) and d.id == "staticmethod" for d in node.decorator_list
            )
            if positional and not static:
                self_name = positional[0].arg
        scope = _Scope(cls, methods, self_name)
        roots: list[ast.AST] = [*node.decorator_list, node.args, *node.body]
        self.walk(roots, scope, [] if node.returns is None else [node.returns])
        acc.refs |= scope.refs()

    def klass(self, node: ast.ClassDef) -> None:
        qual = node.name
        acc = self._symbol(qual, "class", node.lineno)
        scope = _Scope()
        roots: list[ast.AST] = [*node.decorator_list, *(k.value for k in node.keywords)]
        for base in node.bases:
            target = base.value if isinstance(base, ast.Subscript) else base
            chain = _chain(target)
            if chain is not None:
                acc.bases.append(".".join(chain))
            if isinstance(base, ast.Subscript):
                roots.append(base.slice)
            elif chain is None:
                roots.append(base)
        methods = frozenset(st.name for st in node.body if isinstance(st, _FUNCS))
        for st in node.body:
            if isinstance(st, _FUNCS):
                self.function(st, qual, methods)
            else:
                roots.append(st)
        self.walk(roots, scope)
        acc.refs |= scope.refs()

    def import_(self, node: ast.Import | ast.ImportFrom) -> None:
        line = node.lineno
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.imports.append(ImportFact(alias.name, 0, (), line))
                if alias.asname:
                    self.bindings.append(BindingFact(alias.asname, alias.name, 0, None))
                else:
                    top = alias.name.partition(".")[0]
                    self.bindings.append(BindingFact(top, top, 0, None))
            return
        module = node.module or ""
        if module == "__future__":
            return
        level = node.level or 0
        names = tuple(a.name for a in node.names)
        self.imports.append(ImportFact(module, level, names, line))
        for alias in node.names:
            if alias.name != "*":
                self.bindings.append(
                    BindingFact(alias.asname or alias.name, module, level, alias.name)
                )

    # -- generic walk -----------------------------------------------------------------------

    def walk(
        self, roots: list[ast.AST], scope: _Scope, annotations: list[ast.AST] | None = None
    ) -> None:
        """Collect uses and bindings of the subtrees ``roots`` into ``scope`` (iteratively);
        ``annotations`` are roots whose string constants are forward references."""
        stack: list[Any] = roots[::-1]
        annotations = [] if annotations is None else annotations
        uses = scope.uses
        bound = scope.bound
        self_name = scope.self_name if scope.cls is not None else ""
        pop = stack.pop
        push = stack.append
        extend = stack.extend
        dispatch = _DISPATCH
        child_fields = _CHILD_FIELDS
        while stack:
            node = pop()
            cls = node.__class__
            code = dispatch.get(cls, _GENERIC)
            if code == _GENERIC:
                fields = child_fields.get(cls)
                if fields is None:
                    if not issubclass(cls, ast.AST):
                        dispatch[cls] = _SKIP
                        continue
                    fields = child_fields[cls] = tuple(
                        f for f in cls._fields if f not in _NON_CHILD_FIELDS
                    )
                for f in fields:
                    value = getattr(node, f, None)
                    if value.__class__ is list:
                        extend(value)
                    elif value is not None:
                        push(value)
            elif code == _NAME:
                if node.ctx.__class__ is _Load:
                    uses.add(node.id)
                else:
                    bound.add(node.id)
            elif code == _ATTR:
                parts = [node.attr]
                value = node.value
                while value.__class__ is _Attribute:
                    parts.append(value.attr)
                    value = value.value
                if value.__class__ is not _Name:
                    push(value)
                elif value.id == self_name:
                    if parts[-1] in scope.methods:
                        uses.add(f"{scope.cls}.{parts[-1]}")
                else:
                    parts.append(value.id)
                    parts.reverse()
                    uses.add(".".join(parts[:_MAX_CHAIN]))
            elif code == _SKIP:
                continue
            elif code == _IMPORT:
                self.import_(node)
            elif code == _DEF:
                bound.add(node.name)
                extend(node.decorator_list)
                push(node.args)
                extend(node.body)
                if node.returns is not None:
                    annotations.append(node.returns)
            elif code == _CLASS:
                bound.add(node.name)
                extend(node.decorator_list)
                extend(node.bases)
                extend(node.keywords)
                extend(node.body)
            elif code == _ARG:
                bound.add(node.arg)
                if node.annotation is not None:
                    annotations.append(node.annotation)
            elif code == _ANN:
                annotations.append(node.annotation)
                push(node.target)
                if node.value is not None:
                    push(node.value)
            elif code == _GLOBAL:
                scope.globals.update(node.names)
            else:  # _NAMED: except handlers and match captures bind a name, then as generic
                if node.name:
                    bound.add(node.name)
                for f in child_fields.get(cls) or ():
                    value = getattr(node, f, None)
                    if value.__class__ is list:
                        extend(value)
                    elif value is not None:
                        push(value)
        if annotations:
            self._annotations(annotations, scope)

    def _annotations(self, roots: list[ast.AST], scope: _Scope) -> None:
        """Walk annotations; string constants inside them are parsed as forward references."""
        exprs: list[ast.AST] = []
        for root in roots:
            for node in ast.walk(root):
                if isinstance(node, _Constant) and isinstance(node.value, str):
                    with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
                        exprs.append(ast.parse(node.value.strip(), mode="eval").body)
        self.walk(roots + exprs, scope)


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` → ``["a", "b", "c"]``; None if the chain is not rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, _Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, _Name):
        return None
    parts.append(node.id)
    parts.reverse()
    return parts
