"""Build the code graph of one source from the facts of all its code files.

Entities: every file of ``files``, every symbol of those files, and an external ``package`` per
import that resolves outside the source (see :mod:`contextgraph.code.resolve`).

Relations (a repeated ``(src, dst, type)`` keeps its highest weight; ``path`` is the file whose
facts produced it, which is always the file of ``src``):

* ``defines`` file → symbol, 1.0.
* ``imports`` file → file, 1.0 (never a file to itself). ``from pkg import name`` points to
  ``pkg/name.py`` when that submodule exists, else to ``pkg/__init__.py``.
* ``imports_external`` file → package, 0.5.
* ``inherits`` class → class (also TS interfaces), 1.0, only when the base resolves through the
  same file or a resolved import — never by name matching.
* ``references`` symbol → symbol: 1.0 when the name is defined in the same file or bound by an
  import that resolves (through re-exports, ``__init__`` bindings, star imports,
  ``export … from`` and ``export default`` as well); 0.5 when the name is bound by nothing (or
  by a local import that resolves to no symbol) and exactly one symbol in the whole source (of
  the same language family: Python, or JS/TS) has that bare name — and that symbol is a
  module-level one, since a bare name cannot denote a method. Names bound to external packages,
  to module-level variables, by JS imports of files that are not code (``./x.css``), or that
  are builtins/globals (``len``, ``console``, ``Promise``…) are never name-matched.
  Attribute chains walk modules (``mod.Foo``), classes (``Foo.method``) and packages
  (``pkg.sub.Foo``); a chain ends at the last symbol reached.
  A JS name bound to a whole module (``const X = require('./x')``) that is used directly means
  that module's default export (``module.exports = X``). No symbol references itself.
  A class also references what its methods reference (except itself and its own methods),
  so that a class is linked to what it uses.
* ``references`` file → symbol from code at module level outside any symbol (e.g. ``main()``
  under ``if __name__ == "__main__":``, ``app = create_app()``), with the same weights, except
  to the file's own symbols (``defines`` already links those).

Name binding details: a name bound by several imports (``try: import x`` / ``except: import
y as x``) takes the first that resolves to something of the source; Python star imports bind
the public (not ``_private``) names of the module and ignore ``__all__``; JS ``export * from``
never re-exports ``default``. Import cycles and re-export cycles resolve to nothing.

Entities are ordered files, symbols, packages (each by key); relations by (src, dst, type).
The result depends only on the contents of ``files`` and ``configs``, not on their order.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

from contextgraph.code.model import (
    BindingFact,
    CodeEntity,
    CodeGraph,
    CodeRelation,
    FileFacts,
    ImportFact,
)
from contextgraph.code.resolve import JsModules, PyModules, Target

_CLASSLIKE = frozenset({"class", "interface"})
_KIND_ORDER = {"file": 0, "symbol": 1, "package": 2}

_PY_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__path__", "__all__", "__builtins__"}
_JS_GLOBALS_TEXT = """
    arguments console window document globalThis self process require module exports __dirname
    __filename Object Array String Number Boolean Symbol BigInt Math JSON Date RegExp Error
    TypeError RangeError SyntaxError ReferenceError EvalError URIError AggregateError Promise
    Map Set WeakMap WeakSet WeakRef Proxy Reflect Intl ArrayBuffer SharedArrayBuffer DataView
    Int8Array Uint8Array Uint8ClampedArray Int16Array Uint16Array Int32Array Uint32Array
    Float32Array Float64Array BigInt64Array BigUint64Array Function parseInt parseFloat isNaN
    isFinite encodeURI decodeURI encodeURIComponent decodeURIComponent setTimeout clearTimeout
    setInterval clearInterval setImmediate clearImmediate queueMicrotask requestAnimationFrame
    cancelAnimationFrame structuredClone fetch alert confirm prompt undefined NaN Infinity
    Buffer URL URLSearchParams TextEncoder TextDecoder Event EventTarget CustomEvent
    HTMLElement Element Node Response Request Headers FormData Blob File FileReader
    AbortController AbortSignal WebSocket Worker crypto performance navigator location history
    localStorage sessionStorage atob btoa global Partial Required Readonly Record Pick Omit
    Exclude Extract NonNullable ReturnType Parameters ConstructorParameters InstanceType
    Awaited ReadonlyArray Iterable Iterator IterableIterator AsyncIterable AsyncIterator
    Generator AsyncGenerator PromiseLike ArrayLike Uppercase Lowercase Capitalize Uncapitalize
    ThisType NoInfer JSX
