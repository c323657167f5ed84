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

from contextgraph.codegraph.build import build_graph
from contextgraph.codegraph.javascript import parse_javascript
from contextgraph.codegraph.model import (
    CODE_EXTENSIONS,
    CONFIG_FILENAMES,
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
from contextgraph.codegraph.python import parse_python


def parse_code(path: str, text: str) -> FileFacts:
    """Facts of one code file; ``path`` is source-relative posix, its extension picks the
    language. Raises :class:`CodeParseError` (one-line reason) when the file does not parse
    or the extension is not in :data:`CODE_EXTENSIONS`."""
    ext = posixpath.splitext(path)[1].lower()
    if ext == ".py":
        return parse_python(path, text)
    if ext in CODE_EXTENSIONS:
        return parse_javascript(path, text, ext)
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
