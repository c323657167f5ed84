"""A sync that would change nothing, answered without SQLAlchemy: the report, or None.

A hook or a script that syncs after every edit mostly finds nothing to do, and such a run spent
most of its time importing (SQLAlchemy alone is 0.2-0.4 s, several times the scan and the
comparison). Before the CLI loads, the entry point (:mod:`contextgraph.__main__`) asks
:func:`unchanged_report`, which does what the full sync would do up to where it would begin to
write, with the standard library's ``sqlite3``, and returns the report the full sync would
have; the entry point prints it as ``contextgraph sync`` does. It answers only when it can tell
that the full sync would write nothing:

- the command line is ``sync`` with ``--db``, ``--json``, ``--no-wait`` and folder paths only
  (:func:`contextgraph.launch.plain_sync`), each path a folder already registered;
- the database is an existing, writable SQLite file in WAL mode at the current schema revision,
  with no derived state marked stale (a cold load, a code graph, the communities) and the
  precomputed weight lists off (``CONTEXTGRAPH_WEIGHTS_MIN_NOTES`` 0);
- no other sync holds the database's sync lock (else the full sync waits, or says so);
- every chosen source's files were stored under this run's extraction key
  (:meth:`contextgraph.settings.Settings.extraction_key`, meta ``extracted:<id>``);
- every chosen source's folder is there, no stored file is gone or changed in size, mtime or
  kind, and every file the store lacks is one the sync would report as failed (a binary file, one
  too large: a failed file is not stored, so every sync reads it again and reports it again).

Anything else returns None and the CLI runs the sync itself, exactly as before, so the answer is
always the full sync's (an error met here, a database the driver cannot read, is met there again
and reported). With ``hand_over_to_sync`` (the entry point, which runs that sync next), a check
that found work to do walks the rest of the chosen folders too, keeps the sync lock held and
leaves it, with the folders it walked and the stored files it read, to that sync
(:func:`contextgraph.sync.lock.hand_over`): no other sync can run between the two, and the full
sync does neither again (syncing one edited note of 12,411: 0.63 → 0.53 s).

``CONTEXTGRAPH_FULL_SYNC=1`` turns this off (every sync runs in full: to compare, or to time).
The SQL is the driver-level text of Core statements defined beside the full sync's (named in
:data:`SQL`); tests/test_unchanged_sync.py compiles those and checks the copies are equal. The
report's ``seconds`` are this run's: ``files`` is the time spent reading the files the store
lacks, ``communities`` the check that nothing derived is stale, and ``codegraph`` and
``weights`` 0 (nothing to check beyond that).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from contextgraph.errors import ContextGraphError, SyncInProgress
from contextgraph.settings import Settings
from contextgraph.store import nowrite
from contextgraph.store.head import SCHEMA_HEAD
from contextgraph.store.peek import in_wal_mode, read_only_uri
from contextgraph.sync.lock import database_files, hand_over, lock_file
from contextgraph.sync.report import Problem, SyncReport
from contextgraph.sync.scan import ScannedFile, ScanResult, scan

TYPE_CHECKING = False  # typing itself costs a light CLI run 20 ms; mypy honours the name
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from contextgraph.sync.ingest import Job
    from contextgraph.sync.lock import Walk

OPT_OUT = "CONTEXTGRAPH_FULL_SYNC"
# At most this many files the store lacks are read here to see that they fail; more, and the
# full sync reads them (in its worker pool, with its progress bar).
MAX_READS = 20

# name -> (SQLite text, constant parameters) of the Core statement it copies:
SQL: dict[str, tuple[str, dict[str, Any]]] = {
    # contextgraph.store.db.current_revision
    "revision": ("SELECT alembic_version.version_num \nFROM alembic_version", {}),
    # contextgraph.store.sources._SOURCE_ROWS
    "sources": ("SELECT sources.id, sources.name, sources.root \nFROM sources", {}),
    # contextgraph.store.meta._get_statement (meta.get)
    "meta_value": ('SELECT meta.value \nFROM meta \nWHERE meta."key" = :key', {"key": None}),
    # contextgraph.store.meta.stale_marks_statement
    "stale_marks": (
        'SELECT meta."key" \nFROM meta \nWHERE (meta."key" LIKE :key_1 || \'%\') '
        'ORDER BY meta."key"',
        {"key_1": "stale:"},
    ),
    # contextgraph.sync.apply._source_files_query
    "files": (
        "SELECT files.id, files.path, files.kind, files.size, files.mtime_ns, files.hash "
        "\nFROM files \nWHERE files.source_id = :source",
        {"source": None},
    ),
    # contextgraph.graph.stats._COUNTS, each by its name there
    "entities_by_kind": (
        "SELECT entities.kind, count(*) AS count_1 \nFROM entities GROUP BY entities.kind "
        "ORDER BY entities.kind",
        {},
    ),
    "relations_by_type": (
        "SELECT relations.type, count(*) AS count_1 \nFROM relations GROUP BY relations.type "
        "ORDER BY relations.type",
        {},
    ),
    "latest_run": (
        "SELECT community_runs.community_count, community_runs.modularity, "
        "community_runs.algorithm \nFROM community_runs ORDER BY community_runs.id DESC\n "
        "LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
    ),
    "concept_relations": ("SELECT count(*) AS count_1 \nFROM concept_relations", {}),
}


class _Changed(Exception):
    """The full sync has work to do: leave the answer to it."""


def unchanged_report(
    db_path: Path,
    paths: Sequence[str] = (),
    settings: Settings | None = None,
    *,
    hand_over_to_sync: bool = False,
) -> SyncReport | None:
    """The report of syncing ``paths`` (every source when none) of the SQLite database file
    ``db_path`` (a resolved path), when that sync would change nothing; else None.

    ``hand_over_to_sync``: when there is work to do, leave the sync lock and the walks made so
    far to the sync this process runs next (the caller must run it, or call
    :func:`contextgraph.sync.lock.drop_handed`)."""
    if os.environ.get(OPT_OUT, "").strip() not in ("", "0"):
        return None
    if settings is None:
        try:
            settings = Settings.from_env()
        except ContextGraphError:
            return None  # the full run reports the bad setting
    if settings.weights_min_notes > 0 or not _writable_file(db_path) or not _ours(db_path):
        return None
    started = time.perf_counter()
    report = SyncReport()
    scans: dict[tuple[int, str], Walk] = {}
    try:
        fd = lock_file(db_path, wait=False)
    except (SyncInProgress, OSError):
        return None  # the full run waits for a running sync (or says so), or reports the error
    try:
        report.phases["lock"] = time.perf_counter() - started
        _sync(db_path, settings, list(paths), report, scans, walk_all=hand_over_to_sync)
    except _Changed:
        if hand_over_to_sync and scans:
            hand_over(fd, database_files(db_path), scans)
            fd = -1  # held on for the sync that runs next
        return None  # the full run redoes the rest
    except (sqlite3.Error, OSError, RuntimeError):  # RuntimeError: ``~nobody`` (expanduser)
        return None  # the full run meets the error again and reports it
    finally:
        if fd >= 0:
            os.close(fd)  # releases the lock
    report.phases["total"] = time.perf_counter() - started
    return report


def may_read_refusing(jobs: Sequence[Job], existing: Mapping[str, object]) -> bool:
    """Whether a sync that refuses every write (a resident server's) may still read ``jobs``.

    It may when they are a few files the store lacks (at most
    :data:`MAX_READS`, as :func:`unchanged_report` reads):
    a note that fails at every sync (a binary ``.md``) is never stored, so every sync reads it
    again and writes nothing for it. Any that would be stored stops the sync at its write.
    """
    return nowrite.active() and len(jobs) <= MAX_READS and all(j.path not in existing for j in jobs)


def _writable_file(path: Path) -> bool:
    """An existing database file the full sync would open for writing (else it creates one, or
    opens it read-only and refuses the sync)."""
    try:
        return path.is_file() and os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    except OSError:
        return False  # a name the OS refuses (too long): the full run says so


def _ours(db_path: Path) -> bool:
    """Whether ``db_path`` is a contextgraph database at the head revision, in WAL mode: the
    only kind this check syncs. Asked before its lock file is made and before any read-write
    connection opens the file: such a connection would copy another program's ``-wal`` into
    its file when it closed (store.ownership says why). A file that is not an SQLite database
    in WAL mode is not even opened (:mod:`contextgraph.store.peek`)."""
    if not in_wal_mode(db_path):
        return False  # not a database in WAL mode: the full run switches it, or refuses it
    try:
        conn = sqlite3.connect(read_only_uri(db_path), uri=True, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        return _rows(conn, "revision") == [(SCHEMA_HEAD,)]
    except sqlite3.Error:
        return False  # not ours: the full run says why
    finally:
        conn.close()


def _rows(conn: sqlite3.Connection, name: str, **values: Any) -> list[tuple[Any, ...]]:
    text, constants = SQL[name]
    return conn.execute(text, {**constants, **values}).fetchall()


def _sync(
    db_path: Path,
    settings: Settings,
    paths: list[str],
    report: SyncReport,
    scans: dict[tuple[int, str], Walk],
    walk_all: bool = False,
) -> None:
    """Fill ``report`` as the full sync would, or raise :class:`_Changed`; each source's
    walk goes to ``scans``. ``walk_all``: once a source has work to do, still walk the others
    (for the sync that takes the walks over) before raising."""
    quoted = str(db_path).replace("%", "%25").replace("?", "%3F").replace("#", "%23")
    conn = sqlite3.connect(
        f"file:{quoted}?mode=rw",
        uri=True,
        timeout=settings.busy_timeout_ms / 1000,
        isolation_level=None,
    )
    try:
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            raise _Changed  # the full open switches it
        conn.execute("BEGIN")  # one snapshot for every read below
        if _rows(conn, "revision") != [(SCHEMA_HEAD,)]:
            raise _Changed  # the full open migrates (or refuses)
        registered = sorted(_rows(conn, "sources"), key=lambda row: row[1])
        changed = False
        for source_id, name, root in _chosen(registered, paths):
            folder = Path(root)
            if changed:  # the full sync's walks, made here for it to take over
                if folder.is_dir():
                    _walk(conn, db_path, source_id, folder, scans)
                continue
            try:
                _sync_source(conn, settings, db_path, (source_id, name, folder), report, scans)
            except _Changed:
                if not walk_all:
                    raise
                changed = True
        if changed:
            raise _Changed
        t = time.perf_counter()
        if _rows(conn, "stale_marks"):
            raise _Changed  # a cold load to finish, a code graph or the communities to recompute
        report.phases["codegraph"] = 0.0
        report.phases["communities"] = time.perf_counter() - t
        report.phases["weights"] = 0.0
        _count(conn, report)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _chosen(registered: list[tuple[int, str, str]], paths: list[str]) -> list[tuple[int, str, str]]:
    """The sources a sync of ``paths`` syncs, in name order: every one when no path is given."""
    if not registered:
        raise _Changed  # the CLI says there is nothing to sync
    if not paths:
        return registered
    names = set()
    for raw in paths:
        folder = Path(raw).expanduser()
        if not raw.strip() or not folder.is_dir():
            raise _Changed  # the CLI refuses it, with its message
        resolved = folder.resolve()
        match = [name for _, name, root in registered if Path(root) == resolved]
        if not match:
            raise _Changed  # a new folder to register (or to refuse)
        names.add(match[0])
    return [row for row in registered if row[1] in names]


def _sync_source(
    conn: sqlite3.Connection,
    settings: Settings,
    db_path: Path,
    source: tuple[int, str, Path],
    report: SyncReport,
    scans: dict[tuple[int, str], Walk],
) -> None:
    """Scan one source and compare it with the store, as ``sync.run._plan`` does."""
    source_id, name, root = source
    t = time.perf_counter()
    report.sources.append(name)
    if not root.is_dir():
        raise _Changed  # the full sync reports the missing folder and exits 1
    key = f"extracted:{source_id}"  # meta.extracted
    if _rows(conn, "meta_value", key=key) != [(settings.extraction_key(),)]:
        raise _Changed  # stored under another extraction key: every file is read again
    scanned, rows = _walk(conn, db_path, source_id, root, scans)
    linked = bool(_rows(conn, "meta_value", key=f"linked:{source_id}"))  # meta.linked
    if scanned.linked != linked:
        raise _Changed  # the full sync records it
    for rel, reason in scanned.problems:
        report.failed.append(Problem(name, rel, reason))
    report.scanned += len(scanned.files)
    stored = {rel: (kind, size, mtime_ns) for _, rel, kind, size, mtime_ns, _ in rows}
    report.phases["scan"] = report.phases.get("scan", 0.0) + time.perf_counter() - t
    t = time.perf_counter()
    new: list[ScannedFile] = []
    for f in scanned.files:
        old = stored.pop(f.path, None)
        if old is None:
            new.append(f)
        elif old != (f.kind, f.size, f.mtime_ns):
            raise _Changed  # a changed file to read (or a same one to restamp)
    if stored or len(new) > MAX_READS:
        raise _Changed  # files gone, or many new ones
    report.unchanged += len(scanned.files) - len(new)
    if new:
        _read_failing(new, settings, name, report)
    report.phases["files"] = report.phases.get("files", 0.0) + time.perf_counter() - t


def _walk(
    conn: sqlite3.Connection,
    db_path: Path,
    source_id: int,
    root: Path,
    scans: dict[tuple[int, str], Walk],
) -> tuple[ScanResult, list[tuple[Any, ...]]]:
    """Walk a source's folder and read its stored files, as ``sync.run._plan`` does; both, with
    the seconds they took, go to ``scans``."""
    t = time.perf_counter()
    scanned = scan(root, exclude=database_files(db_path))
    rows = _rows(conn, "files", source=source_id)
    scans[source_id, str(root)] = (scanned, time.perf_counter() - t, rows)
    return scanned, rows


def _read_failing(
    files: list[ScannedFile], settings: Settings, source: str, report: SyncReport
) -> None:
    """Read the files the store lacks, as the full sync would; each must fail there too."""
    from contextgraph.sync.ingest import Job, prepare

    for f in files:
        limits = (settings.max_file_bytes, None, settings.max_concept_length)
        prepared = prepare(Job(f.path, f.abspath, f.kind, None, *limits))
        if prepared.status != "failed":
            raise _Changed  # a new file to store
        report.warnings.extend(Problem(source, f.path, w) for w in prepared.warnings)
        report.dropped_links += prepared.dropped
        report.failed.append(Problem(source, f.path, prepared.reason or "failed"))


def _count(conn: sqlite3.Connection, report: SyncReport) -> None:
    """The totals a sync reports (``contextgraph.graph.stats.counts``, files left out)."""
    entities = dict(_rows(conn, "entities_by_kind"))
    report.concepts = int(entities.get("concept", 0))
    report.entities = sum(int(n) for n in entities.values())
    report.relations = int(_rows(conn, "concept_relations")[0][0])
    report.code_relations = sum(int(n) for _, n in _rows(conn, "relations_by_type"))
    for count, modularity, _ in _rows(conn, "latest_run"):
        report.communities, report.modularity = int(count), float(modularity)


__all__ = ["MAX_READS", "OPT_OUT", "SQL", "may_read_refusing", "unchanged_report"]
