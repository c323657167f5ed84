"""scripts/ab.py: two source trees timed alternately, the report's shape (never its figures)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers import REPO, run_script, write_topic_notes


def test_a_cold_sync_of_two_trees_reports_pairs_and_phases(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_topic_notes(vault, 12)
    result = run_script(
        "ab", "--base", str(REPO), "--cold", str(vault), "--runs", "3", "--workdir", str(tmp_path)
    )
    assert result["command"] == ["sync", str(vault.resolve())]
    assert result["pairs"] == 3
    assert result["trees"] == {"base": str(REPO), "new": str(REPO)}
    for side in ("base", "new"):
        report = result[side]
        assert len(report["wall_runs_s"]) == 3
        assert report["wall_median_s"] == sorted(report["wall_runs_s"])[1]
        assert {"scan", "files", "communities", "total"} <= report["phases_median_s"].keys()
    assert 0 <= result["new_faster_pairs"] <= 3
    assert (tmp_path / "base.db").is_file() and (tmp_path / "new.db").is_file()


def test_a_query_runs_on_each_trees_own_database(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_topic_notes(vault, 12)
    argv = ["--base", str(REPO), "--db-from", str(vault), "--runs", "1"]
    result = run_script("ab", *argv, "--workdir", str(tmp_path), "--", "context", "Topic 3")
    assert result["command"] == ["context", "Topic 3"]
    assert "phases_median_s" not in result["new"]  # only a sync reports phases
    for side in ("base", "new"):
        assert len(result[side]["wall_runs_s"]) == 1
    one_pair = result["new"]["wall_runs_s"][0] - result["base"]["wall_runs_s"][0]
    assert abs(result["paired_difference_median_s"] - one_pair) <= 0.002  # each rounded apart


def test_first_calls_are_timed_on_each_trees_own_database(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_topic_notes(vault, 12)
    argv = ["--base", str(REPO), "--first-call", str(vault), "--runs", "2", "--passes", "1"]
    result = run_script("ab", *argv, "--workdir", str(tmp_path))
    assert result["pairs"] == 2 and result["passes"] == 1
    for side in ("base", "new"):
        runs = result[side]["runs"]
        assert len(runs) == 2
        assert all(0 < run["p50_ms"] <= run["p95_ms"] for run in runs)
        assert result[side]["p50_median_ms"] == round(sum(r["p50_ms"] for r in runs) / 2, 3)
    assert 0 <= result["new_faster_pairs"] <= 2


def test_a_base_that_is_neither_a_tree_nor_a_revision_is_one_line(tmp_path: Path) -> None:
    script = str(REPO / "scripts" / "ab.py")
    argv = ["--base", "no-such-revision-xyz", "--cold", str(tmp_path), "--workdir", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, script, *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "neither a folder holding a contextgraph package nor a revision" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_edit_before_each_run_gives_each_sync_one_changed_note(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_topic_notes(vault, 12)
    note = sorted(vault.rglob("*.md"))[0]
    before, stamp = note.read_bytes(), note.stat().st_mtime_ns
    argv = ["--base", str(REPO), "--db-from", str(vault), "--edit", str(note), "--runs", "2"]
    result = run_script("ab", *argv, "--workdir", str(tmp_path), "--", "sync")
    assert result["edited"] == str(note.resolve())
    for side in ("base", "new"):
        assert len(result[side]["wall_runs_s"]) == 2
    assert note.read_bytes() == before and note.stat().st_mtime_ns == stamp
    with sqlite3.connect(tmp_path / "new.db") as conn:  # each sync read that run's edit
        names = conn.execute("SELECT key FROM entities WHERE key LIKE 'ab-edit-%'").fetchall()
        files = conn.execute("SELECT count(*) FROM files").fetchone()
    conn.close()
    assert files == (12,) and names  # the edits' concept, still linked by the last one
