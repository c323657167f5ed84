"""PostgreSQL as the engine (SPEC §15): locks, transactions, retries, crashes, migrations, doors.

Every test here runs against the session's throwaway cluster (``conftest.pg_cluster``) and skips
with one line where the machine has no PostgreSQL server.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import EXAMPLES, DbFactory, Writer, child_env, snapshot, write_numbered_notes
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from contextgraph import ContextGraph, Settings, SyncInProgress
from contextgraph.cli import cli
from contextgraph.errors import DatabaseError
from contextgraph.store import db
from contextgraph.store.pglock import SYNC_LOCK_KEY
from contextgraph.sync.run import lock_database

pytestmark = pytest.mark.engines("postgresql")

REPO = Path(__file__).resolve().parents[1]


# -- one sync per database: a session-level advisory lock ------------------------------------

_HOLD_SYNC_LOCK = """
import sys, time
from contextgraph.store import db
from contextgraph.sync.run import lock_database
engine = db.make_engine(sys.argv[1])
with lock_database(engine):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _hold(url: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_SYNC_LOCK, url, str(seconds)],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_killed_sync_holder_frees_the_lock_at_once(
    store: ContextGraph, db_url: str, vault: Path
) -> None:
    store.add_source(vault)
    holder = _hold(db_url, 60)
    try:
        with pytest.raises(SyncInProgress):
            store.sync(wait=False)
        result = CliRunner().invoke(cli, ["--db", db_url, "sync", "--no-wait"])
        assert result.exit_code == 1 and "running" in result.stderr
        holder.send_signal(signal.SIGKILL)  # no cleanup runs: the server ends the session
        holder.wait(10)
        deadline = time.monotonic() + 10
        while True:
            try:
                store.sync(wait=False)
                break
            except SyncInProgress:
                assert time.monotonic() < deadline, "the lock outlived its session"
                time.sleep(0.05)
    finally:
        holder.kill()
        holder.wait(10)


def test_a_waiting_sync_starts_when_the_holder_releases(
    store: ContextGraph, db_url: str, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] [[Beta]]")
    holder = _hold(db_url, 1.0)
    started = time.monotonic()
    report = store.sync([vault])
    holder.wait(10)
    assert time.monotonic() - started >= 0.5
    assert report.concepts == 2


def test_the_lock_is_per_database(new_db: DbFactory, vault: Path) -> None:
    one, two = new_db("one"), new_db("two")
    graph_one, graph_two = ContextGraph.open(one), ContextGraph.open(two)
    graph_one.add_source(vault)
    graph_two.add_source(vault)
    try:
        with lock_database(graph_one.engine):
            graph_two.sync(wait=False)  # another database: not blocked
            with pytest.raises(SyncInProgress):
                graph_one.sync(wait=False)
    finally:
        graph_one.close()
        graph_two.close()


# -- transactions ------------------------------------------------------------------------------


