from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import EXAMPLES, NOW, Writer

from contextgraph import ContextGraph
from contextgraph.cli import cli


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("CONTEXTGRAPH_NOW", NOW)
    return CliRunner()


def invoke(runner: CliRunner, db: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def test_sync_then_context_json(
    runner: CliRunner, db_path: Path, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] and [[Beta]]", created="2026-11-20")
    code, out, _ = invoke(runner, db_path, "sync", str(vault), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["files"]["added"] == 1 and report["concepts"] == 2
    code, out, _ = invoke(runner, db_path, "context", "Alpha", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["conceptName"] == "alpha"
    assert [r["name"] for r in data["directRelations"]] == ["beta"]


def test_db_comes_from_the_environment(
    runner: CliRunner, tmp_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("a.md", "[[Alpha]] [[Beta]]")
    target = tmp_path / "from-env.db"
    monkeypatch.setenv("CONTEXTGRAPH_DB", str(target))
    assert runner.invoke(cli, ["sync", str(vault)]).exit_code == 0
    assert target.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("context", "x", "--depth", "-1", "--json"),
        ("context", "x", "--depth", "6"),
        ("context", "x", "--max-entities", "100000"),
        ("context", "x", "--max-entities", "0"),
        ("expand", "x", "--max-depth", "9"),
        ("expand", "x", "--max-nodes", "0"),
        ("search", "x", "--limit", "0"),
        ("search", "x", "--limit", "101"),
        ("search", "x", "--page", "0"),
        ("search", "x", "--page", "99999999999999999999"),
        ("visualize", "x", "--depth", "0"),
        ("visualize", "x", "--max-nodes", "4"),
    ],
)
def test_out_of_range_numbers_are_click_usage_errors_with_exit_2(
    runner: CliRunner, db_path: Path, args: tuple[str, ...]
) -> None:
    code, out, err = invoke(runner, db_path, *args)
    assert code == 2, err
    assert out == ""
    assert "Invalid value for" in err and "is not in the range" in err
    assert "Traceback" not in err and "OverflowError" not in err
    assert not db_path.exists()  # refused before anything was opened


def test_more_seeds_than_expand_takes_is_a_usage_error_with_exit_2(
    runner: CliRunner, db_path: Path
) -> None:
    from contextgraph.limits import EXPAND_MAX_SEEDS

    seeds = [f"s{i}" for i in range(EXPAND_MAX_SEEDS + 1)]
    code, out, err = invoke(runner, db_path, "expand", *seeds)
    assert code == 2, err
    assert out == ""
    assert "Invalid value for" in err and f"at most {EXPAND_MAX_SEEDS} seeds" in err
    assert not db_path.exists()  # refused before anything was opened
    code, _, err = invoke(runner, db_path, "expand", *seeds[:-1])  # at the bound: no usage error
    assert code == 1 and "no database at" in err, err


def test_unknown_option_is_a_usage_error_with_exit_2(runner: CliRunner, db_path: Path) -> None:
    code, _, err = invoke(runner, db_path, "context", "x", "--bogus")
    assert code == 2
    assert "No such option" in err


def test_unknown_concept_gives_an_empty_result_not_an_error(
    runner: CliRunner, db_path: Path
) -> None:
    assert invoke(runner, db_path, "init")[0] == 0  # an empty graph: no sync required
    code, out, _ = invoke(runner, db_path, "context", "Nobody Links This", "--json")
    assert code == 0
    assert json.loads(out)["directRelations"] == []


@pytest.mark.parametrize(
    "args",
    [
        ["context", "  "],
        ["visualize", ""],
        ["expand", "x", ""],
        ["read", "\t"],
        ["retrieve", "  "],
    ],
)
def test_a_blank_name_or_question_is_a_usage_error_in_every_command(
    runner: CliRunner, db_path: Path, args: list[str]
) -> None:
    assert invoke(runner, db_path, "init")[0] == 0
    code, out, err = invoke(runner, db_path, *args)
    assert code == 2 and out == ""
    assert err.endswith("': it is blank\n") and "Traceback" not in err


@pytest.mark.parametrize("command", ["search", "retrieve"])
def test_a_blank_source_is_named_as_not_found(
    runner: CliRunner, db_path: Path, command: str
) -> None:
    assert invoke(runner, db_path, "init")[0] == 0
    assert invoke(runner, db_path, command, "x", "--source", "") == (
        1,
        "",
        "Error: no source named ''\n",
    )


def test_sync_without_sources_explains_what_to_do(runner: CliRunner, db_path: Path) -> None:
    code, _, err = invoke(runner, db_path, "sync")
    assert code == 1
    assert "no sources registered" in err


def test_sync_of_a_missing_folder_is_an_error(
    runner: CliRunner, db_path: Path, tmp_path: Path
) -> None:
    code, _, err = invoke(runner, db_path, "sync", str(tmp_path / "nope"))
    assert code in (1, 2)
    assert "Traceback" not in err


def test_source_name_clash_is_an_error(
    runner: CliRunner, db_path: Path, tmp_path: Path, write: Writer
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    write("a.md", "[[A]]", root=one)
    write("b.md", "[[B]]", root=two)
    assert invoke(runner, db_path, "sync", str(one), "--name", "notes")[0] == 0
    code, _, err = invoke(runner, db_path, "sync", str(two), "--name", "notes")
    assert code == 1
    assert "already used" in err


def test_no_wait_exits_1_while_a_sync_runs(
    runner: CliRunner, db_path: Path, vault: Path, write: Writer
) -> None:
    from contextgraph.sync.run import sync_lock

    write("a.md", "[[A]] [[B]]")
    assert invoke(runner, db_path, "init", str(vault))[0] == 0
    with sync_lock(db_path):
        code, _, err = invoke(runner, db_path, "sync", "--no-wait")
    assert code == 1
    assert "sync is already running" in err


def test_stats_doctor_and_db_commands(
    runner: CliRunner, db_path: Path, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] [[Beta]] [[Gamma]]")
    invoke(runner, db_path, "sync", str(vault))
    code, out, _ = invoke(runner, db_path, "stats", "--json")
    assert code == 0
    stats = json.loads(out)
    assert stats["concepts"] == 3 and stats["relations"] == 3
    assert stats["settings"]["grace_days"] == 28.0
    code, out, _ = invoke(runner, db_path, "doctor", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    code, out, _ = invoke(runner, db_path, "db", "current")
    assert code == 0 and out.strip() == "0008_fts_marks"
    code, out, _ = invoke(runner, db_path, "db", "history")
    assert code == 0 and out.splitlines()[0].startswith("0001_core")
    code, out, _ = invoke(runner, db_path, "db", "upgrade")
    assert code == 0


def test_stats_shows_settings_from_the_environment(
    runner: CliRunner, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTGRAPH_GRACE_DAYS", "7")
    monkeypatch.setenv("MAENIFOLD_COMMUNITY_MIN_SHARED", "5")
    assert invoke(runner, db_path, "init")[0] == 0
    _, out, _ = invoke(runner, db_path, "stats", "--json")
    settings = json.loads(out)["settings"]
    assert settings["grace_days"] == 7.0 and settings["community_min_shared"] == 5


def test_bad_setting_in_the_environment_is_a_clear_error(
    runner: CliRunner, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTGRAPH_DEPTH", "lots")
    code, _, err = invoke(runner, db_path, "stats")
    assert code == 1 and "CONTEXTGRAPH_DEPTH" in err


def test_example_vault_syncs_and_answers(runner: CliRunner, db_path: Path) -> None:
    code, out, _ = invoke(runner, db_path, "sync", str(EXAMPLES / "vault"), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["files"]["failed"] == 0 and report["concepts"] > 50
    code, out, _ = invoke(
        runner, db_path, "context", "Machine Learning", "--include-content", "--json"
    )
    data = json.loads(out)
    assert data["conceptName"] == "machine-learning"
    assert data["directRelations"] and data["expandedRelations"]


def test_every_command_has_help_and_is_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    runner = CliRunner()
    for name, command in cli.commands.items():  # type: ignore[attr-defined]
        assert command.help, name
        assert f"contextgraph {name}" in readme, name
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, name
    for sub in ("upgrade", "current", "history"):
        assert f"contextgraph db {sub}" in readme


# -- issue 10: exits, pipes, option placement, read, typed results -----------------------------


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "CONTEXTGRAPH_NOW": NOW}


def test_a_closed_stdout_ends_the_command_quietly(
    tmp_path: Path, vault: Path, write: Writer
) -> None:
    import subprocess
    import sys

    body = "\n".join(f"line {i} about [[Topic {i % 50}]] and [[Other]]" for i in range(8_000))
    write("big.md", body)
    database = tmp_path / "pipe.db"
    base = [sys.executable, "-m", "contextgraph", "--db", str(database)]
    assert (
        subprocess.run([*base, "sync", str(vault)], env=_env(), capture_output=True).returncode == 0
    )
    for args in (["read", "big.md", "--json"], ["read", "big.md"], ["stats", "--json"]):
        proc = subprocess.Popen(
            [*base, *args], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # as `| head -1` does
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert proc.wait(60) == 0, err
        assert err == "", err


def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path, vault: Path, write: Writer) -> None:
    import signal
    import subprocess
    import sys
    import time

    for i in range(3000):
        write(f"n{i:04d}.md", " ".join(f"[[C{j}]]" for j in range(i % 40, i % 40 + 30)))
    database = tmp_path / "int.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "--db", str(database), "sync", str(vault)],
        env={**_env(), "CONTEXTGRAPH_WORKERS": "1", "CONTEXTGRAPH_BATCH_FILES": "20"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As a terminal's foreground job has it: a test run started in the background by a
        # non-interactive shell has SIGINT ignored, and a child would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "int.db-wal").exists():
        time.sleep(0.05)
    time.sleep(0.5)  # well inside the file phase
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    doctor = subprocess.run(
        [sys.executable, "-m", "contextgraph", "--db", str(database), "doctor", "--json"],
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert doctor.returncode == 0 and json.loads(doctor.stdout)["ok"] is True


def test_ctrl_c_while_the_entry_point_loads_says_interrupted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import builtins
    import subprocess
    import sys

    from contextgraph import __main__ as entry

    # Loading the entry point loads nothing of ours: its first import is inside main()'s try.
    probe = "import sys, contextgraph.__main__; print('contextgraph.launch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True)
    assert done.stdout.decode().strip() == "False", done.stderr
    real, cut = builtins.__import__, []

    def importing(name: str, *args: Any, **kwargs: Any) -> Any:
        fromlist = args[2] if len(args) > 2 else kwargs.get("fromlist")
        if name == "contextgraph" and fromlist and "launch" in fromlist and not cut:
            cut.append(name)
            raise KeyboardInterrupt  # Ctrl-C while that first import runs
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", importing)
    monkeypatch.setattr(sys, "argv", ["contextgraph", "stats"])
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert cut and exited.value.code == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_global_options_are_accepted_after_the_command(
    runner: CliRunner, tmp_path: Path, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] [[Beta]]")
    demo = tmp_path / "demo.db"
    assert runner.invoke(cli, ["sync", str(vault), "--db", str(demo)]).exit_code == 0
    assert demo.exists()
    result = runner.invoke(cli, ["context", "Alpha", "--db", str(demo), "--json"])
    assert result.exit_code == 0, result.stderr
    assert [r["name"] for r in json.loads(result.stdout)["directRelations"]] == ["beta"]
    result = runner.invoke(cli, ["db", "current", "--db", str(demo)])
    assert result.exit_code == 0 and result.stdout.strip()
    # After the command, it wins over the one before it (the nearer one).
    other = tmp_path / "other.db"
    result = runner.invoke(cli, ["--db", str(other), "stats", "--db", str(demo), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["database"] == str(demo)
    assert not other.exists()


def test_read_by_title_finds_code_files_and_counts_ambiguous_candidates(
    runner: CliRunner, db_path: Path, vault: Path, write: Writer
) -> None:
    write("tools/helper.py", "def helper():\n    return 1\n")
    for i in range(12):
        write(f"day{i:02d}/index.md", f"# Index {i}\n[[Day {i}]]")
    assert invoke(runner, db_path, "sync", str(vault))[0] == 0
    code, out, err = invoke(runner, db_path, "read", "helper", "--json")
    assert code == 0, err
    assert json.loads(out)["uri"] == "memory://vault/tools/helper.py"
    code, out, err = invoke(runner, db_path, "read", "Index")
    assert code == 1
    assert "12 files match" in err and "and 2 more" in err
    assert len(err.strip().splitlines()) == 1


def test_library_messages_name_no_cli_flags(store: ContextGraph, tmp_path: Path) -> None:
    from contextgraph import InvalidArgument, SourceError

    one, two = tmp_path / "x1", tmp_path / "x2"
    one.mkdir()
    two.mkdir()
    with pytest.raises(InvalidArgument) as caught:
        store.sync([one, two], name="both")
    assert "--" not in str(caught.value)
    store.sync([one], name="same")
    with pytest.raises(SourceError) as clash:
        store.sync([two], name="same")
    assert "--" not in str(clash.value) and "already used" in str(clash.value)


def test_facade_gives_typed_stats_communities_and_schema_methods(
    runner: CliRunner, db_path: Path, vault: Path, write: Writer
) -> None:
    import dataclasses

    write("a.md", "[[Alpha]] [[Beta]] [[Gamma]]")
    assert invoke(runner, db_path, "sync", str(vault))[0] == 0
    _, stats_json, _ = invoke(runner, db_path, "stats", "--json")
    _, communities_json, _ = invoke(runner, db_path, "communities", "--json")
    with ContextGraph.open(db_path) as graph:
        stats = graph.stats()
        listing = graph.communities()
        assert dataclasses.is_dataclass(stats) and dataclasses.is_dataclass(listing)
        with pytest.raises(dataclasses.FrozenInstanceError):
            stats.concepts = 0  # type: ignore[misc]
        shown = json.loads(stats_json)
        shown.pop("databaseBytes")  # the WAL may be checkpointed between the two opens
        assert {k: v for k, v in stats.as_dict().items() if k != "databaseBytes"} == shown
        assert listing.as_dict() == json.loads(communities_json)
        assert list(stats.as_dict()) == list(json.loads(stats_json))  # same keys, same order
        assert graph.revision() == ContextGraph.head() == graph.upgrade()
        history = ContextGraph.history()
        assert history[-1].revision == ContextGraph.head()
        assert history[0].down_revision is None
    _, out, _ = invoke(runner, db_path, "db", "history")
    assert out.splitlines()[0].startswith(f"{history[0].revision}: ")


def test_control_characters_in_names_never_reach_the_terminal_raw(
    runner: CliRunner, db_path: Path, vault: Path
) -> None:
    """A file or concept name may hold a line break or an escape sequence (a cloned repository
    is anyone's); the text output writes them escaped, so each URI stays on its line and
    nothing recolours or retitles the terminal."""
    evil = "\x1b]0;owned\x07"
    (vault / "ctl\x1b[31m.md").write_text(f"[[Alpha]] [[Esc{evil}]] words\n", encoding="utf-8")
    (vault / "line\nbreak.md").write_text("[[Alpha]] [[Beta]] words\n", encoding="utf-8")
    (vault / "m.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    assert runner.invoke(cli, ["--db", str(db_path), "sync", str(vault)]).exit_code == 0
    for args in (
        ["search", "words"],
        ["retrieve", "words"],
        ["context", "alpha"],
        ["context", f"esc{evil}"],
        ["expand", "alpha"],
        ["write", "new.md", "--content", "[[Alpha]] [[Bell\x07]]"],
    ):
        result = runner.invoke(cli, ["--db", str(db_path), *args])
        assert result.exit_code == 0, (args, result.output)
        assert "\x1b" not in result.output and "\x07" not in result.output, (args, result.output)
        assert "memory://vault/line\n" not in result.output, args
    found = runner.invoke(cli, ["--db", str(db_path), "search", "words", "--json"])
    uris = {hit["uri"] for hit in json.loads(found.stdout)["hits"]}  # JSON keeps them exact
    assert {"memory://vault/ctl\x1b[31m.md", "memory://vault/line\nbreak.md"} <= uris
