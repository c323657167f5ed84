"""scripts/sync_profile.py: a cold sync's SQL and CPU, the report's shape (never its figures)."""

from __future__ import annotations

import statistics
from pathlib import Path

from helpers import run_script, write_topic_notes


def test_a_cold_sync_reports_its_statements_commits_and_cpu(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_topic_notes(vault, 12)
    argv = ["--runs", "2", "--top", "50", "--workdir", str(tmp_path)]
    result = run_script("sync_profile", str(vault), *argv)
    assert result["vault"] == [str(vault.resolve())] and result["runs"] == 2
    runs = result["each_run"]
    assert len(runs) == 2
    for run in runs:
        assert run["files"] == 12
        assert run["writer_cpu_s"] > 0 and run["workers_cpu_s"] >= 0
        assert run["commits"]["count"] >= 1
        assert {"scan", "files", "communities", "total"} <= run["phases_s"].keys()
        by_sql = {s["sql"]: s for s in run["statements"]}
        files_insert = [s for sql, s in by_sql.items() if sql.startswith("INSERT INTO files (")]
        assert [s["rows"] for s in files_insert] == [12]  # one executemany of the 12 rows
        assert any(sql.startswith("INSERT INTO files_fts") for sql in by_sql)  # a cold load
        assert run["sql_s"] >= sum(s["seconds"] for s in run["statements"]) - 0.002
    median = result["median"]
    assert median["wall_s"] == round(statistics.median(r["wall_s"] for r in runs), 3)
    assert list(median["statements_s"].values()) == sorted(
        median["statements_s"].values(), reverse=True
    )
    assert (tmp_path / "profile.db").is_file()
