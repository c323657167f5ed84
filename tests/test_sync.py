from __future__ import annotations

import gc
import itertools
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from helpers import DbFactory, Writer, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from contextgraph import ContextGraph, Settings, SyncInProgress
from contextgraph.store import db
from contextgraph.sync import ingest
from contextgraph.sync.run import lock_database
from contextgraph.sync.unchanged import MAX_READS

pytestmark = pytest.mark.engines("sqlite", "postgresql")


def concepts(graph: ContextGraph) -> dict[str, int]:
    with db.read(graph.engine) as conn:
        rows = conn.execute(
            text(
                "SELECT e.key, sum(m.count) FROM entities e JOIN mentions m"
                " ON m.concept_id = e.id WHERE e.kind = 'concept' GROUP BY e.key"
            )
        ).all()
    return dict(rows)


def relations(graph: ContextGraph) -> dict[tuple[str, str], int]:
    with db.read(graph.engine) as conn:
        rows = conn.execute(
            text(
                "SELECT a.key, b.key, r.count FROM concept_relations r"
                " JOIN entities a ON a.id = r.a_id JOIN entities b ON b.id = r.b_id"
            )
        ).all()
    return {tuple(sorted((a, b))): n for a, b, n in rows}  # type: ignore[misc]


def test_sync_extracts_concepts_and_counts_cooccurrence_per_file(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] and [[Beta]] and [[alpha]] again")
    write("b.md", "[[Alpha]] with [[Beta]] and [[Gamma]]")
    report = store.sync([vault])
    assert (report.scanned, report.added, report.failed) == (2, 2, [])
    assert concepts(store) == {"alpha": 3, "beta": 2, "gamma": 1}
    assert relations(store) == {("alpha", "beta"): 2, ("alpha", "gamma"): 1, ("beta", "gamma"): 1}


