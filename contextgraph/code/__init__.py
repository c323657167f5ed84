"""Code graph: parse code files into facts, and build the graph of one source from them.

Pure functions, no I/O. :func:`parse_code` turns one file into :class:`FileFacts` (cacheable
as JSON); :func:`build_graph` resolves the facts of all code files of a source — imports,
inheritance, references — into entities and weighted relations. It is deterministic, so it
can be rerun over all cached facts whenever any file changes.

The rules are documented in the modules: :mod:`.python` and :mod:`.javascript` (what is
extracted, parse-failure rules), :mod:`.resolve` and :mod:`.tsconfig` (module resolution),
:mod:`.build` (entities, relations and weights).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from contextgraph.code.kinds import CODE_EXTENSIONS, CONFIG_FILENAMES

if TYPE_CHECKING:
    from contextgraph.code.build import build_graph
    from contextgraph.code.model import (
        FACTS_VERSION,
        BindingFact,
        CodeEntity,
        CodeGraph,
        CodeParseError,
        CodeRelation,
        FileFacts,
        ImportFact,
        SymbolFact,
    )


def __getattr__(name: str) -> Any:
    # The model, the builder and the parsers (tree-sitter's grammars) load on first use, so
    # that importing CODE_EXTENSIONS (every scan does, a no-change sync too) costs nothing.
    if name == "build_graph":
        from contextgraph.code.build import build_graph

        return build_graph
    if name in __all__:  # every other public name not defined here is the model's
        from contextgraph.code import model

        return getattr(model, name)
    raise AttributeError(f"module 'contextgraph.code' has no attribute {name!r}")


def parse_code(path: str, text: str) -> FileFacts:
    """Facts of one code file; ``path`` is source-relative posix, its extension picks the
    language. Raises :class:`CodeParseError` (one-line reason) when the file does not parse
    or the extension is not in :data:`CODE_EXTENSIONS`.

    Line ends are read as Python reads a source file (universal newlines: ``\\r\\n`` and a
    lone ``\\r`` end a line like ``\\n``), for every language: the newer-syntax rewrite and
    tree-sitter count ``\\n`` alone, and a file with old Mac line ends was one line to them."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    ext = posixpath.splitext(path)[1].lower()
    if ext == ".py":
        from contextgraph.code.python import parse_python

        return parse_python(path, text)
    if ext in CODE_EXTENSIONS:
        from contextgraph.code.javascript import parse_javascript

        return parse_javascript(path, text, ext)
    from contextgraph.code.model import CodeParseError

    raise CodeParseError(f"not a code file extension: {ext or path!r}")


__all__ = [
    "CODE_EXTENSIONS",
    "CONFIG_FILENAMES",
    "FACTS_VERSION",
    "BindingFact",
    "CodeEntity",
    "CodeGraph",
    "CodeParseError",
    "CodeRelation",
    "FileFacts",
    "ImportFact",
    "SymbolFact",
    "build_graph",
    "parse_code",
]
