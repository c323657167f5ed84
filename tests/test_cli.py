from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, NOW, Writer

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


def test_negative_depth_is_a_one_line_error_with_exit_1(runner: CliRunner, db_path: Path) -> None:
    code, out, err = invoke(runner, db_path, "context", "x", "--depth", "-1", "--json")
    assert code == 1
    assert out == ""
    assert "depth" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_option_is_a_usage_error_with_exit_2(runner: CliRunner, db_path: Path) -> None:
    code, _, err = invoke(runner, db_path, "context", "x", "--bogus")
    assert code == 2
    assert "No such option" in err


def test_unknown_concept_gives_an_empty_result_not_an_error(
    runner: CliRunner, db_path: Path
) -> None:
    code, out, _ = invoke(runner, db_path, "context", "Nobody Links This", "--json")
    assert code == 0
    assert json.loads(out)["directRelations"] == []


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
    from contextgraph.sync import sync_lock

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
    assert code == 0 and out.strip() == "0004_relation_weights"
    code, out, _ = invoke(runner, db_path, "db", "history")
    assert code == 0 and out.splitlines()[0].startswith("0001_core")
    code, out, _ = invoke(runner, db_path, "db", "upgrade")
    assert code == 0


def test_stats_shows_settings_from_the_environment(
    runner: CliRunner, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTGRAPH_GRACE_DAYS", "7")
    monkeypatch.setenv("MAENIFOLD_COMMUNITY_MIN_SHARED", "5")
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
