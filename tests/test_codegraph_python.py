"""Python code graph: facts extraction with ast, module resolution, relations and weights."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from contextgraph.code import (
    CODE_EXTENSIONS,
    CodeGraph,
    CodeParseError,
    FileFacts,
    build_graph,
    parse_code,
)

FIXTURES = Path(__file__).parent / "fixtures" / "code"


@cache
def fixture_graph(name: str) -> CodeGraph:
    root = FIXTURES / name
    files = {
        p.relative_to(root).as_posix(): parse_code(
            p.relative_to(root).as_posix(), p.read_text(encoding="utf-8")
        )
        for p in sorted(root.rglob("*"))
        if p.suffix in CODE_EXTENSIONS
    }
    return build_graph(files)


def graph_of(sources: dict[str, str]) -> CodeGraph:
    return build_graph({path: parse_code(path, text) for path, text in sources.items()})


def edges(graph: CodeGraph, type_: str) -> dict[tuple[str, str], float]:
    return {(r.src[1], r.dst[1]): r.weight for r in graph.relations if r.type == type_}


def facts(text: str, path: str = "mod.py") -> FileFacts:
    return parse_code(path, text)


def refs_of(f: FileFacts, qualname: str) -> tuple[str, ...]:
    return next(s.refs for s in f.symbols if s.qualname == qualname)


# -- facts ------------------------------------------------------------------------------------


def test_module_level_functions_and_classes_are_symbols() -> None:
    f = facts("def f():\n    pass\n\nasync def g():\n    pass\n\nclass C:\n    pass\n")
    assert [(s.qualname, s.kind) for s in f.symbols] == [
        ("f", "function"),
        ("g", "function"),
        ("C", "class"),
    ]
    assert f.language == "python"


def test_methods_are_qualified_by_their_class() -> None:
    f = facts("class C:\n    def m(self):\n        pass\n\n    async def n(self):\n        pass\n")
    assert [(s.qualname, s.kind, s.name) for s in f.symbols] == [
        ("C", "class", "C"),
        ("C.m", "method", "m"),
        ("C.n", "method", "n"),
    ]


def test_nested_functions_and_classes_are_not_symbols() -> None:
    f = facts(
        "def outer():\n    def inner():\n        return helper()\n    class K:\n        pass\n"
    )
    assert [s.qualname for s in f.symbols] == ["outer"]
    assert refs_of(f, "outer") == ("helper",)


def test_definitions_under_if_and_try_at_module_level_are_symbols() -> None:
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from x import Y\nelse:\n    def fallback():\n        pass\n"
        "try:\n    def a():\n        pass\nexcept ImportError:\n    def a():\n        return 1\n"
    )
    f = facts(src)
    assert [s.qualname for s in f.symbols] == ["fallback", "a"]
    assert any(b.name == "Y" for b in f.bindings)


def test_property_and_setter_are_one_symbol() -> None:
    src = (
        "class C:\n    @property\n    def x(self):\n        return A\n"
        "    @x.setter\n    def x(self, v):\n        B(v)\n"
    )
    f = facts(src)
    assert [s.qualname for s in f.symbols] == ["C", "C.x"]
    assert set(refs_of(f, "C.x")) >= {"A", "B", "property"}


def test_references_exclude_parameters_and_local_assignments() -> None:
    src = (
        "def f(a, *args, b=Default, **kw):\n"
        "    x = Thing(a)\n    for i in items:\n        use(i, x)\n"
        "    with open_it() as fh:\n        pass\n"
        "    try:\n        pass\n    except Oops as e:\n        raise e\n"
        "    return [y for y in Gen()]\n"
    )
    assert set(refs_of(facts(src), "f")) == {
        "Default",
        "Thing",
        "items",
        "use",
        "open_it",
        "Oops",
        "Gen",
    }


def test_global_declaration_keeps_module_name_visible() -> None:
    src = "def f():\n    global counter\n    counter = Counter()\n"
    assert set(refs_of(facts(src), "f")) == {"Counter"}
    src = "def f():\n    global Registry\n    Registry = Registry.copy()\n"
    assert set(refs_of(facts(src), "f")) == {"Registry.copy"}


def test_attribute_chains_are_recorded_as_dotted_names() -> None:
    f = facts("def f():\n    return pkg.mod.Thing(x.y).z\n")
    assert set(refs_of(f, "f")) == {"pkg.mod.Thing", "x.y"}


def test_self_method_use_is_recorded_as_class_method() -> None:
    src = (
        "class C:\n    def a(self):\n        return self.b() + self.data\n"
        "    def b(self):\n        return 1\n"
        "    @classmethod\n    def c(cls):\n        return cls.b\n"
    )
    f = facts(src)
    assert refs_of(f, "C.a") == ("C.b",)
    assert refs_of(f, "C.c") == ("C.b", "classmethod")  # decorators count


def test_string_annotations_are_parsed_as_forward_references() -> None:
    src = "def f(a: 'Foo', b: Optional['mod.Bar']) -> 'list[Baz]':\n    pass\n"
    assert set(refs_of(facts(src), "f")) == {"Foo", "Optional", "mod.Bar", "list", "Baz"}


def test_class_bases_keep_dotted_names_and_drop_subscripts() -> None:
    f = facts("class C(Base, mod.Mixin, Generic[T], metaclass=Meta):\n    attr = Value\n")
    c = f.symbols[0]
    assert c.bases == ("Base", "mod.Mixin", "Generic")
    assert set(c.refs) == {"T", "Meta", "Value"}


def test_imports_inside_functions_are_file_imports_and_bindings() -> None:
    f = facts("def f():\n    from .lazy import Thing\n    return Thing()\n")
    assert [(i.module, i.level, i.names) for i in f.imports] == [("lazy", 1, ("Thing",))]
    assert [(b.name, b.attr) for b in f.bindings] == [("Thing", "Thing")]
    assert refs_of(f, "f") == ("Thing",)


def test_import_forms_produce_bindings() -> None:
    f = facts("import a.b.c\nimport d.e as de\nfrom . import x\nfrom ..p import q as r\n")
    assert [(b.name, b.module, b.level, b.attr) for b in f.bindings] == [
        ("a", "a", 0, None),
        ("de", "d.e", 0, None),
        ("x", "", 1, "x"),
        ("r", "p", 2, "q"),
    ]
    assert [i.module for i in f.imports] == ["a.b.c", "d.e", "", "p"]


def test_future_import_is_ignored() -> None:
    f = facts("from __future__ import annotations\n")
    assert f.imports == () and f.bindings == ()


def test_module_level_code_yields_module_refs_and_names() -> None:
    f = facts("import sys\napp = create_app(Config)\n\nif __name__ == '__main__':\n    main()\n")
    assert set(f.module_refs) == {"create_app", "Config", "__name__", "main"}
    assert f.module_names == ("app",)


# -- parse failures ---------------------------------------------------------------------------


def test_python2_print_statement_raises_parse_error() -> None:
    with pytest.raises(CodeParseError, match="line 1"):
        parse_code("old.py", 'print "x"\n')


def test_syntax_error_raises_parse_error_with_line() -> None:
    with pytest.raises(CodeParseError, match="line 2"):
        parse_code("bad.py", "x = 1\ndef f(:\n    pass\n")


def test_binary_bytes_decoded_with_replacement_raise_parse_error() -> None:
    text = bytes(range(256)).decode("utf-8", errors="replace") * 4
    with pytest.raises(CodeParseError, match="binary"):
        parse_code("blob.py", text)


def test_nul_bytes_raise_parse_error() -> None:
    with pytest.raises(CodeParseError, match="NUL"):
        parse_code("blob.py", "x = 1\x00\x00\n")


def test_parse_error_reason_is_one_line() -> None:
    with pytest.raises(CodeParseError) as info:
        parse_code("bad.py", "def f(\n\n\n")
    assert "\n" not in str(info.value) and str(info.value)


def test_deeply_nested_code_raises_parse_error_not_crash() -> None:
    with pytest.raises(CodeParseError):
        parse_code("deep.py", "x = " + "(" * 5000 + ")" * 5000 + "\n")


# -- resolution (fixture py_app) -------------------------------------------------------------


def test_relative_import_resolves_to_sibling_module() -> None:
    imports = edges(fixture_graph("py_app"), "imports")
    assert ("app/auth/service.py", "app/auth/tokens.py") in imports  # from . import tokens
    assert ("app/auth/__init__.py", "app/auth/service.py") in imports  # from .service import


def test_parent_relative_import_resolves_through_package() -> None:
    imports = edges(fixture_graph("py_app"), "imports")
    assert imports[("app/auth/tokens.py", "app/core/base.py")] == 1.0  # from ..core.base import


def test_from_package_import_submodule_resolves_to_submodule_file() -> None:
    g = graph_of({"pkg/__init__.py": "", "pkg/sub.py": "", "user.py": "from pkg import sub\n"})
    assert set(edges(g, "imports")) == {("user.py", "pkg/sub.py")}


def test_from_package_import_name_resolves_to_package_init() -> None:
    imports = edges(fixture_graph("py_app"), "imports")
    assert ("app/main.py", "app/auth/__init__.py") in imports
    assert ("app/main.py", "app/auth/service.py") not in imports


def test_import_of_dotted_module_resolves_to_deepest_file() -> None:
    g = graph_of(
        {"a/__init__.py": "", "a/b/__init__.py": "", "a/b/c.py": "", "u.py": "import a.b.c\n"}
    )
    assert set(edges(g, "imports")) == {("u.py", "a/b/c.py")}


def test_package_init_wins_over_same_named_module() -> None:
    g = graph_of({"pkg/__init__.py": "", "pkg.py": "", "u.py": "import pkg\n"})
    assert set(edges(g, "imports")) == {("u.py", "pkg/__init__.py")}


def test_src_layout_absolute_import_resolves_under_src() -> None:
    imports = edges(fixture_graph("py_src"), "imports")
    assert ("checks/check_engine.py", "src/mylib/__init__.py") in imports
    assert ("checks/check_engine.py", "src/mylib/config.py") in imports
    assert ("src/mylib/__init__.py", "src/mylib/engine/__init__.py") in imports


def test_namespace_package_import_resolves_without_init() -> None:
    imports = edges(fixture_graph("py_src"), "imports")
    assert ("checks/check_engine.py", "src/nspkg/plugins/alpha.py") in imports
    assert ("src/nspkg/plugins/alpha.py", "src/nspkg/plugins/beta.py") in imports


def test_script_directory_import_resolves_to_sibling_file() -> None:
    imports = edges(fixture_graph("py_app"), "imports")
    assert ("scripts/run_report.py", "scripts/report_helpers.py") in imports


def test_absolute_import_in_regular_package_does_not_pick_sibling() -> None:
    g = graph_of({"pkg/__init__.py": "", "pkg/json.py": "", "pkg/m.py": "import json\n"})
    assert edges(g, "imports") == {}
    assert edges(g, "imports_external") == {("pkg/m.py", "json"): 0.5}


def test_external_import_creates_package_named_by_top_level() -> None:
    g = graph_of({"m.py": "import requests.adapters\nfrom requests.auth import HTTPBasicAuth\n"})
    assert edges(g, "imports_external") == {("m.py", "requests"): 0.5}
    assert [(e.kind, e.key, e.name, e.path) for e in g.entities if e.kind == "package"] == [
        ("package", "requests", "requests", None)
    ]


def test_external_requests_import_in_fixture() -> None:
    ext = edges(fixture_graph("py_app"), "imports_external")
    assert ext[("app/auth/service.py", "requests")] == 0.5
    assert ("app/main.py", "os") in ext  # import os.path


def test_unresolved_local_import_is_neither_file_nor_package() -> None:
    g = fixture_graph("py_app")
    assert "app" not in {e.key for e in g.entities if e.kind == "package"}
    # from app import missing_module: app/__init__.py is imported, nothing else
    assert {d for s, d in edges(g, "imports") if s == "app/consumers.py"} == {"app/__init__.py"}


def test_relative_import_beyond_top_level_package_is_unresolved() -> None:
    g = graph_of({"pkg/__init__.py": "", "pkg/m.py": "from .. import other\n", "other.py": ""})
    assert edges(g, "imports") == {} and edges(g, "imports_external") == {}


def test_relative_import_from_root_package_resolves_when_root_has_init() -> None:
    g = graph_of({"__init__.py": "", "a.py": "from . import b\n", "b.py": ""})
    assert set(edges(g, "imports")) == {("a.py", "b.py")}


# -- relations -------------------------------------------------------------------------------


def test_defines_links_file_to_each_symbol() -> None:
    defines = edges(fixture_graph("py_app"), "defines")
    assert defines[("app/auth/service.py", "app/auth/service.py::AuthenticationService")] == 1.0
    assert ("app/auth/service.py", "app/auth/service.py::AuthenticationService.login") in defines
    assert all(w == 1.0 for w in defines.values())


def test_symbol_entities_have_bare_name_and_path() -> None:
    g = fixture_graph("py_app")
    e = next(e for e in g.entities if e.key == "app/auth/service.py::AuthenticationService.login")
    assert (e.kind, e.name, e.path) == ("symbol", "login", "app/auth/service.py")


def test_authentication_service_uses_token_validator() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    svc = "app/auth/service.py::AuthenticationService"
    validator = "app/auth/tokens.py::TokenValidator"
    assert refs[(f"{svc}.__init__", validator)] == 1.0
    assert refs[(svc, validator)] == 1.0  # a class references what its methods reference
    assert refs[(f"{svc}.check", "app/auth/tokens.py::make_token")] == 1.0  # tokens.make_token
    assert refs[(f"{svc}.login", f"{svc}.check")] == 1.0  # self.check
    assert (svc, f"{svc}.check") not in refs  # not its own methods
    assert refs[(f"{svc}.audit", "app/core/base.py::AuditLog")] == 1.0  # "base.AuditLog"


def test_inheritance_across_files_via_relative_import() -> None:
    inherits = edges(fixture_graph("py_app"), "inherits")
    assert inherits[("app/auth/tokens.py::TokenValidator", "app/core/base.py::BaseValidator")] == 1
    assert ("app/auth/service.py::AuthenticationService", "app/core/base.py::Service") in inherits


def test_inheritance_through_module_attribute() -> None:
    inherits = edges(fixture_graph("py_src"), "inherits")
    assert inherits == {
        ("src/nspkg/plugins/alpha.py::AlphaPlugin", "src/nspkg/plugins/beta.py::BetaPlugin"): 1.0
    }


def test_inheritance_in_same_file() -> None:
    g = graph_of({"m.py": "class A:\n    pass\n\nclass B(A):\n    pass\n"})
    assert edges(g, "inherits") == {("m.py::B", "m.py::A"): 1.0}


def test_unresolved_base_is_never_name_matched() -> None:
    g = graph_of({"a.py": "class Base:\n    pass\n", "b.py": "class C(Base):\n    pass\n"})
    assert edges(g, "inherits") == {}


def test_reference_through_package_reexport_resolves_to_defining_file() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    svc = "app/auth/service.py::AuthenticationService"
    assert refs[("app/main.py::main", svc)] == 1.0


def test_star_import_binds_the_names_of_the_module() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    assert refs[("app/main.py::main", "app/utils.py::slugify")] == 1.0


def test_reference_through_imported_module_chain() -> None:
    refs = edges(fixture_graph("py_src"), "references")
    check = "checks/check_engine.py::check"
    assert refs[(check, "src/nspkg/plugins/alpha.py::AlphaPlugin")] == 1.0  # nspkg.plugins.alpha.X
    assert refs[(check, "src/mylib/engine/core.py::Engine")] == 1.0  # via two __init__ re-exports
    assert refs[(check, "src/mylib/config.py::Settings")] == 1.0
    run = "scripts/run_report.py::run"
    assert (
        edges(fixture_graph("py_app"), "references")[(run, "scripts/report_helpers.py::render")]
        == 1.0
    )


def test_unique_name_match_elsewhere_weighs_half() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    assert refs[("app/consumers.py::consume", "app/utils.py::slugify")] == 0.5


def test_ambiguous_name_creates_no_reference() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    assert not [d for s, d in refs if s == "app/consumers.py::consume" and "process" in d]


def test_parameter_shadowing_a_name_creates_no_reference() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    assert not [d for s, d in refs if s == "app/consumers.py::shadowed"]


def test_same_file_reference_weighs_full() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    assert refs[("app/utils.py::process", "app/utils.py::slugify")] == 1.0


def test_module_level_code_references_are_attributed_to_the_file() -> None:
    g = graph_of(
        {
            "factory.py": "def create_app():\n    return 1\n",
            "wsgi.py": "from factory import create_app\n\napp = create_app()\n",
        }
    )
    assert edges(g, "references") == {("wsgi.py", "factory.py::create_app"): 1.0}


def test_file_does_not_reference_its_own_symbols() -> None:
    refs = edges(fixture_graph("py_app"), "references")
    assert ("app/main.py", "app/main.py::main") not in refs


def test_recursion_is_not_a_self_reference() -> None:
    g = graph_of({"m.py": "def f(n):\n    return f(n - 1)\n"})
    assert edges(g, "references") == {}


def test_builtin_names_are_not_name_matched() -> None:
    g = graph_of({"a.py": "def len(x):\n    return 0\n", "b.py": "def f(x):\n    return len(x)\n"})
    assert edges(g, "references") == {}


def test_names_bound_to_external_packages_are_not_name_matched() -> None:
    g = graph_of(
        {
            "a.py": "class Session:\n    pass\n",
            "b.py": "from requests import Session\n\ndef f():\n    return Session()\n",
        }
    )
    assert edges(g, "references") == {}


def test_module_level_variable_is_not_name_matched() -> None:
    g = graph_of(
        {
            "a.py": "def config():\n    pass\n",
            "b.py": "config = {}\n\ndef f():\n    return config\n",
        }
    )
    assert edges(g, "references") == {}


def test_method_name_is_not_matched_by_bare_name() -> None:
    g = graph_of(
        {
            "a.py": "class K:\n    def handle(self):\n        pass\n",
            "b.py": "def f():\n    return handle()\n",
        }
    )
    assert edges(g, "references") == {}


def test_unresolved_local_import_falls_back_to_unique_name() -> None:
    g = graph_of(
        {
            "pkg/__init__.py": "",
            "pkg/real.py": "def tool():\n    pass\n",
            "pkg/user.py": "from .gone import tool\n\ndef f():\n    return tool()\n",
        }
    )
    assert edges(g, "references") == {("pkg/user.py::f", "pkg/real.py::tool"): 0.5}


def test_class_attribute_chain_resolves_to_method() -> None:
    g = graph_of(
        {
            "a.py": "class K:\n    @staticmethod\n    def build():\n        pass\n",
            "b.py": "from a import K\n\ndef f():\n    return K.build()\n",
        }
    )
    assert edges(g, "references") == {("b.py::f", "a.py::K.build"): 1.0}


def test_import_cycles_and_star_cycles_terminate() -> None:
    g = graph_of(
        {
            "a.py": "from b import *\nfrom b import thing\n\ndef f():\n    return thing, other\n",
            "b.py": "from a import *\nfrom a import thing\n",
        }
    )
    assert set(edges(g, "imports")) == {("a.py", "b.py"), ("b.py", "a.py")}
    assert edges(g, "references") == {}


def test_legacy_encoded_text_with_replacement_chars_in_comments_parses() -> None:
    bad = "\ufffd" * 5
    text = f"# coding: iso-8859-5\n# {bad}\nu = '{bad}'\n"
    assert parse_code("nonascii.py", text).module_names == ("u",)


def test_star_import_skips_private_names() -> None:
    g = graph_of(
        {
            "a.py": "def _hidden():\n    pass\n\ndef shown():\n    pass\n",
            "b.py": "from a import *\n\ndef f():\n    return _hidden(), shown()\n",
        }
    )
    # _hidden is not bound by the star import; it is still the only symbol of that name
    assert edges(g, "references") == {
        ("b.py::f", "a.py::shown"): 1.0,
        ("b.py::f", "a.py::_hidden"): 0.5,
    }
