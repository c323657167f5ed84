"""Code graph building: JSON round-trip of facts, determinism, graph invariants."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextgraph.code import (
    CODE_EXTENSIONS,
    CONFIG_FILENAMES,
    BindingFact,
    CodeGraph,
    FileFacts,
    ImportFact,
    SymbolFact,
    build_graph,
    parse_code,
)

FIXTURES = Path(__file__).parent / "fixtures" / "code"


def load(*names: str) -> tuple[dict[str, FileFacts], dict[str, str]]:
    """Facts and configs of fixture projects (several are merged under their own folders)."""
    files: dict[str, FileFacts] = {}
    configs: dict[str, str] = {}
    for name in names:
        root = FIXTURES / name
        prefix = f"{name}/" if len(names) > 1 else ""
        for p in sorted(root.rglob("*")):
            rel = prefix + p.relative_to(root).as_posix()
            if p.suffix in CODE_EXTENSIONS:
                files[rel] = parse_code(rel, p.read_text(encoding="utf-8"))
            elif p.name in CONFIG_FILENAMES:
                configs[rel] = p.read_text(encoding="utf-8")
    return files, configs


def edges(graph: CodeGraph, type_: str) -> dict[tuple[str, str], float]:
    return {(r.src[1], r.dst[1]): r.weight for r in graph.relations if r.type == type_}


# -- constants and JSON ------------------------------------------------------------------------


def test_code_extensions_and_config_filenames() -> None:
    assert frozenset({".py", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx"}) == CODE_EXTENSIONS
    assert frozenset({"tsconfig.json", "jsconfig.json"}) == CONFIG_FILENAMES


@pytest.mark.parametrize("project", ["py_app", "py_src", "js_app"])
def test_fixture_facts_round_trip_through_json(project: str) -> None:
    files, _ = load(project)
    for f in files.values():
        data = f.to_json()
        json.loads(data)  # plain JSON
        assert FileFacts.from_json(data) == f


_text = st.text(max_size=12)
_names = st.lists(_text, max_size=4).map(tuple)
_symbols = st.builds(
    SymbolFact, _text, st.sampled_from(["class", "function", "method"]), st.integers(0, 10**6),
    _names, _names,
)  # fmt: skip
_imports = st.builds(ImportFact, _text, st.integers(0, 5), _names, st.integers(0, 10**6))
_bindings = st.builds(BindingFact, _text, _text, st.integers(0, 5), st.none() | _text)
_facts = st.builds(
    FileFacts,
    path=_text,
    language=st.sampled_from(["python", "javascript", "typescript"]),
    symbols=st.lists(_symbols, max_size=4).map(tuple),
    imports=st.lists(_imports, max_size=4).map(tuple),
    bindings=st.lists(_bindings, max_size=4).map(tuple),
    reexports=st.lists(_bindings, max_size=3).map(tuple),
    aliases=st.lists(st.tuples(_text, _text), max_size=3).map(tuple),
    module_refs=_names,
    module_names=_names,
)


@settings(max_examples=200, deadline=None)
@given(_facts)
def test_arbitrary_facts_round_trip_through_json(facts: FileFacts) -> None:
    assert FileFacts.from_json(facts.to_json()) == facts


@pytest.mark.parametrize(
    "data",
    [
        "not json",
        "[]",
        '{"v": 999}',
        '{"v": 1, "path": "a.py"}',
        '{"v": 1, "path": "a.py", "language": "cobol", "symbols": []}',
    ],
)
def test_from_json_rejects_malformed_or_outdated_facts(data: str) -> None:
    with pytest.raises(ValueError):
        FileFacts.from_json(data)


def test_from_json_rejects_wrong_field_types() -> None:
    good = json.loads(parse_code("a.py", "def f():\n    return g\n").to_json())
    good["symbols"][0][2] = "one"
    with pytest.raises(ValueError):
        FileFacts.from_json(json.dumps(good))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_parse_code_either_parses_or_raises_code_parse_error(text: str) -> None:
    for path in ("x.py", "x.ts", "x.jsx"):
        try:
            f = parse_code(path, text)
        except Exception as e:  # the contract: only CodeParseError escapes
            assert type(e).__name__ == "CodeParseError", repr(e)
            assert "\n" not in str(e)
        else:
            assert FileFacts.from_json(f.to_json()) == f


# -- determinism ------------------------------------------------------------------------------


def test_build_is_deterministic_regardless_of_input_order() -> None:
    files, configs = load("py_app", "py_src", "js_app")
    expected = build_graph(files, configs)
    keys = list(files)
    for seed in range(3):
        random.Random(seed).shuffle(keys)
        shuffled = {k: files[k] for k in keys}
        assert build_graph(shuffled, dict(reversed(configs.items()))) == expected


def test_build_from_json_cached_facts_equals_build_from_parse() -> None:
    files, configs = load("py_app", "js_app")
    cached = {k: FileFacts.from_json(v.to_json()) for k, v in files.items()}
    assert build_graph(cached, configs) == build_graph(files, configs)


def test_parse_is_deterministic() -> None:
    for project in ("py_app", "js_app"):
        a, _ = load(project)
        b, _ = load(project)
        assert {k: v.to_json() for k, v in a.items()} == {k: v.to_json() for k, v in b.items()}


# -- graph invariants -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def merged() -> CodeGraph:
    files, configs = load("py_app", "py_src", "js_app")
    return build_graph(files, configs)


def test_entities_are_unique_and_ordered(merged: CodeGraph) -> None:
    keys = [(e.kind, e.key) for e in merged.entities]
    assert len(keys) == len(set(keys))
    order = {"file": 0, "symbol": 1, "package": 2}
    assert keys == sorted(keys, key=lambda k: (order[k[0]], k[1]))


def test_relations_are_unique_per_src_dst_type_and_ordered(merged: CodeGraph) -> None:
    keys = [(r.src, r.dst, r.type) for r in merged.relations]
    assert len(keys) == len(set(keys))
    assert keys == sorted(keys)


def test_relation_endpoints_are_entities_of_the_right_kinds(merged: CodeGraph) -> None:
    entities = {(e.kind, e.key) for e in merged.entities}
    kinds = {
        "defines": ("file", "symbol"),
        "imports": ("file", "file"),
        "imports_external": ("file", "package"),
        "inherits": ("symbol", "symbol"),
    }
    for r in merged.relations:
        assert r.src in entities and r.dst in entities
        assert r.src != r.dst
        if r.type in kinds:
            assert (r.src[0], r.dst[0]) == kinds[r.type]
        else:
            assert r.type == "references" and r.dst[0] == "symbol"


def test_relation_path_is_the_file_of_its_source(merged: CodeGraph) -> None:
    files = {e.key for e in merged.entities if e.kind == "file"}
    for r in merged.relations:
        assert r.path in files
        assert r.path == r.src[1].partition("::")[0]


def test_weights_follow_relation_types(merged: CodeGraph) -> None:
    for r in merged.relations:
        if r.type == "imports_external":
            assert r.weight == 0.5
        elif r.type == "references":
            assert r.weight in (0.5, 1.0)
        else:
            assert r.weight == 1.0


def test_file_entities_name_their_path_and_packages_have_none(merged: CodeGraph) -> None:
    for e in merged.entities:
        if e.kind == "file":
            assert e.key == e.name == e.path
        elif e.kind == "package":
            assert e.key == e.name and e.path is None
        else:
            assert e.key == f"{e.path}::{e.key.partition('::')[2]}"
            assert e.name == e.key.rpartition(".")[2].rpartition("::")[2]


def test_duplicate_relation_keeps_highest_weight() -> None:
    # C.a finds slugify by its unique name (0.5), C.b through an import (1.0): C keeps 1.0.
    g = build_graph(
        {
            "util.py": parse_code("util.py", "def slugify(s):\n    return s\n"),
            "c.py": parse_code(
                "c.py",
                "import util\n\nclass C:\n    def a(self):\n        return slugify(1)\n\n"
                "    def b(self):\n        return util.slugify(2)\n",
            ),
        }
    )
    refs = edges(g, "references")
    assert refs[("c.py::C.a", "util.py::slugify")] == 0.5
    assert refs[("c.py::C.b", "util.py::slugify")] == 1.0
    assert refs[("c.py::C", "util.py::slugify")] == 1.0
    assert len([r for r in g.relations if r.src == ("symbol", "c.py::C")]) == 1


def test_empty_source_builds_empty_graph() -> None:
    assert build_graph({}) == CodeGraph((), ())
    assert build_graph({}, {"tsconfig.json": "{}"}) == CodeGraph((), ())


def test_python_and_javascript_names_are_not_matched_across_languages() -> None:
    g = build_graph(
        {
            "a.py": parse_code("a.py", "def render_page():\n    pass\n"),
            "b.js": parse_code("b.js", "function f() { return render_page(); }\n"),
        }
    )
    assert edges(g, "references") == {}


def test_mixed_sources_keep_each_language_resolution() -> None:
    g = build_graph(
        {
            "pkg/__init__.py": parse_code("pkg/__init__.py", ""),
            "pkg/mod.py": parse_code("pkg/mod.py", "from . import util\n"),
            "pkg/util.py": parse_code("pkg/util.py", ""),
            "pkg/util.js": parse_code("pkg/util.js", 'import "./mod";\n'),
        }
    )
    # Python imports only .py files, JS only JS/TS files.
    assert set(edges(g, "imports")) == {("pkg/mod.py", "pkg/util.py")}


def test_a_larger_synthetic_source_builds() -> None:
    sources = {}
    for i in range(300):
        sources[f"pkg/m{i}.py"] = (
            f"from pkg.m{(i + 1) % 300} import C{(i + 1) % 300}\nimport os\n\n"
            f"class C{i}(C{(i + 1) % 300}):\n    def run(self):\n        return helper{i}()\n\n"
            f"def helper{i}():\n    return os.getcwd()\n"
        )
    sources["pkg/__init__.py"] = ""
    g = build_graph({p: parse_code(p, t) for p, t in sources.items()})
    assert len(edges(g, "inherits")) == 300
    assert len(edges(g, "imports")) == 300
    assert len({d for _, d in edges(g, "imports_external")}) == 1


def _star_chain(n: int) -> dict[str, FileFacts]:
    """pkg/m0 … m{n-1}: each star-imports the next; the last defines ``target``; m0 calls it."""
    texts = {"pkg/__init__.py": ""}
    for i in range(n):
        star = f"from pkg.m{i + 1} import *\n" if i + 1 < n else "def target():\n    pass\n"
        texts[f"pkg/m{i}.py"] = star + ("def f():\n    return target()\n" if i == 0 else "")
    return {p: parse_code(p, t) for p, t in texts.items()}


def test_a_name_is_followed_through_a_chain_of_star_imports() -> None:
    uses = edges(build_graph(_star_chain(60)), "references")
    assert uses.get(("pkg/m0.py::f", "pkg/m59.py::target")) == 1.0


def test_a_chain_of_star_imports_past_max_hops_is_not_followed_and_fails_nothing() -> None:
    """400 modules, each ``from next import *``, went deeper than Python's recursion limit: the
    whole sync failed. Past ``MAX_HOPS`` modules the chain is not followed: the name is found
    only by the fallback to the one symbol of that name (weight 0.5, not 1.0)."""
    from contextgraph.code.build import MAX_HOPS

    graph = build_graph(_star_chain(4 * MAX_HOPS))
    last = f"pkg/m{4 * MAX_HOPS - 1}.py::target"
    assert edges(graph, "references")[("pkg/m0.py::f", last)] == 0.5
    assert len(graph.relations) > 4 * MAX_HOPS  # the imports themselves are all there
