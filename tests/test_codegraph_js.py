"""JavaScript/TypeScript code graph: tree-sitter facts, module resolution, tsconfig paths."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from contextgraph.code import (
    CODE_EXTENSIONS,
    CONFIG_FILENAMES,
    CodeGraph,
    CodeParseError,
    FileFacts,
    build_graph,
    parse_code,
)
from contextgraph.code.resolve import package_name
from contextgraph.code.tsconfig import loads_lenient

FIXTURES = Path(__file__).parent / "fixtures" / "code"


@cache
def fixture_graph(name: str) -> CodeGraph:
    root = FIXTURES / name
    files: dict[str, FileFacts] = {}
    configs: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.suffix in CODE_EXTENSIONS:
            files[rel] = parse_code(rel, p.read_text(encoding="utf-8"))
        elif p.name in CONFIG_FILENAMES:
            configs[rel] = p.read_text(encoding="utf-8")
    return build_graph(files, configs)


def graph_of(sources: dict[str, str], configs: dict[str, str] | None = None) -> CodeGraph:
    return build_graph({p: parse_code(p, t) for p, t in sources.items()}, configs)


def edges(graph: CodeGraph, type_: str) -> dict[tuple[str, str], float]:
    return {(r.src[1], r.dst[1]): r.weight for r in graph.relations if r.type == type_}


def imports_of(graph: CodeGraph, path: str) -> set[str]:
    return {d for s, d in edges(graph, "imports") if s == path}


def symbols(f: FileFacts) -> list[tuple[str, str]]:
    return [(s.qualname, s.kind) for s in f.symbols]


def refs_of(f: FileFacts, qualname: str) -> set[str]:
    return set(next(s.refs for s in f.symbols if s.qualname == qualname))


# -- facts ------------------------------------------------------------------------------------


def test_top_level_function_class_and_arrow_const_are_symbols() -> None:
    f = parse_code(
        "a.js",
        "function f() {}\nfunction* g() {}\nclass C {}\nconst h = () => 1;\n"
        "let k = function () {};\nconst K = class {};\nconst n = 1;\n",
    )
    assert symbols(f) == [
        ("f", "function"),
        ("g", "function"),
        ("C", "class"),
        ("h", "function"),
        ("k", "function"),
        ("K", "class"),
    ]
    assert f.module_names == ("n",)
    assert f.language == "javascript"


def test_exported_declarations_are_symbols() -> None:
    f = parse_code(
        "a.ts",
        "export function f() {}\nexport default class X {}\nexport const g = async () => {};\n"
        "export const Memo = memo(() => null);\n",
    )
    assert symbols(f) == [
        ("f", "function"),
        ("X", "class"),
        ("g", "function"),
        ("Memo", "function"),
    ]
    assert ("default", "X") in f.aliases
    assert f.language == "typescript"


def test_anonymous_default_export_is_a_symbol_named_default() -> None:
    f = parse_code("p.mjs", "export default function () { return helper(); }\n")
    assert symbols(f) == [("default", "function")]
    assert refs_of(f, "default") == {"helper"}


def test_class_methods_and_function_fields_are_qualified_by_class() -> None:
    f = parse_code(
        "c.ts",
        "class C {\n  m() {}\n  static s() {}\n  get x() { return 1; }\n  #p() {}\n"
        "  h = () => {};\n  v = 3;\n  [computed]() {}\n}\n",
    )
    assert symbols(f) == [
        ("C", "class"),
        ("C.m", "method"),
        ("C.s", "method"),
        ("C.x", "method"),
        ("C.#p", "method"),
        ("C.h", "method"),
    ]
    assert "computed" in refs_of(f, "C")


def test_typescript_interface_type_and_enum_are_symbols() -> None:
    f = parse_code(
        "t.ts",
        "export interface I extends J, ns.K<string> { a: L }\n"
        "type U = V | W<X>;\nexport enum E { A }\ndeclare function df(): Y;\n",
    )
    assert symbols(f) == [("I", "interface"), ("U", "type"), ("E", "enum"), ("df", "function")]
    assert f.symbols[0].bases == ("J", "ns.K")
    assert refs_of(f, "I") == {"L"}
    assert refs_of(f, "U") == {"V", "W", "X"}


def test_commonjs_exports_define_symbols_and_aliases() -> None:
    f = parse_code(
        "m.js",
        "exports.a = function () {};\nmodule.exports.B = class {};\n"
        "exports.c = local;\nmodule.exports = Main;\n",
    )
    assert symbols(f) == [("a", "function"), ("B", "class")]
    assert set(f.aliases) == {("c", "local"), ("default", "Main")}


def test_import_forms_are_recorded() -> None:
    f = parse_code(
        "i.ts",
        'import D, { A as B, C } from "./x";\nimport * as ns from "y";\nimport "z";\n'
        'export { E as F } from "./e";\nexport * from "./s";\nexport * as nn from "./n";\n'
        'import type { T } from "./t";\nimport q = require("./q");\n'
        'const r = require("r");\nconst { s1, s2: s3 } = require("./s2");\n'
        'async function load() { return import("./dyn"); }\n',
    )
    assert [(i.module, i.names) for i in f.imports] == [
        ("./x", ()),
        ("y", ()),
        ("z", ()),
        ("./e", ()),
        ("./s", ("*",)),
        ("./n", ()),
        ("./t", ()),
        ("./q", ()),
        ("r", ()),
        ("./s2", ()),
        ("./dyn", ()),
    ]
    assert {(b.name, b.module, b.attr) for b in f.bindings} == {
        ("D", "./x", "default"),
        ("B", "./x", "A"),
        ("C", "./x", "C"),
        ("ns", "y", None),
        ("T", "./t", "T"),
        ("q", "./q", None),
        ("r", "r", None),
        ("s1", "./s2", "s1"),
        ("s3", "./s2", "s2"),
    }
    assert {(b.name, b.module, b.attr) for b in f.reexports} == {
        ("F", "./e", "E"),
        ("nn", "./n", None),
    }


def test_non_literal_import_specifiers_are_ignored() -> None:
    f = parse_code("d.js", "const m = require(name);\nimport(`./x/${y}`);\nimport(`./plain`);\n")
    assert [i.module for i in f.imports] == ["./plain"]


def test_this_method_use_is_recorded_as_class_method() -> None:
    f = parse_code("c.js", "class C {\n  a() { return this.b() + this.field; }\n  b() {}\n}\n")
    assert refs_of(f, "C.a") == {"C.b"}


def test_locals_and_parameters_are_not_references() -> None:
    f = parse_code(
        "l.js",
        "function f(a, { b, c = D }, [e], ...rest) {\n  const x = G(a);\n  let { y } = H;\n"
        "  for (const k of K) { use(k, x, y); }\n  try {} catch (err) { log(err); }\n"
        "  return (z) => z + M;\n}\n",
    )
    assert refs_of(f, "f") == {"D", "G", "H", "K", "use", "log", "M"}


def test_member_chains_new_and_type_references_are_collected() -> None:
    f = parse_code(
        "r.ts",
        "function f<T>(a: Foo<T>, b: ns.Bar): Baz {\n"
        "  return new api.Client(a).run(b) as Qux;\n}\n",
    )
    assert refs_of(f, "f") == {"Foo", "ns.Bar", "Baz", "api.Client", "Qux"}


def test_jsx_components_are_references_and_intrinsic_tags_are_not() -> None:
    f = parse_code(
        "v.jsx", "function V() {\n  return <div><Comp.Item x={y} /><Button /></div>;\n}\n"
    )
    assert refs_of(f, "V") == {"Comp.Item", "y", "Button"}


# -- parse failures ---------------------------------------------------------------------------


def test_garbage_javascript_raises_parse_error() -> None:
    with pytest.raises(CodeParseError, match="syntax error at line"):
        parse_code("bad.js", "def f(:\n  print 'x'\n}}}} ))) let let let\n" * 3)


def test_python_code_in_a_ts_file_raises_parse_error() -> None:
    with pytest.raises(CodeParseError, match="TypeScript"):
        parse_code(
            "wrong.ts", "def f(x):\n    return {x: [y for y in x if y]}\n\nclass A(B):\n  pass\n"
        )


def test_small_local_syntax_error_is_tolerated() -> None:
    src = "".join(f"export function f{i}() {{ return {i}; }}\n" for i in range(30))
    f = parse_code("mostly_ok.js", src + "const broken = ;\n")
    assert len(f.symbols) == 30


def test_binary_content_raises_parse_error() -> None:
    text = bytes(range(128, 256)).decode("utf-8", errors="replace") * 8
    with pytest.raises(CodeParseError, match="binary"):
        parse_code("blob.js", text)


def test_unknown_extension_raises_parse_error() -> None:
    with pytest.raises(CodeParseError, match="extension"):
        parse_code("notes.md", "# hi")


# -- tsconfig ---------------------------------------------------------------------------------


def test_tsconfig_with_comments_and_trailing_commas_parses() -> None:
    text = (FIXTURES / "js_app" / "tsconfig.json").read_text(encoding="utf-8")
    data = loads_lenient(text)
    assert data["compilerOptions"]["paths"] == {"@/*": ["src/*"]}


def test_lenient_json_keeps_comment_like_text_inside_strings() -> None:
    data = loads_lenient('{"a": "http://x/*y*/", "b": "q\\",}", /* c */ "c": [1,],}')
    assert data == {"a": "http://x/*y*/", "b": 'q",}', "c": [1]}


def test_invalid_tsconfig_is_ignored() -> None:
    g = graph_of({"src/a.ts": 'import "@/b";\n', "src/b.ts": ""}, {"tsconfig.json": "{nope"})
    assert imports_of(g, "src/a.ts") == set()


def test_tsconfig_extends_inherits_paths() -> None:
    configs = {
        "tsconfig.base.json": (
            '{"compilerOptions": {"baseUrl": ".", "paths": {"~lib/*": ["lib/*"]}}}'
        ),
        "app/tsconfig.json": '{"extends": "../tsconfig.base", "compilerOptions": {}}',
    }
    g = graph_of({"app/main.ts": 'import { x } from "~lib/x";\n', "lib/x.ts": ""}, configs)
    assert imports_of(g, "app/main.ts") == {"lib/x.ts"}


def test_nearest_config_wins_and_jsconfig_is_used() -> None:
    configs = {
        "tsconfig.json": '{"compilerOptions": {"paths": {"#/*": ["one/*"]}}}',
        "web/jsconfig.json": '{"compilerOptions": {"paths": {"#/*": ["./two/*"]}}}',
    }
    sources = {
        "web/a.js": 'import "#/m";\n',
        "web/two/m.js": "",
        "one/m.ts": "",
        "b.ts": 'import "#/m";\n',
    }
    g = graph_of(sources, configs)
    assert imports_of(g, "web/a.js") == {"web/two/m.js"}
    assert imports_of(g, "b.ts") == {"one/m.ts"}


def test_base_url_resolves_bare_specifiers_to_source_files() -> None:
    configs = {"tsconfig.json": '{"compilerOptions": {"baseUrl": "src"}}'}
    g = graph_of(
        {"src/app.ts": 'import "utils/fmt";\nimport "react";\n', "src/utils/fmt.ts": ""}, configs
    )
    assert imports_of(g, "src/app.ts") == {"src/utils/fmt.ts"}
    assert edges(g, "imports_external") == {("src/app.ts", "react"): 0.5}


# -- resolution (fixture js_app) -------------------------------------------------------------


def test_relative_specifier_without_extension_resolves_to_index_file() -> None:
    assert "src/components/index.ts" in imports_of(fixture_graph("js_app"), "src/index.tsx")


def test_js_specifier_resolves_to_ts_source() -> None:
    # ./utils/date.js names src/utils/date.ts
    assert "src/utils/date.ts" in imports_of(fixture_graph("js_app"), "src/index.tsx")


def test_relative_specifier_without_extension_probes_extensions() -> None:
    g = fixture_graph("js_app")
    assert imports_of(g, "src/components/index.ts") == {
        "src/components/Button.tsx",
        "src/components/Card.tsx",
    }
    assert imports_of(g, "lib/square.jsx") == {"lib/shapes.js"}


def test_existing_js_file_wins_over_ts_swap() -> None:
    g = graph_of({"a.ts": 'import "./b.js";\n', "b.js": "", "b.ts": ""})
    assert imports_of(g, "a.ts") == {"b.js"}


def test_relative_specifier_with_extension_and_dynamic_import() -> None:
    assert imports_of(fixture_graph("js_app"), "lib/loader.cjs") == {"lib/plugin.mjs"}


def test_tsconfig_paths_alias_resolves_to_src() -> None:
    imports = imports_of(fixture_graph("js_app"), "src/index.tsx")
    assert {"src/services/api.ts", "src/types.ts"} <= imports


def test_unresolved_alias_is_neither_file_nor_package() -> None:
    g = fixture_graph("js_app")
    packages = {e.key for e in g.entities if e.kind == "package"}
    assert not any(p.startswith("@/") or p == "@" for p in packages)


def test_require_resolves_relative_and_external() -> None:
    g = fixture_graph("js_app")
    assert imports_of(g, "lib/legacy.js") == {"lib/helpers.js", "lib/model.js"}
    assert edges(g, "imports_external")[("lib/legacy.js", "path")] == 0.5


def test_external_packages_are_named_by_package() -> None:
    ext = edges(fixture_graph("js_app"), "imports_external")
    assert {d for s, d in ext if s == "src/index.tsx"} == {"react", "fs", "lodash", "@scope/pkg"}
    assert ext[("src/main.tsx", "react-dom")] == 0.5


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("react", "react"),
        ("node:fs", "fs"),
        ("fs/promises", "fs"),
        ("lodash/fp", "lodash"),
        ("@scope/pkg", "@scope/pkg"),
        ("@scope/pkg/deep/x", "@scope/pkg"),
        ("@/x", None),
        ("#internal", None),
        ("~/x", None),
        ("https://esm.sh/react", None),
    ],
)
def test_package_name_of_bare_specifier(spec: str, name: str | None) -> None:
    assert package_name(spec) == name


def test_relative_specifier_above_source_root_is_unresolved() -> None:
    g = graph_of({"a.js": 'import "../outside";\n'})
    assert edges(g, "imports") == {} and edges(g, "imports_external") == {}


# -- relations --------------------------------------------------------------------------------


def test_class_extends_in_same_file_and_across_files() -> None:
    inherits = edges(fixture_graph("js_app"), "inherits")
    assert inherits[("lib/shapes.js::Circle", "lib/shapes.js::Shape")] == 1.0
    assert inherits[("lib/square.jsx::Square", "lib/shapes.js::Shape")] == 1.0
    assert inherits[("src/services/api.ts::ApiClient", "src/services/api.ts::BaseClient")] == 1.0
    assert inherits[("src/types.ts::Admin", "src/types.ts::User")] == 1.0


def test_external_base_class_creates_no_inherits() -> None:
    inherits = edges(fixture_graph("js_app"), "inherits")
    assert not [s for s, _ in inherits if s.startswith("src/components/Button.tsx")]


def test_implements_clause_is_inheritance() -> None:
    g = graph_of({"a.ts": "interface I {}\nclass C implements I {}\n"})
    assert edges(g, "inherits") == {("a.ts::C", "a.ts::I"): 1.0}


def test_references_through_barrel_reexports() -> None:
    refs = edges(fixture_graph("js_app"), "references")
    app = "src/index.tsx::App"
    assert refs[(app, "src/components/Button.tsx::Button")] == 1.0  # export { Button } from
    assert refs[(app, "src/components/Card.tsx::Card")] == 1.0  # export * from
    assert refs[(app, "src/utils/date.ts::formatDate")] == 1.0
    assert refs[(app, "src/types.ts::User")] == 1.0  # import type via @/ alias


def test_default_import_resolves_to_default_export() -> None:
    refs = edges(fixture_graph("js_app"), "references")
    assert refs[("src/main.tsx", "src/index.tsx::App")] == 1.0  # module-level JSX use


def test_require_bindings_resolve_to_commonjs_exports() -> None:
    refs = edges(fixture_graph("js_app"), "references")
    assert refs[("lib/legacy.js::run", "lib/helpers.js::helper")] == 1.0  # exports.helper
    assert refs[("lib/legacy.js::run", "lib/model.js::Model")] == 1.0  # module.exports = Model


def test_this_method_call_references_own_method() -> None:
    refs = edges(fixture_graph("js_app"), "references")
    button = "src/components/Button.tsx::Button"
    assert refs[(f"{button}.render", f"{button}.format")] == 1.0
    assert refs[(f"{button}.render", f"{button}.handleClick")] == 1.0


def test_unique_name_match_weighs_half_in_js() -> None:
    refs = edges(fixture_graph("js_app"), "references")
    assert refs[("lib/legacy.js::init", "lib/widgets.mjs::renderWidget")] == 0.5


def test_ambiguous_name_creates_no_reference_in_js() -> None:
    refs = edges(fixture_graph("js_app"), "references")
    assert not [d for s, d in refs if s == "lib/boot.js::boot"]


def test_globals_are_not_name_matched() -> None:
    g = graph_of(
        {"a.js": "export function fetch() {}\n", "b.js": "function f() { return fetch(); }\n"}
    )
    assert edges(g, "references") == {}


def test_import_alias_resolves_to_original_name() -> None:
    g = graph_of(
        {
            "a.ts": "export function real() {}\nexport { real as alias };\n",
            "b.ts": (
                'import { alias as mine } from "./a";\nexport function f() { return mine(); }\n'
            ),
        }
    )
    assert edges(g, "references") == {("b.ts::f", "a.ts::real"): 1.0}


def test_namespace_import_member_resolves() -> None:
    g = graph_of(
        {
            "a.ts": "export class Thing {}\n",
            "b.ts": 'import * as A from "./a";\nexport const make = () => new A.Thing();\n',
        }
    )
    assert edges(g, "references") == {("b.ts::make", "a.ts::Thing"): 1.0}


def test_a_few_replacement_chars_in_strings_do_not_make_a_file_binary() -> None:
    table = ", ".join('"\ufffd"' if i % 20 == 0 else f'"{chr(0x400 + i)}"' for i in range(200))
    f = parse_code("table.js", f"export const TABLE = [{table}];\nexport function get() {{}}\n")
    assert [s.qualname for s in f.symbols] == ["get"]


def test_names_imported_from_non_code_files_are_not_name_matched() -> None:
    g = graph_of(
        {
            "a.js": "export function styles() {}\n",
            "b.js": (
                'import styles from "./b.module.css";\nexport function f() { return styles; }\n'
            ),
        }
    )
    assert edges(g, "references") == {}


def test_unexported_lookup_falls_back_to_unique_name_when_module_resolves() -> None:
    g = graph_of(
        {
            "a.js": "function tool() {}\nmodule.exports = { tool: tool2 };\n",
            "b.js": "function tool2() {}\n",
            "c.js": 'const { tool2 } = require("./a");\nfunction f() { return tool2(); }\n',
        }
    )
    assert edges(g, "references") == {
        ("c.js::f", "b.js::tool2"): 0.5,
        ("a.js", "b.js::tool2"): 0.5,  # the module-level `module.exports = {...}`
    }


def test_type_annotated_javascript_is_parsed_with_the_tsx_grammar() -> None:
    src = "".join(
        f"function f{i}(a: number, b: Array<string>): Map<string, number> {{ return g(a); }}\n"
        for i in range(5)
    )
    f = parse_code("flow.js", "// @flow\n" + src)
    assert [s.qualname for s in f.symbols] == [f"f{i}" for i in range(5)]
    assert f.language == "javascript"


@pytest.mark.parametrize(("root", "refs"), [("a", ("a.b0.b1.b2.b3.b4",)), ("g()", ("g",))])
def test_a_member_chain_of_1500_parts_is_read_in_a_loop(root: str, refs: tuple[str, ...]) -> None:
    """A chain of k parts is k nested nodes. Read by recursion it failed past about 1,000
    parts, and a chain that does not start at a name was read again from each of its objects
    (k²: 78 kB of them took 6.6 s). The same uses are found, at any length."""
    for parts in (3, 1500):
        chain = ".".join(f"b{i}" for i in range(parts))
        source = f'import a from "./a";\nfunction f(){{ return {root}.{chain}; }}\n'
        facts = parse_code("x.js", source)
        expected = refs if parts > 3 or root != "a" else ("a.b0.b1.b2",)
        assert [s.refs for s in facts.symbols] == [expected]
