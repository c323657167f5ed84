"""Code graphs under hostile input: what failed a whole sync, or grew faster than the input, in a
hunt for such inputs (stop 41). Each test fails on the code before its fix."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import remove_deep
from hypothesis import given, settings
from hypothesis import strategies as st

from contextgraph import ContextGraph
from contextgraph.code import CodeParseError, build_graph, parse_code
from contextgraph.code.python_compat import _bound_and_default, downlevel, may_hold_newer_syntax
from contextgraph.code.tsconfig import PathOptions, _join, load_configs
from contextgraph.sync.scan import scan


def sync_and_check(root: Path, db_path: Path) -> ContextGraph:
    graph = ContextGraph.open(db_path)
    report = graph.sync([root])
    assert report.failed == [] and graph.doctor().ok
    return graph


def test_a_tsconfig_nested_deeper_than_json_reads_is_no_config(
    tmp_path: Path, db_path: Path
) -> None:
    root = tmp_path / "ts"
    root.mkdir()
    (root / "tsconfig.json").write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    (root / "a.ts").write_text("import { x } from 'lib';\nexport const y = x;\n", "utf-8")
    assert load_configs({"tsconfig.json": "[" * 5000 + "]" * 5000}) == {}
    with sync_and_check(root, db_path) as graph:
        assert graph.expand(["a.ts"]).matched == ("a.ts",)


def test_a_tsconfig_extending_itself_many_times_is_read_once(tmp_path: Path) -> None:
    config = json.dumps(
        {"extends": ["./tsconfig.json"] * 12, "compilerOptions": {"baseUrl": "src"}}
    )
    options = load_configs({"tsconfig.json": config})  # was 12**11 merges: never finished
    assert options[""].base_url == "src"


def test_a_file_a_thousand_folders_deep_is_synced(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "deep"
    root.mkdir()
    depth = 1100
    folder = os.open(root, os.O_RDONLY)
    try:  # relative to a folder descriptor: no path here passes PATH_MAX
        for _ in range(depth):
            os.mkdir("a", dir_fd=folder)
            inner = os.open("a", os.O_RDONLY, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open("x.js", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=folder)
        os.write(fd, b"import React from 'react';\nexport function f() { return React; }\n")
        os.close(fd)
    finally:
        os.close(folder)
    try:
        assert [f.path.count("/") for f in scan(root).files] == [depth]
        with sync_and_check(root, db_path) as graph:
            assert graph.stats().files == {"code": 1}
    finally:
        remove_deep(
            root, "a", depth, "x.js"
        )  # shutil.rmtree (pytest's too) recurses once per level


def test_two_symbols_that_spell_one_key_do_not_fail_the_sync(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "clash"
    root.mkdir()
    (root / "x.js").write_text('export class Cls {\n  "js::f"() { return 1; }\n}\n', "utf-8")
    (root / "x.js::Cls.js").write_text("export function f() { return 2; }\n", "utf-8")
    with sync_and_check(root, db_path) as graph:
        assert graph.expand(["Cls"]).matched == ("Cls",)


def test_a_module_level_if_with_a_thousand_elifs_keeps_its_facts() -> None:
    branches = "".join(f"elif x == {i}:\n    def f{i}(): pass\n" for i in range(1000))
    facts = parse_code("many.py", "x = 0\nif x < 0:\n    def neg(): pass\n" + branches)
    assert {s.qualname for s in facts.symbols} == {"neg", *(f"f{i}" for i in range(1000))}


_OLD_PARAM = re.compile(
    rb"\s*\*{0,2}\s*\w+\s*(?::(?P<bound>[^=]+?))?\s*(?:=(?P<default>.+))?\s*$", re.S
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from([" ", ":", "=", "*", "a", "\n", "é", "1", "\t", "\r", "\f"])))
def test_a_type_parameters_bound_and_default_are_what_the_pattern_gave(parts: list[str]) -> None:
    param = "".join(parts).encode()
    match = _OLD_PARAM.match(param)
    groups = () if match is None else (match["bound"], match["default"])
    assert _bound_and_default(param) == [g.strip() for g in groups if g and g.strip()]


def test_a_type_parameter_with_a_long_run_of_blanks_is_read() -> None:
    text = "type A[T: int" + " " * 20000 + "| str] = int\n\ndef after(): pass\n"
    facts = parse_code("alias.py", text)  # was cubic: 2,000 blanks took 10 s
    assert "after" in {s.qualname for s in facts.symbols}


def test_every_graph_of_the_hostile_inputs_builds(tmp_path: Path) -> None:
    files = {
        "x.js": parse_code("x.js", 'export class Cls {\n  "js::f"() { return 1; }\n}\n'),
        "x.js::Cls.js": parse_code("x.js::Cls.js", "export function f() { return 2; }\n"),
    }
    keys = [e.key for e in build_graph(files, {}).entities if e.kind != "package"]
    assert "x.js::Cls.js::f" in keys  # two symbols spell it: the store keeps the first


def test_old_mac_line_ends_read_as_any_other() -> None:
    python = "import os.path\n\ntype Alias = list[int]\n\ndef f():\n    return os.path\n"
    script = "import { x } from './x';\n\nexport function f() {\n  return x;\n}\n"
    for path, text in (("m.py", python), ("m.js", script)):
        facts = parse_code(path, text)
        for end in ("\r\n", "\r"):
            assert parse_code(path, text.replace("\n", end)) == facts, (path, end)


def test_names_bound_by_many_imports_and_stars_resolve_as_before() -> None:
    n = 3000  # each use looked through every import: n * n lookups (8,000: 27 s of a sync)
    rebinding = "".join(f"import m{i} as a\n" for i in range(n))
    rebinding += "".join(f"a.f{i}()\n" for i in range(n))
    stars = "".join(f"from ext{i} import *\n" for i in range(n)) + "from pkg.mod import *\n"
    stars += "".join(f"x{i}()\n" for i in range(n))
    files = {
        "pkg/__init__.py": parse_code("pkg/__init__.py", ""),
        "pkg/mod.py": parse_code("pkg/mod.py", "def x0():\n    pass\n\ndef x7():\n    pass\n"),
        "m0.py": parse_code("m0.py", "def f5():\n    pass\n"),
        "rebind.py": parse_code("rebind.py", rebinding),
        "star.py": parse_code("star.py", stars),
    }
    graph = build_graph(files, {})
    refs = {(r.src[1], r.dst[1]) for r in graph.relations if r.type == "references"}
    assert {d for s, d in refs if s == "rebind.py"} == {"m0.py::f5"}  # the import in the graph
    assert {d for s, d in refs if s == "star.py"} == {"pkg/mod.py::x0", "pkg/mod.py::x7"}


def _old_pick(paths: tuple[tuple[str, tuple[str, ...]], ...], spec: str) -> object:
    """The pattern a paths map gave ``spec`` before patterns were indexed: a scan of all."""
    best: tuple[int, str, str, tuple[str, ...]] | None = None
    for pattern, targets in paths:
        star = pattern.find("*")
        if star < 0:
            if pattern == spec:
                best = (len(pattern) + 1, "", pattern, targets)
                break
            continue
        prefix, suffix = pattern[:star], pattern[star + 1 :]
        if (
            len(spec) >= len(prefix) + len(suffix)
            and spec.startswith(prefix)
            and spec.endswith(suffix)
            and (best is None or len(prefix) > best[0])
        ):
            best = (len(prefix), spec[len(prefix) : len(spec) - len(suffix)], pattern, targets)
    return best


_PIECES = st.text(alphabet="ab/@*", max_size=5)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_PIECES, max_size=6, unique=True), _PIECES.filter(lambda s: "*" not in s))
def test_a_paths_map_picks_the_pattern_it_picked_before(patterns: list[str], spec: str) -> None:
    paths = tuple((p, (f"t{i}/*",)) for i, p in enumerate(patterns))
    options = PathOptions(None, paths, "")
    best = _old_pick(paths, spec)
    targets = [] if best is None else [_join("", t.replace("*", best[1], 1)) for t in best[3]]  # type: ignore[index]
    expected = (best is not None and best[2] != "*", targets)  # type: ignore[index]
    assert options.candidates(spec) == expected


def test_a_paths_map_of_thousands_of_patterns_resolves_every_import() -> None:
    n = 3000
    paths = {f"@lib{i}/*": [f"libs/{i}/*"] for i in range(n)}
    config = json.dumps({"compilerOptions": {"baseUrl": ".", "paths": paths}})
    sources = "".join(f"import {{ v{i} }} from '@lib{i}/mod';\n" for i in range(n))
    files = {
        f"libs/{i}/mod.ts": parse_code(f"libs/{i}/mod.ts", f"export const v{i} = 1;\n")
        for i in range(0, n, 500)
    }
    files["app.ts"] = parse_code("app.ts", sources)
    graph = build_graph(files, {"tsconfig.json": config})
    imported = {r.dst[1] for r in graph.relations if r.type == "imports" and r.src[1] == "app.ts"}
    assert {f"libs/{i}/mod.ts" for i in range(0, n, 500)} <= imported


NEWER = [
    "type Alias = list[int]\n",
    "def f[T](x: T) -> T:\n    return x\n",
    "class C[T]:\n    pass\n",
    'x = f"{"nested"}"\n',
    "x = rF'{a!r}'\n",
    "x = t'{a}'\n",
    "try:\n    pass\nexcept A, B:\n    pass\n",
]


def test_every_construct_the_rewrite_changes_is_seen_by_its_text() -> None:
    for text in NEWER:
        assert downlevel(text) != text and may_hold_newer_syntax(text), text


def test_a_broken_file_without_newer_syntax_is_refused_without_the_rewrite() -> None:
    text = "x = " + "~ ** " * 100_000 + "\n"  # 500 kB: tree-sitter's query took about a minute
    assert not may_hold_newer_syntax(text)
    with pytest.raises(CodeParseError, match="Python syntax error at line 1"):
        parse_code("broken.py", text)
