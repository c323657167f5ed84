"""Copy a sync's WAL into the database file in a thread, while its communities compute.

In WAL mode every commit appends pages to the ``-wal`` file, and SQLite copies them back
into the database file itself. It does so in the commit that takes the WAL past
``wal_autocheckpoint`` pages, and when the last connection closes. Each copy then syncs both
files to disk. After a cold load of bench's 13,415 notes, closing the database waited
0.11-0.13 s for that copy, at the very end of the command.

A sync that changed the concept graph next computes communities. That takes 0.5 s, mostly
reading and Leiden, and it leaves the second core idle: the extraction workers are done by
then. So :func:`meanwhile` runs one ``PASSIVE`` checkpoint in a thread, on a connection of
its own, for the length of that step. It waits for no lock, and it blocks no reader or
writer. SQLite releases the GIL while it copies. Closing then copies only what the
communities wrote (0.03 s, not 0.12 s).

I also measured copying after every batch of the load. It cost more than it saved: on two
cores the copy then competes with the writer and the workers. Leaving the block waits for the
copy, so no thread outlives the step. An error of the copy (a disk error: a passive
checkpoint reports a busy database as a result, not an error) is raised there; if the step
itself failed, its own error is raised, carrying the copy's as a note. PostgreSQL, an in-memory
database and a read-only file have no WAL of ours to copy: for them, :func:`meanwhile` copies
nothing.

The thread can first run another step that needs only a connection of its own: after a cold
load, recreating the indexes and triggers the load dropped
(:func:`contextgraph.sync.coldload.restore`, 0.25 s of ``CREATE INDEX`` at bench's 13,415
notes). SQLite sorts and writes the index with the GIL released, on the second core, while the
communities read the graph and partition it; the copy follows, so it also copies the new
indexes. Without a thread of its own (in memory, read-only), that step runs before the block.

The communities write their result inside the block too: the restore ends about when the
partition does, and the copy after it took another 0.05 s, which the write had waited for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import Engine

from contextgraph.store.db import database_path, is_read_only, translate

THREAD_NAME = "checkpoint"


@contextmanager
def meanwhile(engine: Engine, first: Callable[[], None] | None = None) -> Iterator[None]:
    """Checkpoint ``engine``'s WAL in a thread while the block runs; joined when it ends.

    ``first`` runs in that thread before the copy (the copy is skipped when it fails). Its
    error, like the copy's, is raised when the block ends; when the block failed, its error is
    raised instead, with the thread's as a note.
    """
    if database_path(engine) is None or is_read_only(engine):
        if first is not None:
            first()
        yield
        return
    errors: list[BaseException] = []

    def copy() -> None:
        try:
            if first is not None:
                first()
            raw = engine.raw_connection()
            try:
                raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                raw.close()
        except BaseException as exc:  # handed to the caller's thread below
            errors.append(exc)

    thread = threading.Thread(target=copy, name=THREAD_NAME, daemon=True)
    thread.start()
    try:
        yield
    except BaseException as failed:  # the block's error goes on; the thread's rides along
        thread.join()
        for error in errors:
            failed.add_note(f"meanwhile, in the {THREAD_NAME} thread: {error}")
        raise
    thread.join()
    if errors:
        mapped = translate(engine, errors[0])
        if mapped is errors[0]:
            raise mapped
        raise mapped from errors[0]