def test_sync_retracts_links_removed_by_an_edit(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    note = write("a.md", "[[Alpha]] [[Beta]]")
    write("b.md", "[[Alpha]] [[Beta]]")
    store.sync([vault])
    note.write_text("[[Alpha]] [[Delta]] and more text", encoding="utf-8")
    report = store.sync()
    assert report.updated == 1
    assert relations(store) == {("alpha", "beta"): 1, ("alpha", "delta"): 1}


def test_deleted_files_are_retracted_and_orphan_concepts_removed(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] [[Only Here]]")
    gone = write("b.md", "[[Alpha]] [[Beta]]")
    store.sync([vault])
    gone.unlink()
    report = store.sync()
    assert report.deleted == 1
    assert concepts(store) == {"alpha": 1, "only-here": 1}
    assert relations(store) == {("alpha", "only-here"): 1}


def test_unchanged_size_and_mtime_means_the_file_is_not_read(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    note = write("a.md", "[[Alpha]] [[Beta]]")
    store.sync([vault])
    st = note.stat()
    note.write_text("[[Gamma]] [[Delt]]", encoding="utf-8")  # same size
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = store.sync()
    assert report.unchanged == 1
    assert set(concepts(store)) == {"alpha", "beta"}


@pytest.mark.sqlite_only
def test_a_no_change_sync_writes_nothing(store: ContextGraph, vault: Path, write: Writer) -> None:
    write("a.md", "[[Alpha]] [[Beta]]")
    write("b.md", "[[Beta]] [[Gamma]]")
    store.sync([vault])
    path = store.database_path
    assert path is not None
    watcher = sqlite3.connect(path)  # data_version moves when another connection commits
    try:
        before = watcher.execute("PRAGMA data_version").fetchone()
        report = store.sync()
        after = watcher.execute("PRAGMA data_version").fetchone()
    finally:
        watcher.close()
    assert report.unchanged == 2
    assert after == before


def test_same_hash_updates_only_the_stat(store: ContextGraph, vault: Path, write: Writer) -> None:
    note = write("a.md", "[[Alpha]] [[Beta]]")
    store.sync([vault])
    os.utime(note, ns=(1_000_000_000, 1_000_000_000))
    report = store.sync()
    assert (report.updated, report.unchanged, report.added) == (0, 0, 0)
    with db.read(store.engine) as conn:
        assert conn.execute(text("SELECT mtime_ns FROM files")).scalar_one() == 1_000_000_000
    assert store.sync().unchanged == 1


def test_rename_keeps_last_accessed(store: ContextGraph, vault: Path, write: Writer) -> None:
    note = write("a.md", "[[Alpha]] [[Beta]]")
    store.sync([vault])
    with db.write(store.engine) as conn:
        conn.execute(text("UPDATE files SET last_accessed = 1234.5"))
    (vault / "sub").mkdir()
    note.rename(vault / "sub" / "renamed.md")
    report = store.sync()
    assert (report.renamed, report.added, report.deleted) == (1, 0, 0)
    with db.read(store.engine) as conn:
        row = conn.execute(text("SELECT path, last_accessed FROM files")).one()
    assert tuple(row) == ("sub/renamed.md", 1234.5)
    assert relations(store) == {("alpha", "beta"): 1}


def test_bad_files_are_reported_and_the_sync_goes_on(
    db_url: str, vault: Path, write: Writer
) -> None:
    write("good.md", "[[Alpha]] [[Beta]]")
    (vault / "binary.md").write_bytes(b"[[Nope]]\x00\x01\x02")
    (vault / "latin1.md").write_bytes("[[Caf\xe9]] [[Alpha]]".encode("latin-1"))
    (vault / "big.md").write_text("[[Huge]] " + "x" * 5000, encoding="utf-8")
    graph = ContextGraph.open(db_url, settings=Settings(max_file_bytes=4096))
    report = graph.sync([vault])
    reasons = {p.path: p.reason for p in report.failed}
    assert "NUL" in reasons["binary.md"]
    assert "larger than" in reasons["big.md"]
    assert any(p.path == "latin1.md" and "UTF-8" in p.reason for p in report.warnings)
    assert concepts(graph) == {"alpha": 2, "beta": 1, "caf\ufffd": 1}
    graph.close()


def test_unreadable_and_vanished_files_are_reported(
    store: ContextGraph, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("ok.md", "[[Alpha]] [[Beta]]")
    write("locked.md", "[[Secret]]")
    write("ghost.md", "[[Ghost]]")
    real_open = ingest.nonblocking  # what a sync opens every file it reads with

    def fake_open(path: str, flags: int) -> int:
        if path.endswith("locked.md"):
            raise PermissionError(13, "Permission denied")
        if path.endswith("ghost.md"):
            raise FileNotFoundError(2, "No such file")
        return real_open(path, flags)

    monkeypatch.setattr(ingest, "nonblocking", fake_open)
    report = store.sync([vault])
    reasons = {p.path: p.reason for p in report.failed}
    assert reasons["locked.md"].startswith("unreadable")
    assert reasons["ghost.md"] == "vanished during the scan"
    assert set(concepts(store)) == {"alpha", "beta"}


def test_a_file_that_becomes_unreadable_is_retracted(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    note = write("a.md", "[[Alpha]] [[Beta]]")
    store.sync([vault])
    note.write_bytes(b"[[Alpha]] \x00 binary now")
    report = store.sync()
    assert [p.path for p in report.failed] == ["a.md"]
    assert concepts(store) == {}
    assert store.doctor().ok


def test_a_file_over_the_concept_limit_keeps_mentions_but_adds_no_pairs(
    db_url: str, vault: Path, write: Writer
) -> None:
    write("many.md", "[[A1]] [[A2]] [[A3]] [[A4]]")
    write("few.md", "[[A1]] [[A2]]")
    graph = ContextGraph.open(db_url, settings=Settings(max_concepts_per_file=3))
    report = graph.sync([vault])
    assert any(p.path == "many.md" and "pairs" in p.reason for p in report.warnings)
    assert set(concepts(graph)) == {"a1", "a2", "a3", "a4"}
    assert relations(graph) == {("a1", "a2"): 1}
    assert graph.doctor().ok
    graph.close()


def test_dropped_link_targets_are_counted(store: ContextGraph, vault: Path, write: Writer) -> None:
    write("a.md", "[[ ]] [[" + "x" * 201 + "]] [[Fine]]")
    report = store.sync([vault])
    assert report.dropped_links == 2
    assert set(concepts(store)) == {"fine"}


@pytest.mark.sqlite_only  # the database file inside the vault is what is skipped
def test_walk_skips_hidden_and_dependency_folders_and_the_database(
    tmp_path: Path, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] [[Beta]]")
    write(".obsidian/x.md", "[[Hidden]]")
    write("node_modules/pkg/readme.md", "[[Dependency]]")
    write("venv/lib/x.md", "[[Venv]]")
    (vault / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (vault / "loop").symlink_to(vault, target_is_directory=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("[[Outside]]")
    (vault / "out").symlink_to(outside, target_is_directory=True)
    (vault / "out-file.md").symlink_to(outside / "secret.md")
    (vault / "dangling.md").symlink_to(tmp_path / "missing.md")
    graph = ContextGraph.open(vault / "graph.db")
    report = graph.sync([vault])
    assert report.scanned == 1
    assert set(concepts(graph)) == {"alpha", "beta"}
    graph.close()


def test_second_sync_waits_or_refuses_with_no_wait(store: ContextGraph, vault: Path) -> None:
    with lock_database(store.engine):
        with pytest.raises(SyncInProgress):
            store.sync([vault], wait=False)
        done = threading.Event()

        def waiting_sync() -> None:
            store.sync([vault])
            done.set()

        thread = threading.Thread(target=waiting_sync)
        thread.start()
        assert not done.wait(0.3)  # blocked behind the held lock
    thread.join(10)
    assert done.is_set()


def test_small_batches_give_the_same_store(
    new_db: DbFactory, tmp_path: Path, write: Writer
) -> None:
    vault = tmp_path / "v"
    for i in range(25):
        write(f"n{i}.md", f"[[C{i % 7}]] [[C{(i * 3) % 11}]] [[Hub]]", root=vault)
    one = ContextGraph.open(new_db("one"), settings=Settings(batch_files=2))
    two = ContextGraph.open(new_db("two"), settings=Settings(batch_files=1000))
    one.sync([vault])
    two.sync([vault])
    assert snapshot(one) == snapshot(two)
    one.close()
    two.close()


def test_process_pool_extraction_gives_the_same_store(
    new_db: DbFactory, tmp_path: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.sync import extraction

    vault = tmp_path / "v"
    for i in range(40):
        write(f"d{i % 3}/n{i}.md", f"[[C{i % 7}]] [[C{(i * 3) % 11}]] [[Hub]]", root=vault)
    inline = ContextGraph.open(new_db("inline"), settings=Settings(workers=1))
    inline.sync([vault])
    monkeypatch.setattr(extraction, "POOL_THRESHOLD", 1)
    pooled = ContextGraph.open(new_db("pooled"), settings=Settings(workers=2))
    pooled.sync([vault])
    assert snapshot(inline) == snapshot(pooled)
    inline.close()
    pooled.close()


# -- the sync invariant ---------------------------------------------------------------------

NAMES = [f"note{i}.md" for i in range(6)] + ["sub/a.md", "sub/deep/b.md"]
CONCEPTS = ["Alpha", "beta", "Gamma Ray", "delta_x", "Epsilon", "alpha"]

edit_strategy = st.one_of(
    st.tuples(
        st.just("write"),
        st.sampled_from(NAMES),
        st.lists(st.sampled_from(CONCEPTS), max_size=5),
        st.booleans(),
    ),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just([]), st.just(False)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES), st.just(False)),
)

_clock = itertools.count(1_700_000_000_000_000_000, 1_000_000_000)


def _apply_edit(vault: Path, edit: tuple[object, ...]) -> None:
    action, name, arg, fenced = edit
    path = vault / str(name)
    if action == "write":
        links = " ".join(f"[[{c}]]" for c in arg)  # type: ignore[attr-defined]
        body = f"Text {links}\n"
        if fenced:
            body += "```\n[[In Code]]\n```\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        stamp = next(_clock)
        os.utime(path, ns=(stamp, stamp))  # distinct mtimes: the stat check is the contract
    elif action == "delete":
        path.unlink(missing_ok=True)
    elif action == "rename" and path.exists():
        target = vault / str(arg)
        target.parent.mkdir(parents=True, exist_ok=True)
        path.replace(target)


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(st.lists(edit_strategy, min_size=1, max_size=4), min_size=1, max_size=4))
def test_incremental_sync_equals_a_from_scratch_sync(
    tmp_path_factory: pytest.TempPathFactory,
    new_db: DbFactory,
    steps: list[list[tuple[object, ...]]],
) -> None:
    base = tmp_path_factory.mktemp("inv")
    vault = base / "vault"
    vault.mkdir()
    live_url = new_db("live")
    live = ContextGraph.open(live_url, settings=Settings(batch_files=2))
    live.sync([vault], name="v")
    for i, step in enumerate(steps):
        for edit in step:
            _apply_edit(vault, edit)
        live.sync()
        fresh_url = new_db(f"fresh{i}")
        fresh = ContextGraph.open(fresh_url)
        fresh.sync([vault], name="v")
        assert snapshot(live) == snapshot(fresh)
        assert live.doctor().ok
        fresh.close()
        new_db.drop(fresh_url)
    live.close()
    new_db.drop(live_url)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_sync_leaves_the_cyclic_gc_as_it_found_it(
    store: ContextGraph, vault: Path, write: Writer, enabled: bool
) -> None:
    # Batches and the communities run pause the GC; neither may leave it off, or turn it on.
    write("a.md", "[[Alpha]] [[Beta]] [[Gamma]]")
    write("b.md", "[[Beta]] [[Delta]]")
    was = gc.isenabled()
    if not enabled:
        gc.disable()
    try:
        report = store.sync([vault])
        assert report.communities is not None and report.communities > 0
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()


def test_a_sync_refusing_writes_answers_when_nothing_changed_and_stops_before_any_work(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    from contextgraph.store import nowrite

    write("a.md", "[[Alpha]] and [[Beta]]\n")
    store.sync([vault])
    before = snapshot(store)
    with nowrite.refusing() as refusal:
        report = store.sync()
    assert refusal.stopped is None and (report.unchanged, report.added) == (1, 0)
    write("b.md", "[[Beta]] and [[Gamma]]\n")
    with nowrite.refusing() as refusal, pytest.raises(nowrite.WouldWrite):
        store.sync()
    assert refusal.stopped == "write"  # a few new files are read: this one would be stored
    other = vault.parent / "other"
    write("c.md", "[[Alpha]]\n", root=other)
    with nowrite.refusing() as refusal, pytest.raises(nowrite.WouldWrite):
        store.sync([other])  # registering a new folder writes
    assert refusal.stopped == "write"
    assert [s.name for s in store.sources()] == ["vault"]
    # another sync runs: never wait for it
    held = lock_database(store.engine)
    with held, nowrite.refusing() as refusal, pytest.raises(nowrite.WouldWrite):
        store.sync()
    assert refusal.stopped == "wait for another sync"
    with nowrite.refusing() as refusal, pytest.raises(nowrite.WouldWrite):
        store.sync([vault])  # a known folder registers nothing, but b.md is new
    assert refusal.stopped == "write"
    for i in range(MAX_READS):
        write(f"new{i}.md", "[[Alpha]]\n")
    with nowrite.refusing() as refusal, pytest.raises(nowrite.WouldWrite):
        store.sync([vault])  # more new files than a refusing sync reads
    assert refusal.stopped == "read changed files"
    assert snapshot(store) == before  # nothing was written
    assert not nowrite.active()
    assert store.sync([vault]).added == 1 + MAX_READS
    with nowrite.refusing() as refusal:
        assert store.sync([vault]).unchanged == 2 + MAX_READS
    assert refusal.stopped is None
    write("a.md", "[[Alpha]] and [[Beta]], edited\n")
    with nowrite.refusing() as refusal, pytest.raises(nowrite.WouldWrite):
        store.sync()
    assert refusal.stopped == "read changed files"  # a stored file changed: not read here
