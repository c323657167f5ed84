"""Python written for a newer interpreter gets its entities under 3.11 (SPEC §7).

The fallback (tree-sitter-python, rewritten into 3.11 syntax with the same facts) must give what
a newer Python's own ``ast`` gives through the same extractor, and must agree with ``ast`` on
every file both can read.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from pathlib import Path

import pytest

from contextgraph import ContextGraph
from contextgraph.code import CodeParseError, FileFacts
from contextgraph.code.python import facts_of, parse_python
from contextgraph.code.python_compat import downlevel

PACKAGE = Path(__file__).resolve().parents[1] / "contextgraph"

PY312 = textwrap.dedent(
    '''\
    """A module written for Python 3.12+."""
    import os
    from .models import Base, Item

    type Alias = list[int] | Item
    type Pair[K, V: Base] = tuple[K, V]

    def first[T: Base](items: list[T]) -> T:
        return items[0]

    class Box[T](Base):
        def get(self) -> T:
            return self.put(f"{os.sep!r:>{WIDTH}} {f'{Item.name}'} {"nested"}")

        def put(self, value):
            return value

    class Defaults[T = int, *Ts = *tuple[int, ...]]:
        def run[
            U
        ](self, u: U) -> U:
            return helper(u)

    def helper(x):
        return f"{x["key"]}\\n{"\\t".join(os.environ)}"
    '''
)

PY314 = textwrap.dedent(
    """\
    import logging

    def main(name):
        try:
            return t"hello {name} {logging.DEBUG:>{WIDTH}}"
        except ValueError, KeyError:
            logging.exception("bad")
    """
)


def _facts(text: str, path: str = "pkg/mod.py") -> FileFacts:
    return parse_python(path, text)


def test_312_and_313_syntax_gets_its_entities_under_311() -> None:
    with pytest.raises(SyntaxError):
        ast.parse(PY312)  # the running Python cannot read it
    facts = _facts(PY312)
    symbols = {s.qualname: s for s in facts.symbols}
    assert list(symbols) == [
        "first",
        "Box",
        "Box.get",
        "Box.put",
        "Defaults",
        "Defaults.run",
        "helper",
    ]
    assert symbols["Box"].bases == ("Base",)
    assert symbols["Box"].line == 11 and symbols["helper"].line == 24  # lines are kept
    assert symbols["Defaults.run"].line == 19
    assert {"Box.put", "os.sep", "WIDTH", "Item.name"} <= set(symbols["Box.get"].refs)
    assert {"helper", "U"} <= set(symbols["Defaults.run"].refs)
    assert {"os.environ"} <= set(symbols["helper"].refs)
    # Type parameters (and their bounds) are not walked, as with a newer Python's own ast.
    assert {"list", "T"} <= set(symbols["first"].refs)
    assert {"list", "int", "Item", "tuple", "K", "V", "Base"} <= set(facts.module_refs)
    assert [i.module for i in facts.imports] == ["os", "models"]


def test_314_syntax_gets_its_entities_under_311() -> None:
    facts = _facts(PY314)
    (main,) = facts.symbols
    assert main.qualname == "main"
    assert {"ValueError", "KeyError", "logging.exception", "logging.DEBUG", "WIDTH"} <= set(
        main.refs
    )
    assert "name" not in main.refs  # a parameter, bound


def test_genuinely_broken_python_still_reports_the_running_pythons_error() -> None:
    with pytest.raises(CodeParseError, match="Python syntax error at line 2"):
        _facts("x = 1\ndef (:\n")
    with pytest.raises(CodeParseError, match="Python syntax error"):
        _facts('print "python 2"\n')


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[" * 100_000, "line 1: too many nested parentheses"),
        ("x = " + 'f"{' * 5_000 + "0" + '}"' * 5_000 + "\n", "line 1: too many nested parentheses"),
        (
            "".join(" " * i + "if x:\n" for i in range(200)),
            "line 101: too many levels of indentation",
        ),
    ],
)
def test_a_limit_no_python_lifts_is_reported_without_the_rewrite(
    text: str, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deeper nesting than any CPython takes is refused at once: the tree-sitter rewrite of such
    a file cannot help, and its query over the deep error tree took 12 s for 100,000 brackets."""

    def never(_text: str) -> str:
        raise AssertionError("the rewrite ran")

    monkeypatch.setattr("contextgraph.code.python_compat.downlevel", never)
    with pytest.raises(CodeParseError, match=f"Python syntax error at {error}"):
        _facts(text)