"""
_JS_GLOBALS = frozenset(_JS_GLOBALS_TEXT.split())

_PENDING: Target = ("pending", "")
# The most modules one name is followed through (star imports, re-exports, import bindings:
# each a nested member() call). A chain of 400 modules, each `from next import *`, went deeper
# than Python's recursion limit and failed the whole sync. Past this, member() finds nothing
# (the fallback to the one symbol of a name still applies).
MAX_HOPS = 100


def build_graph(
    files: Mapping[str, FileFacts], configs: Mapping[str, str] | None = None
) -> CodeGraph:
    """The code graph of one source: ``files`` maps every code file's path to its facts,
    ``configs`` the paths of its tsconfig.json/jsconfig.json files to their text."""
    return _Builder(files, configs).build()


class _Builder:
    def __init__(self, files: Mapping[str, FileFacts], configs: Mapping[str, str] | None) -> None:
        self.paths = sorted(files)
        self.facts = files
        self.py = PyModules(p for p in self.paths if files[p].language == "python")
        self.js = JsModules((p for p in self.paths if files[p].language != "python"), configs)
        self.kinds: dict[str, str] = {}  # symbol key → kind
        self.top: dict[str, dict[str, str]] = {}  # path → module-level name → symbol key
        self.bindings: dict[str, dict[str, list[BindingFact]]] = {}
        self.reexports: dict[str, dict[str, list[BindingFact]]] = {}
        self.aliases: dict[str, dict[str, str]] = {}
        self.stars: dict[str, list[ImportFact]] = {}
        self.module_names: dict[str, frozenset[str]] = {}
        counts: dict[tuple[bool, str], list[str]] = {}
        for path in self.paths:
            f = files[path]
            top: dict[str, str] = {}
            for s in f.symbols:
                key = f"{path}::{s.qualname}"
                self.kinds.setdefault(key, s.kind)
                if "." not in s.qualname:
                    top.setdefault(s.qualname, key)
                counts.setdefault((f.language == "python", s.name), []).append(key)
            self.top[path] = top
            self.bindings[path] = _group(f.bindings)
            self.reexports[path] = _group(f.reexports)
            self.aliases[path] = dict(reversed(f.aliases))
            self.stars[path] = [i for i in f.imports if "*" in i.names]
            self.module_names[path] = frozenset(f.module_names)
        # bare name → the one module-level symbol of that name, when it is the only symbol of it
        self.unique: dict[tuple[bool, str], str] = {
            name: keys[0]
            for name, keys in counts.items()
            if len(keys) == 1 and "." not in keys[0].partition("::")[2]
        }
        self._members: dict[tuple[str, str, str], Target | None] = {}
        self._bound: dict[tuple[str, BindingFact], Target | None] = {}
        self._chains: dict[tuple[str, str, bool], tuple[str, float] | None] = {}
        self._hops = 0  # member() calls in progress: modules a resolution goes through
        self._binding = 0  # bound() calls in progress
        # local() answers found with no member() or bound() in progress (where no cycle's
        # placeholder can have stood in for an answer): a name bound by N imports of one file
        # was looked up through all N for each of its uses.
        self._locals: dict[tuple[str, str], Target | None] = {}
        self._star_modules: dict[str, list[Target]] = {}  # path -> its star imports' modules

    # -- resolution -------------------------------------------------------------------------

    def module(self, path: str, module: str, level: int) -> Target | None:
        if self.facts[path].language == "python":
            return self.py.resolve(module, level, path)
        return self.js.resolve(module, path)

    def bound(self, path: str, b: BindingFact) -> Target | None:
        """What an import binding denotes: a symbol, a module, an external package, or None."""
        key = (path, b)
        if key in self._bound:
            return self._bound[key]
        self._bound[key] = None  # a cycle resolves to nothing
        self._binding += 1
        try:
            target = self.module(path, b.module, b.level)
            if target is not None and target[0] != "ext" and b.attr is not None:
                target = self.member(target, b.attr)
        finally:
            self._binding -= 1
        self._bound[key] = target
        return target

    def member(self, mod: Target, name: str) -> Target | None:
        """Attribute ``name`` of module ``mod`` (cycle-safe, memoized)."""
        key = (mod[0], mod[1], name)
        found = self._members.get(key, _PENDING)
        if found is not _PENDING:
            return found
        if self._hops >= MAX_HOPS:
            return None  # through more modules than any real chain: not followed
        self._members[key] = None
        self._hops += 1
        try:
            found = (
                self._member_py(mod[1], name) if mod[0] == "py" else self._member_js(mod[1], name)
            )
        finally:
            self._hops -= 1
        self._members[key] = found
        return found

    def _member_py(self, key: str, name: str) -> Target | None:
        path = self.py.file(key)
        if path is not None and path in self.facts:
            found = self.local(path, name)
            if found is not None:
                return found
        sub = self.py.child(key, name)
        if sub is not None:
            return ("py", sub)
        if path is not None and path in self.facts:
            return self._from_stars(path, name)
        return None

    def _member_js(self, path: str, name: str) -> Target | None:
        if path not in self.facts:
            return None
        local = self.aliases[path].get(name)
        if local is not None:
            found = self.local(path, local)
            if found is not None:
                return found
        if name == "default":
            sym = self.top[path].get("default")
            return ("sym", sym) if sym else None
        found = self.local(path, name)
        if found is not None:
            return found
        for b in self.reexports[path].get(name, ()):
            found = self.bound(path, b)
            if found is not None:
                return found
        return self._from_stars(path, name)

    def _from_stars(self, path: str, name: str) -> Target | None:
        if name.startswith("_") and self.facts[path].language == "python":
            return None  # `from m import *` skips private names
        for mod in self._stars_of(path):
            found = self.member(mod, name)
            if found is not None and found[0] != "ext":
                return found
        return None

    def _stars_of(self, path: str) -> list[Target]:
        """The modules of ``path``'s star imports that are in the graph, in import order,
        resolved once (each name looked up through them resolved them all again)."""
        mods = self._star_modules.get(path)
        if mods is None:
            resolved = (self.module(path, star.module, star.level) for star in self.stars[path])
            mods = self._star_modules[path] = [m for m in resolved if m and m[0] != "ext"]
        return mods

    def local(self, path: str, name: str) -> Target | None:
        """A module-level name of ``path``: its own symbol, else what its import binds."""
        key = (path, name)
        if key in self._locals:
            return self._locals[key]
        settled = self._hops == 0 and self._binding == 0
        found = self._local(path, name)
        if settled:
            self._locals[key] = found
        return found

    def _local(self, path: str, name: str) -> Target | None:
        sym = self.top[path].get(name)
        if sym is not None:
            return ("sym", sym)
        external: Target | None = None
        for b in self.bindings[path].get(name, ()):
            found = self.bound(path, b)
            if found is not None:
                if found[0] != "ext":
                    return found
                external = external or found
        return external

    def head(self, path: str, name: str, fallback: bool) -> tuple[Target, float] | None:
        found = self.local(path, name)
        if found is not None:
            return None if found[0] == "ext" else (found, 1.0)
        python = self.facts[path].language == "python"
        bindings = self.bindings[path].get(name)
        if bindings:
            # A JS import of a file that is not code (./styles.css, ./data.json) binds a name
            # that no symbol can stand for; a Python import that failed may just be missed.
            if not python and all(self.module(path, b.module, 0) is None for b in bindings):
                return None
        else:
            if name in self.module_names[path]:
                return None
            found = self._from_stars(path, name)
            if found is not None:
                return found, 1.0
            if name in (_PY_BUILTINS if python else _JS_GLOBALS):
                return None
        if fallback:
            key = self.unique.get((python, name))
            if key is not None:
                return ("sym", key), 0.5
        return None

    def resolve(self, path: str, dotted: str, fallback: bool) -> tuple[str, float] | None:
        """The symbol a dotted name used in ``path`` denotes, with the weight of the match."""
        key = (path, dotted, fallback)
        if key not in self._chains:
            self._chains[key] = self.chain(path, dotted, fallback)
        return self._chains[key]

    def chain(self, path: str, dotted: str, fallback: bool) -> tuple[str, float] | None:
        parts = dotted.split(".")
        start = self.head(path, parts[0], fallback)
        if start is None:
            return None
        target, weight = start
        best = target[1] if target[0] == "sym" else None
        for part in parts[1:]:
            nxt: Target | None = None
            if target[0] == "sym":
                method = f"{target[1]}.{part}"
                nxt = ("sym", method) if method in self.kinds else None
            elif target[0] in ("py", "js"):
                nxt = self.member(target, part)
            if nxt is None or nxt[0] == "ext":
                break
            target = nxt
            if target[0] == "sym":
                best = target[1]
        if best is None and target[0] == "js" and len(parts) == 1:
            default = self.member(target, "default")
            if default is not None and default[0] == "sym":
                best = default[1]
        return (best, weight) if best is not None else None

    def import_targets(self, path: str, imp: ImportFact) -> list[tuple[str, str]]:
        """("file", path) and ("ext", package) targets of one import."""
        mod = self.module(path, imp.module, imp.level)
        if mod is None:
            return []
        if mod[0] != "py":
            return [("file", mod[1]) if mod[0] == "js" else mod]
        out: list[tuple[str, str]] = []
        whole = not imp.names or "*" in imp.names
        for name in imp.names:
            sub = self.py.child(mod[1], name) if name != "*" else None
            sub_file = self.py.file(sub) if sub is not None else None
            if sub_file is not None:
                out.append(("file", sub_file))
            else:
                whole = True
        own = self.py.file(mod[1])
        if whole and own is not None:
            out.append(("file", own))
        return out

    # -- graph ------------------------------------------------------------------------------

    def build(self) -> CodeGraph:
        entities: list[CodeEntity] = []
        packages: set[str] = set()
        rels: dict[tuple[tuple[str, str], tuple[str, str], str], tuple[float, str]] = {}

        def add(src: tuple[str, str], dst: tuple[str, str], typ: str, w: float, path: str) -> None:
            old = rels.get((src, dst, typ))
            if old is None or w > old[0]:
                rels[(src, dst, typ)] = (w, path)

        for path in self.paths:
            f = self.facts[path]
            fnode = ("file", path)
            entities.append(CodeEntity("file", path, path, path))
            seen: set[str] = set()
            for s in f.symbols:
                key = f"{path}::{s.qualname}"
                if key in seen:
                    continue
                seen.add(key)
                entities.append(CodeEntity("symbol", key, s.name, path))
                add(fnode, ("symbol", key), "defines", 1.0, path)
            for imp in f.imports:
                for kind, target in self.import_targets(path, imp):
                    if kind == "ext":
                        packages.add(target)
                        add(fnode, ("package", target), "imports_external", 0.5, path)
                    elif target != path:
                        add(fnode, ("file", target), "imports", 1.0, path)
            for s in f.symbols:
                key = f"{path}::{s.qualname}"
                snode = ("symbol", key)
                for base in s.bases:
                    hit = self.resolve(path, base, False)
                    if hit is not None and hit[0] != key and self.kinds[hit[0]] in _CLASSLIKE:
                        add(snode, ("symbol", hit[0]), "inherits", 1.0, path)
                owner = key.rpartition(".")[0] if "." in s.qualname else ""
                for ref in s.refs:
                    hit = self.resolve(path, ref, True)
                    if hit is None or hit[0] == key:
                        continue
                    add(snode, ("symbol", hit[0]), "references", hit[1], path)
                    if owner and hit[0] != owner and not hit[0].startswith(owner + "."):
                        add(("symbol", owner), ("symbol", hit[0]), "references", hit[1], path)
            own = f"{path}::"
            for ref in f.module_refs:
                hit = self.resolve(path, ref, True)
                if hit is not None and not hit[0].startswith(own):
                    add(fnode, ("symbol", hit[0]), "references", hit[1], path)

        entities.extend(CodeEntity("package", p, p, None) for p in packages)
        entities.sort(key=lambda e: (_KIND_ORDER[e.kind], e.key))
        relations = [
            CodeRelation(src, dst, typ, w, path)
            for (src, dst, typ), (w, path) in sorted(rels.items(), key=lambda kv: kv[0])
        ]
        return CodeGraph(tuple(entities), tuple(relations))


def _group(bindings: tuple[BindingFact, ...]) -> dict[str, list[BindingFact]]:
    out: dict[str, list[BindingFact]] = {}
    for b in bindings:
        out.setdefault(b.name, []).append(b)
    return out
