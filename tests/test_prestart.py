"""A CLI sync into a new database has its folders' files extracted while it loads the library
(:func:`contextgraph.sync.extraction.prestart`); the sync takes those results only when its
jobs are exactly the ones begun, and otherwise reads every file itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from contextgraph import ContextGraph, Settings
from contextgraph.sync import extraction
from contextgraph.sync.lock import database_files
from tests.helpers import child_env, snapshot, wait_for_file, write_topic_notes

FILES = 450  # over POOL_THRESHOLD: the CLI starts a pool before the library loads


def _vault(root: Path, files: int = FILES) -> Path:
    write_topic_notes(root, files)
    return root


def _begin(
    tmp_path: Path, held: pytest.MonkeyPatch | None = None
) -> tuple[Path, Path, extraction._Head]:
    """A vault, a database path, and the extraction of the vault that a prestart began for it.

    ``held``: every worker of the pool first waits for :func:`_release` (:func:`_hold_workers`),
    so none of the extraction's chunks can begin before the test lets them."""
    vault, database = _vault(tmp_path / "vault"), tmp_path / "g.db"
    if held is not None:
        _hold_workers(held, tmp_path / _RELEASE)
    assert extraction.prestart(Settings(), [vault], database_files(database))
    assert extraction._head is not None
    return vault, database, extraction._head


_RELEASE = "release"  # the file whose creation lets held workers go on


def _hold_workers(monkeypatch: pytest.MonkeyPatch, release: Path) -> None:
    """Each worker of a pool started from here (:func:`workers.started_pool`) first waits for
    ``release`` to exist: what is submitted after stays pending until then, whatever the
    machine's speed."""
    from contextgraph.sync import workers

    started = workers.started_pool

    def held_pool(count: int) -> ProcessPoolExecutor:
        pool = started(count)
        for _ in range(count):  # a worker that waits takes nothing else
            pool.submit(wait_for_file, str(release))
        return pool

    monkeypatch.setattr(workers, "started_pool", held_pool)


def _release(tmp_path: Path) -> None:
    (tmp_path / _RELEASE).touch()


def _inline(database: Path, folders: list[Path], settings: Settings) -> dict[str, object]:
    with ContextGraph.open(database, settings=settings) as graph:
        graph.sync(folders)
        return snapshot(graph)


