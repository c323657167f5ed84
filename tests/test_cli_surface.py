"""The CLI's surface against its documentation (a hunt, stop 43): settings out of range, text
that could forge terminal output, input the CLI must take as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import Writer, child_env

from contextgraph.cli import cli
from contextgraph.settings import Settings


def run(db: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args], env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CONTEXTGRAPH_DEPTH", "9", "CONTEXTGRAPH_DEPTH (depth) must be between 0 and 5, not 9"),
        ("CONTEXTGRAPH_COMMUNITY_SEED", str(1 << 63), "CONTEXTGRAPH_COMMUNITY_SEED"),
        ("CONTEXTGRAPH_WORKERS", "100000", "must be between 0 and 1024"),
        ("CONTEXTGRAPH_RETRIEVE_CONCEPT_WEIGHT", "1e308", "between 0.0 and 1000.0"),
        ("CONTEXTGRAPH_PREVIEW_CHARS", "-1", "CONTEXTGRAPH_PREVIEW_CHARS"),
        ("CONTEXTGRAPH_BUSY_TIMEOUT_MS", "-1", "CONTEXTGRAPH_BUSY_TIMEOUT_MS"),
        ("MAENIFOLD_COMMUNITY_MAX_SIBLINGS", "-5", "MAENIFOLD_COMMUNITY_MAX_SIBLINGS"),
        ("MAENIFOLD_COMMUNITY_MAX_SIBLINGS", "x", "MAENIFOLD_COMMUNITY_MAX_SIBLINGS: cannot"),
        ("CONTEXTGRAPH_DEPTH", "two", "CONTEXTGRAPH_DEPTH: cannot parse 'two'"),
        ("CONTEXTGRAPH_NOW", "0001-01-01T00:00:00+01:00", "out of range in UTC"),
    ],
)
def test_a_setting_out_of_its_range_is_one_clear_error_naming_its_variable(
    db_path: Path, variable: str, value: str, message: str
) -> None:
    code, out, err = run(db_path, "stats", "--json", env={variable: value})
    assert code == 1 and out == ""
    assert message in err and "Traceback" not in err and "unexpected" not in err


def test_every_default_lies_in_its_range_and_an_empty_variable_is_unset() -> None:
    assert Settings().validated() == Settings()
    legacy = {"CONTEXTGRAPH_COMMUNITY_MIN_SHARED": "", "MAENIFOLD_COMMUNITY_MIN_SHARED": "7"}
    assert Settings.from_env(legacy).community_min_shared == 7


def test_names_that_could_forge_terminal_output_are_escaped(
    db_path: Path, vault: Path, write: Writer
) -> None:
    forged = "cs\u009b2J\u009b1;1Hfake"
    for name in ("a.md", "b.md"):
        write(name, f"[[plain]] [[{forged}]] [[rl\u202egnp.exe]]\n")
    assert run(db_path, "sync", str(vault))[0] == 0
    code, out, _ = run(db_path, "communities")
    assert code == 0 and "\u009b" not in out and "\u202e" not in out
    assert "cs\\x9b2j\\x9b1;1hfake" in out and "rl\\u202egnp.exe" in out
    _, out, _ = run(db_path, "context", "plain")
    assert "\u202e" not in out and "rl\\u202egnp.exe" in out


def test_an_error_quoting_file_names_escapes_them(
    db_path: Path, vault: Path, write: Writer
) -> None:
    name = "dup\x1b[2J\x1b]0;pwned\x07"
    write(f"{name}.md", "[[A]]\n")
    write(f"sub/{name}.md", "[[B]]\n")
    assert run(db_path, "sync", str(vault))[0] == 0
    code, _, err = run(db_path, "read", name)
    assert code == 1 and "ambiguous" in err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b[2J" in err


def test_a_source_name_with_a_control_character_is_refused(db_path: Path, vault: Path) -> None:
    for bad in ("ok\x7f", "ok\u009b2J"):
        code, _, err = run(db_path, "sync", str(vault), "--name", bad)
        assert code == 1 and "invalid source name" in err
        assert "\x7f" not in err and "\u009b" not in err


def test_read_prints_the_note_as_stored_even_into_a_pipe(
    db_path: Path, vault: Path, write: Writer
) -> None:
    bodies = {
        "esc.md": "colour \x1b[31mRED\x1b[0m text [[A]]\n",
        "crlf.md": "# Title\r\n\r\n[[A]] and [[B]]\r\n",
        "open.md": "no line end after [[A]]",  # cat adds none: neither does read
    }
    for name, body in bodies.items():
        write(name, body)
    env = child_env(CONTEXTGRAPH_DB=str(db_path), CONTEXTGRAPH_NO_RESIDENT="1")
    command = [sys.executable, "-m", "contextgraph"]
    subprocess.run([*command, "sync", str(vault)], env=env, check=True, capture_output=True)
    for name, body in bodies.items():
        out = subprocess.run([*command, "read", name], env=env, capture_output=True, check=True)
        assert out.stdout == body.encode(), name


def test_write_from_stdin_takes_bytes_that_are_not_utf8(db_path: Path, vault: Path) -> None:
    assert run(db_path, "sync", str(vault))[0] == 0
    env = child_env(
        CONTEXTGRAPH_DB=str(db_path), CONTEXTGRAPH_NO_RESIDENT="1", PYTHONIOENCODING="utf-8:strict"
    )
    done = subprocess.run(
        [sys.executable, "-m", "contextgraph", "write", "in.md", "-"],
        input=b"abc\xff [[Z]]\n",
        env=env,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    assert (vault / "in.md").read_text(encoding="utf-8").endswith("abc\ufffd [[Z]]\n")


def test_more_paths_than_a_sync_takes_are_refused_without_changes_too(
    db_path: Path, vault: Path, write: Writer
) -> None:
    write("a.md", "[[A]]\n")
    env = child_env(CONTEXTGRAPH_DB=str(db_path), CONTEXTGRAPH_NO_RESIDENT="1")
    command = [sys.executable, "-m", "contextgraph", "sync"]
    subprocess.run([*command, str(vault)], env=env, check=True, capture_output=True)
    for extra in ({}, {"CONTEXTGRAPH_FULL_SYNC": "1"}):  # the no-change answer and the full sync
        done = subprocess.run(
            [*command, *[str(vault)] * 101], env={**env, **extra}, capture_output=True, text=True
        )
        assert done.returncode == 2 and "at most 100" in done.stderr, (extra, done.stderr)


def test_json_output_refuses_a_value_that_is_no_json() -> None:
    from contextgraph.terminal import json_text

    assert json.loads(json_text({"x": 1.5})) == {"x": 1.5}
    with pytest.raises(ValueError):
        json_text({"x": float("nan")})


def test_the_defaults_of_search_retrieve_and_visualize_are_settings(
    db_path: Path, vault: Path, write: Writer
) -> None:
    for i in range(8):
        write(f"n{i}.md", f"# Note {i}\nshared words [[Alpha]] [[Beta{i}]]\n")
    assert run(db_path, "sync", str(vault))[0] == 0
    env = {
        "CONTEXTGRAPH_SEARCH_LIMIT": "2",
        "CONTEXTGRAPH_RETRIEVE_K": "3",
        "CONTEXTGRAPH_RETRIEVE_BUDGET_TOKENS": "150",
        "CONTEXTGRAPH_VISUALIZE_MAX_NODES": "5",
        "CONTEXTGRAPH_VISUALIZE_DEPTH": "1",
    }
    _, out, _ = run(db_path, "search", "shared words", "--json", env=env)
    assert len(json.loads(out)["hits"]) == 2 and json.loads(out)["limit"] == 2
    _, out, _ = run(db_path, "search", "shared words", "--json", "--limit", "3", env=env)
    assert len(json.loads(out)["hits"]) == 3  # the flag wins
    _, out, _ = run(db_path, "retrieve", "shared words", "--json", env=env)
    answer = json.loads(out)
    assert (answer["k"], answer["budgetTokens"], len(answer["items"])) == (3, 150, 3)
    _, picture, _ = run(db_path, "visualize", "alpha", env=env)
    assert picture == run(db_path, "visualize", "alpha", "--depth", "1", "--max-nodes", "5")[1]
    assert picture != run(db_path, "visualize", "alpha")[1]
    bad = {"CONTEXTGRAPH_SEARCH_LIMIT": "101"}
    code, _, err = run(db_path, "search", "x", env=bad)
    assert code == 1 and "CONTEXTGRAPH_SEARCH_LIMIT (search_limit) must be between 1 and 100" in err


@pytest.mark.parametrize(
    "args",
    [
        ("search", "w" * 4001),
        ("retrieve", "w" * 4001),
        ("context", "c" * 1001),
        ("expand", "ok", "s" * 1001),
        ("visualize", "v" * 1001),
        ("read", "r" * 4097),
        ("search", "x", "--source", "n" * 201),
        ("search", "x", "--folder", "f" * 4097),
        ("sync", ".", "--name", "n" * 201),
        ("write", "w" * 4097, "--content", "x"),
        ("edit", "e" * 4097, "--append", "x"),
        ("move", "a.md", "m" * 4097),
        ("delete", "d" * 4097),
    ],
    ids=lambda a: a[0] + ("-" + a[-2] if a[-2].startswith("--") else ""),
)
def test_text_over_its_bound_is_a_usage_error(db_path: Path, args: tuple[str, ...]) -> None:
    code, out, err = run(db_path, *args)
    assert code == 2 and out == "", err
    assert "characters long; at most" in err and "Traceback" not in err


def test_a_source_registered_under_a_name_now_refused_still_syncs_by_its_path(
    db_path: Path, tmp_path: Path, write: Writer
) -> None:
    import sqlite3

    folder = tmp_path / "notes\x85x"
    write("a.md", "[[A]] [[B]]\n", root=folder)
    assert run(db_path, "sync", str(folder))[0] == 1  # no longer registered under that name
    assert run(db_path, "sync", str(folder), "--name", "notes")[0] == 0
    with sqlite3.connect(db_path) as conn:  # as an older version registered it
        conn.execute("UPDATE sources SET name = ?", ("notes\x85x",))
    code, _out, err = run(db_path, "sync", str(folder))
    assert code == 0, err


def test_bidirectional_controls_are_escaped_in_a_picture_too() -> None:
    from contextgraph.graph.mermaid import escape_label

    assert escape_label("rl\u202egnp.exe") == "rl#8238;gnp.exe"
    assert escape_label("a\u2066b\u200fc") == "a#8294;b#8207;c"
