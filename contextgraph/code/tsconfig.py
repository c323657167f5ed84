"""tsconfig.json / jsconfig.json: lenient parsing and ``baseUrl``/``paths`` mapping.

The text may hold ``//`` and ``/* */`` comments and trailing commas (as TypeScript accepts);
a text that still is no JSON object is ignored. A config applies to the files of its directory
and below, the nearest one winning (``tsconfig.json`` over ``jsconfig.json`` in the same
directory). ``extends`` is followed (array form too, up to 10 levels) when it names another
config passed to :func:`~contextgraph.code.build_graph` by a relative path (``.json`` may
be omitted); package configs (``@tsconfig/node20``) are ignored. ``baseUrl`` is relative to the
config that sets it, ``paths`` targets are relative to ``baseUrl`` or else to the config that
sets ``paths``.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from contextgraph.code.kinds import CONFIG_FILENAMES

_MAX_EXTENDS = 10


def loads_lenient(text: str) -> Any:
    """``json.loads`` that also accepts comments and trailing commas; raises ``ValueError``."""
    return json.loads(_strip_trailing_commas(_strip_comments(text.lstrip("\ufeff"))))


def _after_string(text: str, i: int) -> int:
    """The index after the JSON string that opens at ``text[i]`` (its end when unclosed)."""
    n = len(text)
    i += 1
    while i < n and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _strip_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    start = 0
    while i < n:
        c = text[i]
        if c == '"':
            i = _after_string(text, i)
        elif c == "/" and i + 1 < n and text[i + 1] in "/*":
            out.append(text[start:i])
            if text[i + 1] == "/":
                end = text.find("\n", i)
                i = n if end < 0 else end
            else:
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            out.append(" ")
            start = i
        else:
            i += 1
    out.append(text[start:])
    return "".join(out)


def _strip_trailing_commas(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    start = 0
    while i < n:
        c = text[i]
        if c == '"':
            i = _after_string(text, i)
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                out.append(text[start:i])
                start = i + 1
            i += 1
        else:
            i += 1
    out.append(text[start:])
    return "".join(out)


@dataclass(frozen=True)
class PathOptions:
    """Effective module-resolution options of one config (directories source-relative)."""

    base_url: str | None = None
    paths: tuple[tuple[str, tuple[str, ...]], ...] = ()
    paths_base: str = ""

    def candidates(self, spec: str) -> tuple[bool, list[str]]:
        """(a ``paths`` pattern other than ``*`` matched, candidate paths to probe in order).

        The pattern is the one equal to ``spec``, else the wildcard one with the longest
        prefix that matches (the first listed among equals), found through
        :attr:`_patterns`: one dictionary lookup per prefix of ``spec``, where a scan of every
        pattern for every import made a config of N patterns and N imports cost N * N.
        """
        exact, wild = self._patterns
        best: tuple[int, str, str, tuple[str, ...]] | None = None
        if spec in exact:
            best = (len(spec) + 1, "", spec, exact[spec])
        else:
            for cut in range(len(spec), -1, -1):
                for suffix, pattern, targets in wild.get(spec[:cut], ()):
                    if len(spec) >= cut + len(suffix) and spec.endswith(suffix):
                        best = (cut, spec[cut : len(spec) - len(suffix)], pattern, targets)
                        break
                if best is not None:
                    break
        out: list[str] = []
        matched = False
        if best is not None:
            _, captured, pattern, targets = best
            matched = pattern != "*"
            for target in targets:
                out.append(_join(self.paths_base, target.replace("*", captured, 1)))
        if self.base_url is not None:
            out.append(_join(self.base_url, spec))
        return matched, out

    @cached_property
    def _patterns(
        self,
    ) -> tuple[dict[str, tuple[str, ...]], dict[str, list[tuple[str, str, tuple[str, ...]]]]]:
        """(pattern without ``*`` -> targets, prefix -> [(suffix, pattern, targets)] in order)."""
        exact: dict[str, tuple[str, ...]] = {}
        wild: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
        for pattern, targets in self.paths:
            star = pattern.find("*")
            if star < 0:
                exact.setdefault(pattern, targets)
            else:
                wild.setdefault(pattern[:star], []).append((pattern[star + 1 :], pattern, targets))
        return exact, wild


def _join(base: str, rel: str) -> str:
    joined = posixpath.normpath(posixpath.join(base, rel))
    return "" if joined == "." else joined


@dataclass
class _Raw:
    dir: str
    base_url: str | None = None
    paths: dict[str, list[str]] | None = None
    paths_dir: str = ""
    extends: list[str] = field(default_factory=list)


def _read(path: str, text: str) -> _Raw | None:
    try:
        data = loads_lenient(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than json can read
        return None
    if not isinstance(data, dict):
        return None
    raw = _Raw(posixpath.dirname(path))
    ext = data.get("extends")
    if isinstance(ext, str):
        raw.extends = [ext]
    elif isinstance(ext, list):
        raw.extends = [e for e in ext if isinstance(e, str)]
    opts = data.get("compilerOptions")
    if isinstance(opts, dict):
        base = opts.get("baseUrl")
        if isinstance(base, str):
            raw.base_url = _join(raw.dir, base)
        paths = opts.get("paths")
        if isinstance(paths, dict):
            raw.paths = {
                k: [t for t in v if isinstance(t, str)]
                for k, v in paths.items()
                if isinstance(k, str) and isinstance(v, list)
            }
            raw.paths_dir = raw.dir
    return raw


def load_configs(configs: Mapping[str, str]) -> dict[str, PathOptions]:
    """Directory (source-relative, ``""`` for the root) → effective options of its config."""
    raws = {path: raw for path, text in configs.items() if (raw := _read(path, text))}

    # Each (config, depth) is merged once: a config that extends the same parent K times (or a
    # cycle) was followed K**depth times, 49 s for K = 5.
    @cache
    def effective(path: str, depth: int) -> _Raw | None:
        raw = raws.get(path)
        if raw is None or depth > _MAX_EXTENDS:
            return raw
        merged = _Raw(raw.dir)
        for ext in raw.extends:
            if not ext.startswith("."):
                continue
            target = _join(raw.dir, ext)
            if target not in raws and target + ".json" in raws:
                target += ".json"
            parent = effective(target, depth + 1)
            if parent is not None:
                if parent.base_url is not None:
                    merged.base_url = parent.base_url
                if parent.paths is not None:
                    merged.paths, merged.paths_dir = parent.paths, parent.paths_dir
        if raw.base_url is not None:
            merged.base_url = raw.base_url
        if raw.paths is not None:
            merged.paths, merged.paths_dir = raw.paths, raw.paths_dir
        return merged

    out: dict[str, PathOptions] = {}
    for path in sorted(raws, key=lambda p: (posixpath.basename(p) != "tsconfig.json", p)):
        if posixpath.basename(path) not in CONFIG_FILENAMES:
            continue
        directory = posixpath.dirname(path)
        if directory in out:
            continue
        eff = effective(path, 0)
        if eff is None:
            continue
        paths = tuple((k, tuple(v)) for k, v in (eff.paths or {}).items())
        base = eff.base_url if eff.base_url is not None else eff.paths_dir
        out[directory] = PathOptions(eff.base_url, paths, base)
    return out