def test_reads_are_read_only_snapshots_that_never_block_a_writer(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] [[Beta]]")
    store.sync([vault])
    with db.read(store.engine) as conn:
        before = conn.execute(text("SELECT count(*) FROM files")).scalar_one()
        finished = threading.Event()

        def writer() -> None:
            write("b.md", "[[Gamma]]")
            store.sync()
            finished.set()

        thread = threading.Thread(target=writer)
        thread.start()
        assert finished.wait(30), "a writer waited for a reader"
        thread.join()
        # The read transaction still sees its own snapshot.
        assert conn.execute(text("SELECT count(*) FROM files")).scalar_one() == before
    with db.read(store.engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM files")).scalar_one() == before + 1
        with pytest.raises(DBAPIError, match="read-only"):
            conn.execute(text("UPDATE files SET title = 'x'"))


def test_writers_take_turns_and_a_long_wait_is_one_clear_error(store: ContextGraph) -> None:
    with db.write(store.engine) as holder:
        holder.execute(text("INSERT INTO meta (key, value) VALUES ('held', '1')"))
        started = time.monotonic()
        with (
            pytest.raises(DatabaseError, match="stayed locked by another writer"),
            db.write(store.engine, retry_seconds=0.3),
        ):
            pass
        assert time.monotonic() - started < 5


def test_a_write_chosen_as_a_deadlock_victim_is_retried(store: ContextGraph) -> None:
    import psycopg

    with db.write(store.engine) as conn:
        conn.execute(text("INSERT INTO meta (key, value) VALUES ('a', '0'), ('b', '0')"))
    other = psycopg.connect(store.engine.url.set(drivername="postgresql").render_as_string(False))
    other.execute("SET deadlock_timeout = '20s'")  # so our writer is the one that gives up
    attempts: list[int] = []
    got_b = threading.Event()

    def body(conn: Any) -> None:
        attempts.append(1)
        conn.execute(text("UPDATE meta SET value = 'w' WHERE key = 'a'"))
        if len(attempts) == 1:
            got_b.wait(10)
        conn.execute(text("UPDATE meta SET value = 'w' WHERE key = 'b'"))

    def outsider() -> None:
        # Another client of the server locks b, then waits for a: a lock cycle.
        other.execute("UPDATE meta SET value = 'o' WHERE key = 'b'")
        got_b.set()
        time.sleep(0.3)
        other.execute("UPDATE meta SET value = 'o' WHERE key = 'a'")
        other.commit()

    thread = threading.Thread(target=outsider)
    thread.start()
    db.run_write(store.engine, body, retry_seconds=30)
    thread.join(30)
    other.close()
    assert len(attempts) == 2  # the first attempt died in the deadlock, the retry committed
    with db.read(store.engine) as conn:
        rows = conn.execute(text("SELECT key, value FROM meta WHERE key IN ('a', 'b')")).all()
    values = {key: value for key, value in rows}
    assert values == {"a": "w", "b": "w"}


# -- crashes ---------------------------------------------------------------------------------


def test_a_sync_killed_mid_way_leaves_a_store_the_next_sync_completes(
    tmp_path: Path, new_db: DbFactory
) -> None:
    vault = tmp_path / "vault"
    write_numbered_notes(vault, 300)
    url = new_db("live")
    ContextGraph.open(url).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "--db", url, "sync", str(vault)],
        env=child_env(CONTEXTGRAPH_BATCH_FILES="5", CONTEXTGRAPH_WORKERS="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    graph = ContextGraph.open(url)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with db.read(graph.engine) as conn:
                if conn.execute(text("SELECT count(*) FROM files")).scalar_one() >= 20:
                    break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with db.read(graph.engine) as conn:
            stored = conn.execute(text("SELECT count(*) FROM files")).scalar_one()
        assert stored > 0, "no batch committed before the kill"
        assert stored % 5 == 0 or stored == 300  # whole batches only
        assert graph.doctor().ok
        graph.sync(wait=True)  # the killed session's lock is gone
        fresh = ContextGraph.open(new_db("fresh"))
        fresh.sync([vault])
        assert snapshot(graph) == snapshot(fresh)
        fresh.close()
    finally:
        graph.close()


# -- concurrency soak -------------------------------------------------------------------------


def test_short_soak_on_postgresql_surfaces_no_error_and_loses_no_write(
    tmp_path: Path, new_db: DbFactory
) -> None:
    scripts = str(REPO / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import soak

    argv = ["--writers", "2", "--readers", "2", "--seconds", "6", "--notes", "40"]
    argv += ["--db", new_db("soak"), "--fresh-db", new_db("soak-fresh")]
    result = soak.main([*argv, "--workdir", str(tmp_path / "soak")])
    assert result["engine"] == "postgresql"
    assert result["errors"] == [] and result["error_count"] == 0
    assert result["lost_reads"] == 0, result["lost_examples"]
    assert result["doctor_ok"] and result["converged"] and result["communities_converged"]
    assert result["idle_after_final_sync"]
    assert result["ops"].get("sync", 0) >= 1 and result["ops"].get("read", 0) >= 1


# -- migrations ------------------------------------------------------------------------------


def test_migrations_create_exactly_the_models_and_downgrade_cleanly(new_db: DbFactory) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from contextgraph.store.models import metadata

    url = new_db("migrations")
    graph = ContextGraph.open(url)
    try:
        graph.sync([EXAMPLES / "vault"])
        before = graph.stats().as_dict()
        with graph.engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={"compare_type": True, "include_name": _include_name},
            )
            assert compare_metadata(context, metadata) == []
        db.downgrade(graph.engine, "0001_core")  # data kept, full-text index dropped
        db.upgrade(graph.engine)
        after = graph.stats().as_dict()
        for key in ("files", "concepts", "relations", "entities"):
            assert after[key] == before[key], key
        assert graph.doctor().ok
        assert graph.search("machine learning").total > 0
        db.downgrade(graph.engine, "base")
        assert db.current_revision(graph.engine) is None
        db.upgrade(graph.engine)
        assert db.current_revision(graph.engine) == db.SCHEMA_HEAD
    finally:
        graph.close()


def _include_name(name: str | None, type_: str, _parent: object) -> bool:
    # As migrations/env.py: the tsvector column and its GIN index belong to the migrations.
    return not (
        (type_ == "column" and name == "search_tsv")
        or (type_ == "index" and name == "ix_files_search_tsv")
    )


def test_a_populated_0002_store_upgrades_its_search_index(new_db: DbFactory) -> None:
    url = new_db("upgrade")
    engine = db.make_engine(url)
    db.downgrade(engine, "base")
    db.upgrade(engine, "0002_fts")
    with db.write(engine) as conn:
        conn.execute(
            text("INSERT INTO sources (id, name, root, created_at) VALUES (1, 'code', '/x', 0)")
        )
        conn.execute(
            text(
                "INSERT INTO files (source_id, path, kind, size, mtime_ns, hash, modified, text,"
                " concept_count, pairs) VALUES (1, 'auth/tokens.py', 'code', 30, 1, 'h', 0,"
                " 'class TokenValidator:\n    pass\n', 0, 1)"
            )
        )
    db.upgrade(engine)
    engine.dispose()
    graph = ContextGraph.open(url)
    try:
        assert [h.path for h in graph.search("token validator").hits] == ["auth/tokens.py"]
        assert [h.path for h in graph.search("TokenValidator").hits] == ["auth/tokens.py"]
        assert graph.doctor().ok
    finally:
        graph.close()


# -- the doors ---------------------------------------------------------------------------------


def test_every_command_takes_a_postgresql_url(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    psycopg_url = db_url.replace("postgresql://", "postgresql+psycopg://")
    assert runner.invoke(cli, ["--db", psycopg_url, "sync", str(EXAMPLES / "vault")]).exit_code == 0
    monkeypatch.setenv("CONTEXTGRAPH_DB", db_url)
    result = runner.invoke(cli, ["context", "Machine Learning", "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["directRelations"]
    stats = json.loads(runner.invoke(cli, ["stats", "--json"]).stdout)
    assert stats["engine"] == "postgresql" and stats["serverVersion"].startswith("15")
    assert stats["schemaRevision"] == db.SCHEMA_HEAD and "postgres@" in stats["database"]
    doctor = runner.invoke(cli, ["doctor", "--json"])
    assert doctor.exit_code == 0 and json.loads(doctor.stdout)["ok"] is True
    for argv in (
        ["search", "machine learning", "--json"],
        ["communities", "--json"],
        ["visualize", "Machine Learning"],
        ["expand", "machine-learning", "--json"],
    ):
        assert runner.invoke(cli, argv).exit_code == 0, argv


def test_doctor_finds_a_search_index_out_of_step(store: ContextGraph, vault: Path) -> None:
    (vault / "a.md").write_text("[[Alpha]] words", encoding="utf-8")
    store.sync([vault])
    with db.write(store.engine) as conn:
        conn.execute(text("UPDATE files SET search_tsv = NULL"))
    report = store.doctor()
    assert not report.ok and report.fts != "ok"
    assert report.integrity == "not applicable (PostgreSQL)"


def test_settings_and_busy_timeout_apply_on_postgresql(db_url: str) -> None:
    graph = ContextGraph.open(db_url, settings=Settings(busy_timeout_ms=1))
    try:
        assert graph.stats().as_dict()["engine"] == "postgresql"
    finally:
        graph.close()


# -- hostile input ---------------------------------------------------------------------------


def test_hostile_input_raises_only_our_errors_and_changes_nothing(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    from test_hostile_input import PAYLOADS

    from contextgraph import ContextGraphError

    write("a.md", "[[Alpha]] [[Beta]] alpha beta words")
    write("x/b.md", "[[Alpha]] [[Gamma]] gamma words")
    store.sync([vault])
    before = snapshot(store)
    calls = {
        "context": lambda p: store.build_context(p),
        "expand": lambda p: store.expand([p]),
        "search": lambda p: store.search(p),
        "search-all": lambda p: store.search(p, all_words=True),
        "read": lambda p: store.read(p),
        "visualize": lambda p: store.visualize(p),
    }
    for name, payload in PAYLOADS.items():
        for call, fn in calls.items():
            try:
                fn(payload)
            except ContextGraphError:
                pass
            except Exception as exc:  # any other error is the bug this test looks for
                pytest.fail(f"{call}({name}): {type(exc).__name__}: {exc}"[:300])
    after = snapshot(store)
    before.pop("files")
    after.pop("files")  # read() of a payload naming a note may touch last_accessed only
    assert after == before
    assert store.doctor().ok


def test_a_sync_whose_lock_session_ends_stops_before_its_next_batch(
    db_url: str, new_db: DbFactory, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock's session ended mid-sync (an idle timeout, ``pg_terminate_backend``): the lock
    is free for another sync, so this one stops at its next write, in one clear error, and the
    next sync completes the store."""
    import psycopg

    from contextgraph.sync import run

    write_numbered_notes(vault, 6)
    batches = 0
    apply_ops = run.apply_ops

    def end_the_lock_session(*args: Any, **kwargs: Any) -> Any:
        nonlocal batches
        batches += 1
        if batches == 2:
            with psycopg.connect(db_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = 'contextgraph-sync' AND datname = current_database()"
                )
        return apply_ops(*args, **kwargs)

    monkeypatch.setattr(run, "apply_ops", end_the_lock_session)
    graph = ContextGraph.open(db_url, settings=Settings(batch_files=1))
    try:
        with pytest.raises(DatabaseError, match="lost its lock") as failed:
            graph.sync([vault])
        assert "sync again" in str(failed.value) and "\n" not in str(failed.value)
        assert batches == 2  # the batch that ended it committed; none after
        monkeypatch.setattr(run, "apply_ops", apply_ops)
        assert graph.sync().added == 4
        got = snapshot(graph)
    finally:
        graph.close()
    with ContextGraph.open(new_db("fresh")) as fresh:
        fresh.sync([vault])
        assert got == snapshot(fresh)


def test_a_sync_keeps_its_lock_past_the_servers_idle_session_timeout(
    db_url: str, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock's session sits idle while the sync works; a server that ends idle sessions
    must not end it (and free the lock) under a long sync."""
    import psycopg

    from contextgraph.sync import run

    write_numbered_notes(vault, 3)
    with psycopg.connect(db_url, autocommit=True) as admin:
        database = admin.execute("SELECT current_database()").fetchone()
        assert database is not None
        admin.execute(f"ALTER DATABASE \"{database[0]}\" SET idle_session_timeout = '200ms'")
    apply_ops = run.apply_ops
    free: list[bool] = []  # per batch: could another session take the sync lock?

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)  # a batch longer than the timeout
        with psycopg.connect(db_url, autocommit=True) as other:
            row = other.execute("SELECT pg_try_advisory_lock(%s)", (SYNC_LOCK_KEY,)).fetchone()
            free.append(bool(row and row[0]))
        return apply_ops(*args, **kwargs)

    monkeypatch.setattr(run, "apply_ops", slow)
    with ContextGraph.open(db_url, settings=Settings(batch_files=1)) as graph:
        assert graph.sync([vault]).added == 3
    assert free == [False, False, False]


def test_a_database_dropped_and_created_empty_under_an_open_graph_is_one_clear_line(
    db_url: str, vault: Path, write: Writer
) -> None:
    import psycopg

    write("a.md", "[[Alpha]] [[Beta]]")
    name = db_url.rsplit("/", 1)[1]
    admin_url = db_url.rsplit("/", 1)[0] + "/postgres"
    with ContextGraph.open(db_url) as graph:
        graph.sync([vault])
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        for ask in (lambda: graph.search("alpha"), lambda: graph.build_context("alpha")):
            with pytest.raises(DatabaseError, match="lost contextgraph's tables") as failed:
                ask()
            assert "\n" not in str(failed.value) and "SELECT" not in str(failed.value)
