"""Module resolution: which file (or external package) an import names.

Python (``.py`` files only; keys are slash-separated module paths such as ``pkg/sub/mod``):

* import roots are the source root and, when it holds code, a top-level ``src/`` directory;
* ``pkg/__init__.py`` is module ``pkg``; a directory without ``__init__.py`` is a namespace
  package (a module without a file); ``pkg/__init__.py`` wins over ``pkg.py``, which wins over a
  namespace directory ``pkg/``;
* relative imports follow ``importlib.util.resolve_name`` on paths: level 1 is the importing
  file's directory, each further level its parent; reaching an import root (the source root,
  ``src/``) that has no ``__init__.py`` fails like "beyond top-level package" does;
* an absolute import found under no root is looked up next to the importing file when that
  file's directory is not a regular package (scripts and test directories run with their own
  directory on ``sys.path``);
* an absolute import whose top-level name is no module of the source is the external package of
  that top-level name (``requests.adapters`` → ``requests``; the standard library included);
  one whose top-level name is local but that resolves to no file is left unresolved.

JavaScript/TypeScript (all JS/TS files):

* ``./`` and ``../`` specifiers are probed as is, with ``.js .jsx .mjs .cjs`` swapped for their
  TypeScript sources (``./a.js`` → ``a.ts``/``a.tsx``), then with the extensions ``.ts .tsx
  .d.ts .js .jsx .mjs .cjs``, then as a directory with ``index`` and those extensions;
  ``/x`` is taken from the source root; climbing above the source root fails;
* other specifiers go through the nearest tsconfig/jsconfig ``paths`` (longest prefix wins,
  targets tried in order) and ``baseUrl``; a specifier matching a ``paths`` pattern other than
  ``*`` that resolves to no file stays unresolved;
* the rest are external packages: ``node:fs`` → ``fs``, ``lodash/fp`` → ``lodash``,
  ``@scope/pkg/x`` → ``@scope/pkg``; specifiers that are no valid package name (``@/x``,
  ``#internal``, ``~/x``, URLs) are left unresolved.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping

from contextgraph.code.tsconfig import PathOptions, load_configs

#: A resolved target: ("py", module key) | ("js", file path) | ("sym", symbol key) |
#: ("ext", package name).
Target = tuple[str, str]

JS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs")
_JS_SWAPS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}
_PACKAGE = re.compile(r"(?:@[A-Za-z0-9][\w.~-]*/)?[A-Za-z0-9][\w.~-]*")


class PyModules:
    def __init__(self, paths: Iterable[str]) -> None:
        index: dict[str, tuple[int, str | None]] = {"": (3, None)}
        packages: set[str] = set()
        for path in paths:
            stem = path[:-3]
            if stem == "__init__" or stem.endswith("/__init__"):
                key = posixpath.dirname(stem)
                packages.add(key)
                rank = 0
            else:
                key = stem
                rank = 1
            old = index.get(key)
            if old is None or (rank, path) < (old[0], old[1] or ""):
                index[key] = (rank, path)
            directory = posixpath.dirname(key)
            while directory and directory not in index:
                index[directory] = (2, None)
                directory = posixpath.dirname(directory)
        self.index: dict[str, str | None] = {k: v[1] for k, v in index.items()}
        self.packages = packages
        has_src = any(k.startswith("src/") for k in self.index)
        self.roots: tuple[str, ...] = ("", "src") if has_src else ("",)
        self._cache: dict[tuple[str, int, str], Target | None] = {}

    def file(self, key: str) -> str | None:
        return self.index.get(key)

    def child(self, key: str, name: str) -> str | None:
        """The key of submodule ``name`` of module ``key``, if the source has it."""
        sub = f"{key}/{name}" if key else name
        return sub if sub in self.index else None

    def resolve(self, module: str, level: int, importer: str) -> Target | None:
        directory = posixpath.dirname(importer)
        cache_key = (module, level, directory)
        if cache_key in self._cache:
            return self._cache[cache_key]
        result = self._resolve(module, level, directory)
        self._cache[cache_key] = result
        return result

    def _resolve(self, module: str, level: int, directory: str) -> Target | None:
        rel = module.replace(".", "/")
        if level > 0:
            base = directory
            for _ in range(level - 1):
                if not base:
                    return None
                base = posixpath.dirname(base)
            if base in self.roots and base not in self.packages:
                return None  # beyond the top-level package
            key = f"{base}/{rel}" if base and rel else (base or rel)
            return ("py", key) if key in self.index else None
        if not module:
            return None
        for root in self.roots:
            key = f"{root}/{rel}" if root else rel
            if key in self.index:
                return ("py", key)
        sibling = directory and directory not in self.packages
        if sibling:
            key = f"{directory}/{rel}"
            if key in self.index:
                return ("py", key)
        top = rel.partition("/")[0]
        local = [f"{root}/{top}" if root else top for root in self.roots]
        if sibling:
            local.append(f"{directory}/{top}")
        if any(k in self.index for k in local) or not top.isidentifier():
            return None
        return ("ext", top)


class JsModules:
    def __init__(self, paths: Iterable[str], configs: Mapping[str, str] | None) -> None:
        self.files = frozenset(paths)
        self.options = load_configs(configs or {})
        self._dir_options: dict[str, PathOptions | None] = {}
        self._cache: dict[tuple[str, str], Target | None] = {}

    def resolve(self, spec: str, importer: str) -> Target | None:
        directory = posixpath.dirname(importer)
        key = (spec, directory)
        if key in self._cache:
            return self._cache[key]
        result = self._resolve(spec, directory)
        self._cache[key] = result
        return result

    def _resolve(self, spec: str, directory: str) -> Target | None:
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            found = self.probe(posixpath.join(directory, spec))
            return ("js", found) if found else None
        if spec.startswith("/"):
            found = self.probe(spec.lstrip("/"))
            return ("js", found) if found else None
        options = self._options_for(directory)
        if options is not None:
            matched, candidates = options.candidates(spec)
            for candidate in candidates:
                found = self.probe(candidate)
                if found:
                    return ("js", found)
            if matched:
                return None
        name = package_name(spec)
        return ("ext", name) if name else None

    def _options_for(self, directory: str) -> PathOptions | None:
        """The options of the nearest config at or above ``directory``, remembered for every
        folder on the way up (a loop: a folder a thousand levels deep is no recursion)."""
        known, options = self._dir_options, self.options
        climbed: list[str] = []
        found: PathOptions | None = None
        while directory not in known:
            climbed.append(directory)
            if directory in options:
                found = options[directory]
                break
            if not directory:
                break
            directory = posixpath.dirname(directory)
        else:
            found = known[directory]
        for folder in climbed:
            known[folder] = found
        return found

    def probe(self, path: str) -> str | None:
        path = posixpath.normpath(path) if path else ""
        if path == ".":
            path = ""
        if path == ".." or path.startswith("../"):
            return None
        files = self.files
        if path in files:
            return path
        stem, ext = posixpath.splitext(path)
        for swap in _JS_SWAPS.get(ext, ()):
            if stem + swap in files:
                return stem + swap
        if path:
            for ext in JS_EXTENSIONS:
                if path + ext in files:
                    return path + ext
        index = f"{path}/index" if path else "index"
        for ext in JS_EXTENSIONS:
            if index + ext in files:
                return index + ext
        return None


def package_name(spec: str) -> str | None:
    """npm package of a bare specifier (``node:fs`` → ``fs``, ``@s/p/x`` → ``@s/p``)."""
    if spec.startswith("node:"):
        spec = spec[5:]
    if "://" in spec:
        return None
    parts = spec.split("/")
    name = "/".join(parts[:2]) if spec.startswith("@") else parts[0]
    return name if _PACKAGE.fullmatch(name) else None