def test_a_cli_sync_into_a_new_database_takes_what_was_extracted_before_it(
    tmp_path: Path,
) -> None:
    first, second = _vault(tmp_path / "b-notes"), _vault(tmp_path / "a-notes", files=40)
    log = tmp_path / "log"
    site = tmp_path / "site"
    site.mkdir()
    # In every process of the sync: each file read is logged, and so is what the sync's round
    # made of the extraction begun before it (taken: its futures; dropped: None).
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""
            import os
            import contextgraph.sync.extraction as extraction
            import contextgraph.sync.ingest as ingest

            def _log(line):
                with open({str(log)!r}, "a", encoding="utf-8") as out:
                    out.write(line + "\\n")

            _prepare, _claim = ingest.prepare, extraction._claim_ahead

            def prepare(job):
                _log("read " + job.abspath)
                return _prepare(job)

            def claim(jobs, pool):
                ahead = _claim(jobs, pool)
                _log(("taken " if ahead is not None else "dropped ") + str(len(jobs)))
                return ahead

            ingest.prepare, extraction._claim_ahead = prepare, claim
            """
        ),
        encoding="utf-8",
    )
    env = child_env(CONTEXTGRAPH_NO_RESIDENT="1")
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    database = tmp_path / "g.db"
    # The folders not in the order of the sources' names, the order the sync takes them in.
    folders = [str(first), str(second)]
    done = subprocess.run(
        [sys.executable, "-m", "contextgraph", "--db", str(database), "sync", "--json", *folders],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["sources"] == ["a-notes", "b-notes"]
    assert report["files"]["added"] == FILES + 40
    assert report["seconds"]["scan"] > 0  # the walk made before the sync, counted in it
    lines = log.read_text(encoding="utf-8").splitlines()
    assert [line for line in lines if not line.startswith("read ")] == [f"taken {FILES + 40}"]
    reads = [line.removeprefix("read ") for line in lines if line.startswith("read ")]
    assert sorted(reads) == sorted(str(p) for p in [*first.iterdir(), *second.iterdir()])
    with ContextGraph.open(database) as graph:
        got = snapshot(graph)
    assert got == _inline(tmp_path / "inline.db", [first, second], Settings(workers=1))


def test_an_extraction_begun_for_other_jobs_is_dropped_and_the_sync_reads_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims: list[bool] = []
    claim = extraction._claim_ahead

    def spy(jobs: list[object], pool: object) -> object:
        ahead = claim(jobs, pool)  # type: ignore[arg-type]
        claims.append(ahead is not None)
        _release(tmp_path)  # the sync reads its own jobs in the same pool
        return ahead

    monkeypatch.setattr(extraction, "_claim_ahead", spy)
    # Begun under the default settings; the sync keeps concept names of up to 7 characters,
    # so every job it makes differs from the ones begun.
    vault, database, head = _begin(tmp_path, held=monkeypatch)
    try:
        assert extraction.prescanned(vault, []) is None  # a walk that left out other files
        shorter = Settings(max_concept_length=7)
        with ContextGraph.open(database, settings=shorter) as graph:
            graph.sync([vault])
            got = snapshot(graph)
    finally:
        extraction.drop_prestarted()
        _release(tmp_path)
    assert claims == [False]
    assert extraction._head is None
    assert all(f.done() for f in head.futures)  # cancelled, or a chunk handed to a worker
    assert sum(f.cancelled() for f in head.futures) > len(head.futures) // 2
    assert got == _inline(
        tmp_path / "inline.db", [vault], Settings(workers=1, max_concept_length=7)
    )
    names = {row[2] for row in got["mentions"]}  # type: ignore[attr-defined]
    assert "topic-3" in names  # 7 characters: kept
    assert not {"topic-10", "topic-20"} & names  # 8: dropped, as the sync's settings say


def test_a_walk_made_ahead_is_given_once_and_only_for_the_same_exclusions(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "vault")
    exclude = database_files(tmp_path / "g.db")
    assert extraction.prestart(Settings(), [vault], exclude)
    try:
        assert not extraction.prestart(Settings(), [vault], exclude)  # one at a time
        assert extraction.prescanned(vault, exclude[:1]) is None
        given = extraction.prescanned(tmp_path / "." / "vault", list(exclude))
        assert given is not None
        walk, seconds = given
        assert len(walk.files) == FILES and seconds > 0
        assert extraction.prescanned(vault, exclude) is None  # given once
    finally:
        extraction.drop_prestarted()
    assert extraction._head is None


def test_a_walk_made_before_another_process_filled_the_store_is_not_taken(
    tmp_path: Path,
) -> None:
    vault, database, head = _begin(tmp_path)
    try:
        # Meanwhile a note appears and another process syncs the folder into the database.
        (vault / "late.md").write_text("[[Late Topic]] [[Topic 1]]\n", encoding="utf-8")
        other = subprocess.run(
            [sys.executable, "-m", "contextgraph", "--db", str(database), "sync", str(vault)],
            env=child_env(CONTEXTGRAPH_NO_RESIDENT="1"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert other.returncode == 0, other.stderr[-3000:]
        with ContextGraph.open(database) as graph:
            report = graph.sync([vault])
            got = snapshot(graph)
    finally:
        extraction.drop_prestarted()
    # The walk made before late.md existed would have taken it for gone.
    assert (report.scanned, report.deleted, report.unchanged) == (FILES + 1, 0, FILES + 1)
    assert extraction._head is None and head.pool._shutdown_thread  # dropped at once
    assert got == _inline(tmp_path / "inline.db", [vault], Settings(workers=1))


def test_a_sync_that_fails_before_its_first_file_cancels_what_was_begun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.sync import run

    vault, database, head = _begin(tmp_path, held=monkeypatch)

    def failing(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("the writer failed before its first file")

    monkeypatch.setattr(run, "_reconcile", failing)
    try:
        with ContextGraph.open(database) as graph, pytest.raises(RuntimeError, match="writer"):
            graph.sync([vault])
        # Every chunk not handed to a worker is cancelled when the sync fails, not later: the
        # process does not extract them all before it exits.
        assert head.pool._shutdown_thread
        assert sum(f.cancelled() for f in head.futures) > len(head.futures) // 2
    finally:
        extraction.drop_prestarted()
        _release(tmp_path)


@pytest.mark.parametrize("taken", [0, 5], ids=["no file", "five files"])
def test_a_sync_with_nothing_to_read_or_too_little_for_the_pool_drops_what_was_begun(
    tmp_path: Path, taken: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = _begin(tmp_path, held=monkeypatch)[2]
    few = head.jobs[:taken]  # under POOL_THRESHOLD: extracted in this process
    try:
        with extraction.Extraction(Settings()) as round_:
            round_.begin(few)
            assert [p.path for p in round_.take(len(few))] == [job.path for job in few]
        assert extraction._head is None
        assert head.pool._shutdown_thread and not head.taken
        assert sum(f.cancelled() for f in head.futures) > len(head.futures) // 2
    finally:
        extraction.drop_prestarted()
        _release(tmp_path)


def test_a_folder_named_twice_counts_once_for_the_pool(tmp_path: Path) -> None:
    from contextgraph.__main__ import prestart_cold_load

    vault = _vault(tmp_path / "vault", files=250)  # twice 250 would pass POOL_THRESHOLD
    (tmp_path / "alias").symlink_to(vault)
    argv = [
        "--db",
        str(tmp_path / "g.db"),
        "sync",
        str(vault),
        f"{vault}/",
        str(tmp_path / "alias"),
    ]
    try:
        assert not prestart_cold_load(argv)
        assert extraction._head is None
    finally:
        extraction.drop_prestarted()
