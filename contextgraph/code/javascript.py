"""JavaScript/TypeScript facts extraction with tree-sitter.

Grammar: ``.ts`` → TypeScript, ``.tsx`` → TSX, ``.js .jsx .mjs .cjs`` → JavaScript (with JSX).

Symbols (top level, exported or not, also inside ``declare``): ``function``/generator
declarations and overload signatures, classes (also ``abstract``), ``const``/``let``/``var``
bound to an arrow function, a function or class expression, or to a call taking a function
argument (``const C = memo(() => …)``); TS ``interface`` (kind ``interface``), ``type``
(kind ``type``) and ``enum`` (kind ``enum``); CommonJS ``exports.f = function …``; an
anonymous ``export default function/class`` is a symbol named ``default``. Class methods,
accessors, abstract method signatures and fields holding a function are ``Class.method``.

Bases: ``extends`` of classes and interfaces and TS ``implements`` (dotted names only).
References: identifiers, ``a.b.c`` member chains, ``new X``, TS type references, JSX
component names (lower-case intrinsic tags such as ``div`` are skipped), minus the names bound
locally (parameters, declarations, patterns, ``catch``, type parameters); ``this.m`` where
``m`` is a method of the same class is ``Class.m``.

Imports (:mod:`.jsimports`): ``import … from``, ``import 'x'``, ``export … from``,
``require('x')`` and ``import('x')`` with a string (or substitution-free template) literal
anywhere in the file, TS ``import x = require('x')``.

Parse failures: tree-sitter always recovers, so a file is rejected when its root is an ERROR
node or when ERROR nodes directly under the root cover more than 10% of its bytes; smaller
errors are tolerated and the ERROR subtrees are ignored. A ``.js``-family file that fails so
is parsed again with the TSX grammar (type-annotated JavaScript such as Flow) and kept if that
succeeds. Text with NUL bytes, or with more than 10% undecodable bytes (U+FFFD), is binary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import tree_sitter
import tree_sitter_javascript
import tree_sitter_typescript

from contextgraph.code.common import SymbolAcc, check_text
from contextgraph.code.jsimports import JsImports, Node
from contextgraph.code.model import (
    CodeParseError,
    FileFacts,
    SymbolFact,
)

_GRAMMARS: dict[str, tuple[str, Callable[[], Any]]] = {
    ".js": ("javascript", tree_sitter_javascript.language),
    ".jsx": ("javascript", tree_sitter_javascript.language),
    ".mjs": ("javascript", tree_sitter_javascript.language),
    ".cjs": ("javascript", tree_sitter_javascript.language),
    ".ts": ("typescript", tree_sitter_typescript.language_typescript),
    ".tsx": ("typescript", tree_sitter_typescript.language_tsx),
}
_ERROR_SHARE = 0.10

_FUNC_VALUES = frozenset(
    {
        "arrow_function",
        "function_expression",
        "function",
        "generator_function",
        "generator_function_expression",
    }
)
_CLASS_VALUES = frozenset({"class", "class_expression"})
_FUNC_DECLS = frozenset(
    {"function_declaration", "generator_function_declaration", "function_signature"}
)
_CLASS_DECLS = frozenset({"class_declaration", "abstract_class_declaration"})
_TS_DECLS = {
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
}
_VAR_DECLS = frozenset({"lexical_declaration", "variable_declaration"})
_METHODS = frozenset({"method_definition", "abstract_method_signature", "method_signature"})
_FIELDS = frozenset({"field_definition", "public_field_definition"})
_NAME_FIELDS = frozenset({"name", "property"})
_USE_TYPES = frozenset({"identifier", "type_identifier", "shorthand_property_identifier"})
_CHAIN_TYPES = frozenset({"member_expression", "nested_type_identifier", "nested_identifier"})
_SKIP_TYPES = frozenset(
    {
        "comment",
        "string",
        "number",
        "regex",
        "property_identifier",
        "private_property_identifier",
        "statement_identifier",
        "predefined_type",
        "ERROR",
        "jsx_closing_element",
        "jsx_text",
        "string_fragment",
        "html_comment",
        "true",
        "false",
        "null",
        "undefined",
    }
)
_BINDING_DECLS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "internal_module",
    }
)
_MAX_CHAIN = 6

_local = threading.local()


def _parser(ext: str) -> tree_sitter.Parser:
    parsers: dict[str, tree_sitter.Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(ext)
    if parser is None:
        grammar = _GRAMMARS[ext][1]
        parser = parsers[ext] = tree_sitter.Parser(tree_sitter.Language(grammar()))
    return parser


def parse_javascript(path: str, text: str, ext: str) -> FileFacts:
    check_text(text)
    src = text.encode("utf-8", "surrogatepass")
    root = _parser(ext).parse(src).root_node
    reason = _error_reason(root, src, ext)
    if reason and _GRAMMARS[ext][0] == "javascript":
        # Type-annotated JavaScript (Flow, JSDoc-less TS habits): retry with the TSX grammar.
        alt = _parser(".tsx").parse(src).root_node
        if not _error_reason(alt, src, ".tsx"):
            root, reason = alt, None
    if reason:
        raise CodeParseError(reason)
    ex = _Extractor(src)
    for node in root.named_children:
        ex.statement(node)
    return ex.facts(path, _GRAMMARS[ext][0])


def _error_reason(root: Node, src: bytes, ext: str) -> str | None:
    if not root.has_error:
        return None
    lang = "TypeScript" if ext in (".ts", ".tsx") else "JavaScript"
    errors = [root] if root.type == "ERROR" else [c for c in root.children if c.type == "ERROR"]
    size = max(len(src.strip()), 1)
    bad = sum(c.end_byte - c.start_byte for c in errors)
    if errors and (root.type == "ERROR" or bad > _ERROR_SHARE * size):
        line = errors[0].start_point[0] + 1
        return f"{lang} syntax error at line {line} ({100 * bad // size}% of the file unparsable)"
    return None


class _Scope:
    __slots__ = ("bound", "cls", "methods", "uses")

    def __init__(self, cls: str | None = None, methods: frozenset[str] = frozenset()) -> None:
        self.uses: set[str] = set()
        self.bound: set[str] = set()
        self.cls = cls
        self.methods = methods

    def refs(self) -> set[str]:
        bound = self.bound
        return {u for u in self.uses if u.partition(".")[0] not in bound}


class _Extractor(JsImports):
    def __init__(self, src: bytes) -> None:
        super().__init__(src)
        self.symbols: dict[str, SymbolAcc] = {}
        self.aliases: list[tuple[str, str]] = []
        self.module = _Scope()
        self.unnamed: set[int] = set()  # ids of member chains dotted() found not name-rooted

    def facts(self, path: str, language: str) -> FileFacts:
        symbols = tuple(
            SymbolFact(
                q, s.kind, s.line, tuple(dict.fromkeys(s.bases)), tuple(sorted(s.refs - {q}))
            )
            for q, s in self.symbols.items()
        )
        return FileFacts(
            path=path,
            language=language,
            symbols=symbols,
            imports=tuple(dict.fromkeys(self.imports)),
            bindings=tuple(dict.fromkeys(self.bindings)),
            reexports=tuple(dict.fromkeys(self.reexports)),
            aliases=tuple(dict.fromkeys(self.aliases)),
            module_refs=tuple(sorted(self.module.refs())),
            module_names=tuple(sorted(self.module.bound - self.symbols.keys())),
        )

    # -- top level --------------------------------------------------------------------------

    def statement(self, node: Node) -> str | None:
        """Handle one top-level statement; return the name it declares, if a single symbol."""
        t = node.type
        if t in _FUNC_DECLS or t in _CLASS_DECLS or t in _TS_DECLS:
            name_node = node.child_by_field_name("name")
            if name_node is None:
                self.walk([node], self.module)
                return None
            name = self.text(name_node)
            if t in _FUNC_DECLS:
                self.function(node, name, "function")
            elif t in _CLASS_DECLS:
                self.klass(node, name)
            else:
                self.ts_declaration(node, name, _TS_DECLS[t])
            return name
        if t in _VAR_DECLS:
            self.declaration(node)
        elif t == "import_statement":
            self.import_statement(node)
        elif t == "export_statement":
            self.export_statement(node)
        elif t == "ambient_declaration":
            for child in node.named_children:
                self.statement(child)
        elif t == "expression_statement":
            self.expression_statement(node)
        elif t not in ("comment", "ERROR", "empty_statement", "hash_bang_line"):
            self.walk([node], self.module)
        return None

    def _symbol(self, qual: str, kind: str, node: Node) -> SymbolAcc:
        acc = self.symbols.get(qual)
        if acc is None:
            acc = self.symbols[qual] = SymbolAcc(kind, node.start_point[0] + 1)
        return acc

    def _roots(self, node: Node) -> list[Node]:
        """Named children of a definition node, without its name."""
        roots = []
        for i, child in enumerate(node.children):
            if child.is_named and node.field_name_for_child(i) not in _NAME_FIELDS:
                roots.append(child)
        return roots

    def function(
        self,
        node: Node,
        qual: str,
        kind: str,
        cls: str | None = None,
        methods: frozenset[str] = frozenset(),
        extra: tuple[Node, ...] = (),
    ) -> None:
        acc = self._symbol(qual, kind, node)
        scope = _Scope(cls, methods)
        self.walk([*extra, *self._roots(node)], scope)
        acc.refs |= scope.refs()

    def klass(self, node: Node, name: str) -> None:
        acc = self._symbol(name, "class", node)
        scope = _Scope(name)
        roots: list[Node] = []
        body: Node | None = None
        for child in self._roots(node):
            if child.type == "class_heritage":
                for clause in child.named_children:
                    if clause.type == "extends_clause":
                        for i, part in enumerate(clause.children):
                            if clause.field_name_for_child(i) == "value":
                                self._base(part, acc, roots)
                            elif part.is_named:
                                roots.append(part)
                    elif clause.type == "implements_clause":
                        for part in clause.named_children:
                            self._base(part, acc, roots)
                    else:
                        self._base(clause, acc, roots)
            elif child.type == "class_body":
                body = child
            else:
                roots.append(child)
        if body is not None:
            members = body.named_children
            methods: dict[Node, str] = {}
            for member in members:
                mname = self._method_name(member)
                if mname is not None:
                    methods[member] = mname
            names = frozenset(methods.values())
            scope.methods = names
            for member in members:
                mname = methods.get(member)
                if mname is None:
                    roots.append(member)
                elif member.type in _FIELDS:
                    value = member.child_by_field_name("value")
                    assert value is not None
                    extra = [c for c in self._roots(member) if c != value]
                    self.function(value, f"{name}.{mname}", "method", name, names, tuple(extra))
                else:
                    self.function(member, f"{name}.{mname}", "method", name, names)
        self.walk(roots, scope)
        acc.refs |= scope.refs()

    def _method_name(self, member: Node) -> str | None:
        t = member.type
        if t in _FIELDS:
            value = member.child_by_field_name("value")
            if value is None or value.type not in _FUNC_VALUES:
                return None
            name = member.child_by_field_name("property") or member.child_by_field_name("name")
        elif t in _METHODS:
            name = member.child_by_field_name("name")
        else:
            return None
        if name is None:
            return None
        if name.type in ("property_identifier", "private_property_identifier", "identifier"):
            return self.text(name)
        if name.type == "string":
            return self.string_value(name)
        return None

    def _base(self, node: Node, acc: SymbolAcc, roots: list[Node]) -> None:
        target = node
        if node.type == "generic_type":
            name = node.child_by_field_name("name")
            args = node.child_by_field_name("type_arguments")
            if args is not None:
                roots.append(args)
            if name is None:
                return
            target = name
        chain = self.dotted(target)
        if chain is None:
            roots.append(node)
        else:
            acc.bases.append(".".join(chain))

    def ts_declaration(self, node: Node, name: str, kind: str) -> None:
        acc = self._symbol(name, kind, node)
        scope = _Scope()
        roots: list[Node] = []
        for child in self._roots(node):
            if child.type == "extends_type_clause":
                for part in child.named_children:
                    self._base(part, acc, roots)
            else:
                roots.append(child)
        self.walk(roots, scope)
        acc.refs |= scope.refs()

    def declaration(self, node: Node) -> None:
        for decl in node.named_children:
            if decl.type == "variable_declarator":
                name = decl.child_by_field_name("name")
                value = decl.child_by_field_name("value")
                if name is not None and value is not None and name.type == "identifier":
                    qual = self.text(name)
                    extra = tuple(c for c in self._roots(decl) if c != value)
                    if value.type in _FUNC_VALUES or self._wraps_function(value):
                        self.function(value, qual, "function", extra=extra)
                        continue
                    if value.type in _CLASS_VALUES:
                        self.klass(value, qual)
                        continue
            self.walk([decl], self.module)

    def _wraps_function(self, value: Node) -> bool:
        if value.type != "call_expression":
            return False
        args = value.child_by_field_name("arguments")
        return args is not None and any(a.type in _FUNC_VALUES for a in args.named_children)

    def export_statement(self, node: Node) -> None:
        tokens = {c.type for c in node.children if not c.is_named}
        source = node.child_by_field_name("source")
        if source is not None:
            self.export_from(node, source, "*" in tokens)
            return
        decl = node.child_by_field_name("declaration")
        if decl is not None:
            declared = self.statement(decl)
            if "default" in tokens and declared:
                self.aliases.append(("default", declared))
            return
        value = node.child_by_field_name("value")
        if value is not None and "default" in tokens:
            self._default_value(value)
            return
        for part in node.named_children:
            if part.type == "export_clause":
                for name, alias in self._specifiers(part):
                    if alias != name:
                        self.aliases.append((alias, name))
            elif "=" in tokens and part.type != "comment":  # TS `export = Foo`
                self._default_value(part)
            elif part.type not in ("identifier", "comment"):
                self.walk([part], self.module)

    def _default_value(self, value: Node) -> None:
        if value.type == "identifier":
            self.aliases.append(("default", self.text(value)))
            return
        if value.type in _FUNC_VALUES or value.type in _CLASS_VALUES:
            name_node = value.child_by_field_name("name")
            name = self.text(name_node) if name_node is not None else "default"
            if value.type in _FUNC_VALUES:
                self.function(value, name, "function")
            else:
                self.klass(value, name)
            if name != "default":
                self.aliases.append(("default", name))
            return
        self.walk([value], self.module)

    def expression_statement(self, node: Node) -> None:
        expr = node.named_children[0] if node.named_child_count else None
        if expr is not None and expr.type == "assignment_expression":
            left = expr.child_by_field_name("left")
            right = expr.child_by_field_name("right")
            chain = self.dotted(left) if left is not None else None
            if chain is not None and right is not None:
                if chain == ["module", "exports"]:
                    self._default_value(right)
                    return
                if (len(chain) == 2 and chain[0] == "exports") or (
                    len(chain) == 3 and chain[:2] == ["module", "exports"]
                ):
                    name = chain[-1]
                    if right.type in _FUNC_VALUES:
                        self.function(right, name, "function")
                        return
                    if right.type in _CLASS_VALUES:
                        self.klass(right, name)
                        return
                    if right.type == "identifier":
                        local = self.text(right)
                        if local != name:
                            self.aliases.append((name, local))
                        return
        self.walk([node], self.module)

    # -- generic walk -----------------------------------------------------------------------

    def dotted(self, node: Node) -> list[str] | None:
        """``a.b.c`` (member chain, TS nested type/identifier) → parts; None otherwise."""
        t = node.type
        if t in ("identifier", "type_identifier", "property_identifier", "this"):
            return [self.text(node)]
        if t == "private_property_identifier":
            return [self.text(node)]
        if t == "member_expression":
            return self._member_chain(node)
        if t in ("nested_type_identifier", "nested_identifier"):
            parts: list[str] = []
            for child in node.named_children:
                sub = self.dotted(child)
                if sub is None:
                    return None
                parts.extend(sub)
            return parts or None
        return None

    def _member_chain(self, node: Node) -> list[str] | None:
        """:meth:`dotted` of a member expression, read down its objects in a loop.

        A chain of k parts is k nested nodes: read by recursion it cost k frames and k list
        copies, and :meth:`walk` asks again of each object in turn when the chain does not
        start at a name (``g().b0.b1…``), k² in all: 78 kB of such chains took 6.6 s. So the
        levels of a chain found not to start at a name are remembered (``self.unnamed``).
        """
        levels: list[Node] = []
        props: list[list[str]] = []
        head: list[str] | None = None
        while node.type == "member_expression" and node.id not in self.unnamed:
            levels.append(node)
            obj = node.child_by_field_name("object")
            prop = node.child_by_field_name("property")
            tail = None if prop is None or prop.type == "this" else self.dotted(prop)
            if obj is None or tail is None:
                break
            props.append(tail)
            node = obj
        else:
            head = None if node.type == "member_expression" else self.dotted(node)
        if head is None:
            self.unnamed.update(level.id for level in levels)
            return None
        for tail in reversed(props):
            head.extend(tail)
        return head

    def walk(self, roots: list[Node], scope: _Scope) -> None:
        stack = roots[::-1]
        uses = scope.uses
        bound = scope.bound
        text = self.text
        while stack:
            node = stack.pop()
            t = node.type
            if t in _USE_TYPES:
                uses.add(text(node))
                continue
            if t in _SKIP_TYPES:
                continue
            if t in _CHAIN_TYPES:
                chain = self.dotted(node)
                if chain is not None:
                    if chain[0] != "this":
                        uses.add(".".join(chain[:_MAX_CHAIN]))
                    elif scope.cls is not None and len(chain) > 1 and chain[1] in scope.methods:
                        uses.add(f"{scope.cls}.{chain[1]}")
                    continue
            elif t == "variable_declarator":
                name = node.child_by_field_name("name")
                if name is not None:
                    _pattern_names(self, name, bound)
                    value = node.child_by_field_name("value")
                    if value is not None:
                        self._require_binding(name, value)
            elif t == "formal_parameters":
                for param in node.named_children:
                    _pattern_names(self, param, bound)
            elif t == "arrow_function":
                single = node.child_by_field_name("parameter")
                if single is not None:
                    bound.add(text(single))
            elif t == "catch_clause":
                caught = node.child_by_field_name("parameter")
                if caught is not None:
                    _pattern_names(self, caught, bound)
            elif t == "for_in_statement":
                left = node.child_by_field_name("left")
                if left is not None:
                    _pattern_names(self, left, bound)
            elif t == "type_parameter" or t in _BINDING_DECLS:
                name = node.child_by_field_name("name")
                if name is not None:
                    bound.add(text(name))
            elif t == "call_expression":
                self._call_import(node)
            elif t == "jsx_opening_element" or t == "jsx_self_closing_element":
                name = node.child_by_field_name("name")
                if name is not None and name.type == "identifier" and text(name)[:1].islower():
                    stack.extend(c for c in node.named_children if c != name)
                    continue
            elif t == "template_string":
                stack.extend(c for c in node.named_children if c.type == "template_substitution")
                continue
            stack.extend(reversed(node.named_children))


_PATTERN_CONTAINERS = frozenset(
    {"object_pattern", "array_pattern", "rest_pattern", "formal_parameters"}
)


def _pattern_names(ex: _Extractor, node: Node, out: set[str]) -> None:
    """Add the names a binding pattern (or parameter) binds to ``out``."""
    stack = [node]
    while stack:
        n = stack.pop()
        t = n.type
        if t in ("identifier", "shorthand_property_identifier_pattern"):
            out.add(ex.text(n))
        elif t in _PATTERN_CONTAINERS:
            stack.extend(n.named_children)
        elif t == "pair_pattern":
            value = n.child_by_field_name("value")
            if value is not None:
                stack.append(value)
        elif t in ("assignment_pattern", "object_assignment_pattern"):
            left = n.child_by_field_name("left")
            if left is not None:
                stack.append(left)
        elif t in ("required_parameter", "optional_parameter"):
            pattern = n.child_by_field_name("pattern")
            if pattern is not None:
                stack.append(pattern)
