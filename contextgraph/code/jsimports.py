"""The import side of JavaScript/TypeScript extraction (see :mod:`.javascript`).

``import … from``, ``import 'x'``, ``export … from``, ``require('x')`` and ``import('x')`` with a
string (or substitution-free template) literal, TS ``import x = require('x')``: the imports of a
file, the local names they bind and the names it re-exports.
"""

from __future__ import annotations

import tree_sitter

from contextgraph.code.model import BindingFact, ImportFact

Node = tree_sitter.Node


class JsImports:
    """Imports, bindings and re-exports of one file, collected while its tree is walked."""

    def __init__(self, src: bytes) -> None:
        self.src = src
        self.imports: list[ImportFact] = []
        self.bindings: list[BindingFact] = []
        self.reexports: list[BindingFact] = []

    def text(self, node: Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def string_value(self, node: Node | None) -> str | None:
        """The value of a string literal (or a template literal without substitutions)."""
        if node is None:
            return None
        if node.type == "string" or (
            node.type == "template_string"
            and not any(c.type == "template_substitution" for c in node.named_children)
        ):
            raw = self.text(node)
            return raw[1:-1] if len(raw) >= 2 else None
        return None

    def import_statement(self, node: Node) -> None:
        source = node.child_by_field_name("source")
        clauses = node.named_children
        if source is None:
            for clause in clauses:
                if clause.type == "import_require_clause":
                    source = clause.child_by_field_name("source")
        spec = self.string_value(source)
        if spec is None:
            return
        self.imports.append(ImportFact(spec, 0, (), node.start_point[0] + 1))
        for clause in clauses:
            if clause.type == "import_require_clause":
                for ident in clause.named_children:
                    if ident.type == "identifier":
                        self.bindings.append(BindingFact(self.text(ident), spec, 0, None))
                        break
            if clause.type != "import_clause":
                continue
            for part in clause.named_children:
                if part.type == "identifier":
                    self.bindings.append(BindingFact(self.text(part), spec, 0, "default"))
                elif part.type == "namespace_import":
                    for ident in part.named_children:
                        if ident.type == "identifier":
                            self.bindings.append(BindingFact(self.text(ident), spec, 0, None))
                elif part.type == "named_imports":
                    for name, alias in self._specifiers(part):
                        self.bindings.append(BindingFact(alias, spec, 0, name))

    def _specifiers(self, node: Node) -> list[tuple[str, str]]:
        """(name, local-or-exported alias) of the import/export specifiers under ``node``."""
        out = []
        for s in node.named_children:
            if s.type not in ("import_specifier", "export_specifier"):
                continue
            name_node = s.child_by_field_name("name")
            alias_node = s.child_by_field_name("alias")
            name = self._name_text(name_node)
            alias = self._name_text(alias_node) if alias_node is not None else name
            if name and alias:
                out.append((name, alias))
        return out

    def _name_text(self, node: Node | None) -> str | None:
        if node is None:
            return None
        if node.type == "string":
            return self.string_value(node)
        return self.text(node)

    def export_from(self, node: Node, source: Node, star: bool) -> None:
        """``export … from 'x'``: an import of ``x`` and the names it re-exports."""
        spec = self.string_value(source)
        if spec is None:
            return
        for part in node.named_children:
            if part.type == "export_clause":
                for name, alias in self._specifiers(part):
                    self.reexports.append(BindingFact(alias, spec, 0, name))
            elif part.type == "namespace_export":
                for ident in part.named_children:
                    ns = self._name_text(ident) if ident.type in ("identifier", "string") else None
                    if ns:
                        self.reexports.append(BindingFact(ns, spec, 0, None))
        names = ("*",) if star else ()
        self.imports.append(ImportFact(spec, 0, names, node.start_point[0] + 1))

    def _call_import(self, node: Node) -> None:
        spec = self._require_spec(node, dynamic=True)
        if spec is not None:
            self.imports.append(ImportFact(spec, 0, (), node.start_point[0] + 1))

    def _require_spec(self, node: Node, dynamic: bool = False) -> str | None:
        if node.type != "call_expression":
            return None
        fn = node.child_by_field_name("function")
        if fn is None:
            return None
        if not (
            (fn.type == "identifier" and self.text(fn) == "require")
            or (dynamic and fn.type == "import")
        ):
            return None
        args = node.child_by_field_name("arguments")
        if args is None or args.named_child_count != 1:
            return None
        arg = args.named_children[0]
        return self.string_value(arg)

    def _require_binding(self, name: Node, value: Node) -> None:
        attr: str | None = None
        if value.type == "member_expression":
            prop = value.child_by_field_name("property")
            obj = value.child_by_field_name("object")
            if prop is None or obj is None:
                return
            attr = self.text(prop)
            value = obj
        spec = self._require_spec(value)
        if spec is None:
            return
        if name.type == "identifier":
            self.bindings.append(BindingFact(self.text(name), spec, 0, attr))
        elif name.type == "object_pattern" and attr is None:
            for part in name.named_children:
                if part.type == "shorthand_property_identifier_pattern":
                    local = self.text(part)
                    self.bindings.append(BindingFact(local, spec, 0, local))
                elif part.type == "object_assignment_pattern":
                    left = part.child_by_field_name("left")
                    if left is not None:
                        local = self.text(left)
                        self.bindings.append(BindingFact(local, spec, 0, local))
                elif part.type == "pair_pattern":
                    key = part.child_by_field_name("key")
                    val = part.child_by_field_name("value")
                    if key is not None and val is not None and val.type == "identifier":
                        self.bindings.append(
                            BindingFact(self.text(val), spec, 0, self._name_text(key))
                        )


__all__ = ["JsImports", "Node"]
