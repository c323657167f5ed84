"""Data model of the code graph: per-file facts (JSON-cacheable) and the built graph."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: Bumped whenever the shape or meaning of :class:`FileFacts` changes; ``from_json`` rejects
#: facts of another version with ``ValueError`` so that a cache re-parses instead of misreading.
FACTS_VERSION = 1

LANGUAGES = ("python", "javascript", "typescript")


class CodeParseError(Exception):
    """A code file could not be parsed; ``str(e)`` is a one-line reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(" ".join(reason.split()))


@dataclass(frozen=True)
class SymbolFact:
    """A symbol defined in a file.

    ``qualname`` is ``Name`` for module-level definitions and ``Class.method`` for methods.
    ``bases`` are dotted expressions of base classes (``Base``, ``mod.Base``); ``refs`` are the
    dotted names used in the symbol's own body (sorted, unique), ``Class.method`` for
    ``self.method``/``this.method`` uses of the same class.
    """

    qualname: str
    kind: str  # class | function | method | interface | type | enum
    line: int
    bases: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]


@dataclass(frozen=True)
class ImportFact:
    """One imported module: the source of a file-level ``imports`` edge.

    Python: ``module`` is the dotted name without leading dots, ``level`` the number of leading
    dots, ``names`` the imported names of ``from module import names`` (``*`` for a star
    import). JS/TS: ``module`` is the specifier, ``level`` is 0, and ``names`` is ``("*",)``
    for ``export * from``.
    """

    module: str
    level: int = 0
    names: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class BindingFact:
    """A name bound by an import (or, in ``FileFacts.reexports``, exported from another module).

    ``attr`` is ``None`` when the name is the module itself (``import x``, ``import * as x``,
    ``const x = require('x')``), else the name taken from the module (``default`` for a JS
    default import).
    """

    name: str
    module: str
    level: int = 0
    attr: str | None = None


@dataclass(frozen=True)
class FileFacts:
    """Everything :func:`build_graph` needs from one file; round-trips through JSON."""

    path: str
    language: str  # python | javascript | typescript
    symbols: tuple[SymbolFact, ...] = ()
    imports: tuple[ImportFact, ...] = ()
    bindings: tuple[BindingFact, ...] = ()
    reexports: tuple[BindingFact, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()  # JS: (exported name, local name)
    module_refs: tuple[str, ...] = ()  # names used by top-level code outside any symbol
    module_names: tuple[str, ...] = ()  # top-level names bound to something other than a symbol

    def to_json(self) -> str:
        data = {
            "v": FACTS_VERSION,
            "path": self.path,
            "language": self.language,
            "symbols": [
                [s.qualname, s.kind, s.line, list(s.bases), list(s.refs)] for s in self.symbols
            ],
            "imports": [[i.module, i.level, list(i.names), i.line] for i in self.imports],
            "bindings": [[b.name, b.module, b.level, b.attr] for b in self.bindings],
            "reexports": [[b.name, b.module, b.level, b.attr] for b in self.reexports],
            "aliases": [list(a) for a in self.aliases],
            "module_refs": list(self.module_refs),
            "module_names": list(self.module_names),
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str) -> FileFacts:
        """Rebuild facts from :meth:`to_json` output; ``ValueError`` if malformed or outdated."""
        try:
            raw = json.loads(data)
            if not isinstance(raw, dict) or raw.get("v") != FACTS_VERSION:
                raise ValueError("unsupported facts version")
            language = _str(raw["language"])
            if language not in LANGUAGES:
                raise ValueError(f"unknown language {language!r}")
            return cls(
                path=_str(raw["path"]),
                language=language,
                symbols=tuple(
                    SymbolFact(_str(q), _str(k), _int(ln), _strs(b), _strs(r))
                    for q, k, ln, b, r in _list(raw["symbols"])
                ),
                imports=tuple(
                    ImportFact(_str(m), _int(lv), _strs(n), _int(ln))
                    for m, lv, n, ln in _list(raw["imports"])
                ),
                bindings=tuple(_binding(b) for b in _list(raw["bindings"])),
                reexports=tuple(_binding(b) for b in _list(raw["reexports"])),
                aliases=tuple((_str(e), _str(loc)) for e, loc in _list(raw["aliases"])),
                module_refs=_strs(raw["module_refs"]),
                module_names=_strs(raw["module_names"]),
            )
        except (KeyError, TypeError) as e:  # wrong shapes surface as unpacking/lookup errors
            raise ValueError(f"malformed file facts: {e}") from e


def _binding(raw: Any) -> BindingFact:
    name, module, level, attr = _list(raw)
    return BindingFact(_str(name), _str(module), _int(level), None if attr is None else _str(attr))


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError(f"expected a list, got {type(v).__name__}")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an integer, got {type(v).__name__}")
    return v


def _strs(v: Any) -> tuple[str, ...]:
    return tuple(_str(x) for x in _list(v))


@dataclass(frozen=True)
class CodeEntity:
    kind: str  # file | symbol | package
    key: str  # file: path; symbol: "path::Qual.Name"; package: name
    name: str  # file: path; symbol: bare name; package: name
    path: str | None  # defining file for file/symbol, None for package


@dataclass(frozen=True)
class CodeRelation:
    src: tuple[str, str]  # (kind, key)
    dst: tuple[str, str]
    type: str  # imports | defines | inherits | references | imports_external
    weight: float
    path: str  # the file whose facts produced this relation


@dataclass(frozen=True)
class CodeGraph:
    entities: tuple[CodeEntity, ...]
    relations: tuple[CodeRelation, ...]