def _native_facts(python: str, text: str) -> dict[str, object]:
    """Facts of ``text`` from the same extractor run by another interpreter's own ``ast``."""
    code = textwrap.dedent(
        f"""
        import importlib.util, json, sys, types
        for name, path in (("contextgraph", {str(PACKAGE)!r}),
                           ("contextgraph.code", {str(PACKAGE / "code")!r})):
            module = types.ModuleType(name)
            module.__path__ = [path]  # the package's files, without its __init__ imports
            sys.modules[name] = module
        from contextgraph.code.python import parse_python
        print(parse_python("pkg/mod.py", sys.stdin.read()).to_json())
        """
    )
    result = subprocess.run(
        [python, "-c", code], input=text, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def _interpreter(version: str) -> str | None:
    """A working ``python<version>``: on PATH, or beside this one (pyenv's versions folder)."""
    candidates = [shutil.which(f"python{version}")]
    versions = Path(sys.executable).resolve().parents[2]
    candidates += [str(p) for p in sorted(versions.glob(f"{version}*/bin/python{version}"))]
    for candidate in candidates:
        if (
            candidate
            and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0
        ):
            return candidate
    return None


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_fallback_gives_what_a_newer_pythons_own_ast_gives(version: str) -> None:
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no python{version} on this machine")
    source = PY312 if version == "3.13" else PY312.replace(" = int, *Ts = *tuple[int, ...]", "")
    if version == "3.13":  # type parameter defaults, in an alias too (the grammar lacks them)
        source += "\ntype WithDefaults[T: Base = Item, *Ts = *tuple[Other, ...]] = tuple[T, *Ts]\n"
    native = _native_facts(python, source)
    assert json.loads(_facts(source).to_json()) == native


def _corpus() -> list[Path]:
    """A fixed sample of the standard library, weighted to files with f-strings."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    with_fstrings = [p for p in files if 'f"' in p.read_text("utf-8", "replace")]
    return with_fstrings[::4][:150]


def test_the_rewrite_agrees_with_ast_on_files_both_parse() -> None:
    """Forced through the rewrite, files the running ``ast`` reads give identical facts
    (``scripts/python_compat_agreement.py`` runs this over the whole stdlib and eval trees)."""
    checked = 0
    for path in _corpus():
        text = path.read_text("utf-8", "replace")
        try:
            want = parse_python(str(path), text)
        except CodeParseError:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in old test files
            rewritten = ast.parse(downlevel(text))
        assert facts_of(str(path), rewritten) == want, path
        checked += 1
    assert checked >= 100


def test_a_source_written_for_312_syncs_with_its_symbols(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "models.py").write_text(
        "class Base:\n    pass\n\nclass Item(Base):\n    name = 'x'\n"
    )
    (root / "pkg" / "mod.py").write_text(PY312)
    (root / "pkg" / "new.py").write_text(PY314)
    with ContextGraph.open(tmp_path / "g.db") as graph:
        report = graph.sync([root])
        assert not report.failed and not [w for w in report.warnings if "parse" in w.reason]
        names = {r.entity for r in graph.expand(["pkg/mod.py"], max_nodes=50).results}
        assert {"first", "Box", "helper", "pkg/models.py"} <= names
        assert graph.doctor().ok


if __name__ == "__main__":  # pragma: no cover - a quick manual check
    print(_facts(sys.stdin.read()).to_json())


def test_a_file_of_many_rewrites_renders_each_as_it_would_alone() -> None:
    """Each rewrite renders only the edits inside it (found by bisection), not every edit of
    the file: 348 kB of 3.12 f-strings took 10.4 s. The output is the same, line by line."""
    from contextgraph.code.python_compat import downlevel

    lines = [
        'x = f"{d["k"]} and {f"{y!r:>{w}}"}"\n',
        "type A[T: int = str, *Ts] = list[T]  # alias\n",
        "def f[T](a: T) -> T:\n    return a\n",
        'try:\n    pass\nexcept E, F:\n    s = f"{a["b"]}"\n',
    ] * 50
    assert downlevel("".join(lines)) == "".join(downlevel(line) for line in lines)


def test_logical_lines_remembered_at_marks_are_the_lines_scanned_afresh() -> None:
    """python_compat remembers a logical line's end at each alias start a scan passes outside
    brackets and strings (one line of thousands of backslash-continued aliases was scanned
    again from each: 37 kB, 12.6 s). Every answer equals a fresh scan's."""
    import random

    from contextgraph.code.python_compat import _logical_line

    pieces = [b"a", b" ", b"(", b")", b"[", b"]", b"#c", b"'", b'"', b'"""', b"\\\n", b"\n", b"\\"]
    rng = random.Random(7)
    for _ in range(3000):
        src = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        marks = sorted(rng.sample(range(len(src) + 1), k=min(len(src) + 1, rng.randint(1, 8))))
        known: dict[int, tuple[int, int]] = {}
        for start in rng.sample(marks, len(marks)):  # in any order
            remembered = _logical_line(src, start, frozenset(marks), known)
            assert remembered == _logical_line(src, start), (src, start)
