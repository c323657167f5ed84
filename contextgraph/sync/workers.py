"""Worker processes that never outlive the process that started them (SPEC §12).

A sync extracts files in a pool of spawned processes. If the sync is killed (SIGKILL, SIGTERM,
anything) its workers must go with it, or they would idle with parent 1 forever and keep the
multiprocessing resource tracker alive too (it exits when the last process holding its pipe
does). Each worker therefore asks the kernel to kill it when its parent dies (Linux
``prctl(PR_SET_PDEATHSIG)``) and, on every platform, runs a watchdog thread that exits the worker
once its parent pid changes — the portable way to notice being orphaned.

A worker that dies (a parser crashing on a hostile file, the OOM killer, SIGKILL) breaks the pool;
:func:`prepare_in_pool` then keeps what finished and extracts the rest in lone worker processes
that report after every file, so the one file whose extraction killed its process is known,
reported failed and skipped, and the sync goes on (SPEC §3: bad files never stop a sync). Where
worker processes cannot start at all, what is left is extracted in this process instead.

The process that writes the batches keeps a core of its own (a worker on it would slow a sync
its writes bound). Where it waits for files all the same, a helper extracts the next files the
pool has not started, so that core does not idle either (see :func:`_pool_round`); at a lower
priority, so that it takes no more of the writer's core than the writer leaves idle.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_for
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import pairwise
from multiprocessing import current_process, get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from contextgraph.sync.ingest import Job, Prepared

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
WATCH_SECONDS = 0.5
# Jobs per task of the pool (chunk_bounds): fewer, larger messages between the processes, but
# small ones at the end, where the last chunk to finish is what the writer waits for.
CHUNK, MAX_CHUNK, CHUNK_SHARE = 32, 128, 32
WORKER, HELPER = "contextgraph-worker", "contextgraph-helper"  # the pools' process names
# How much lower a helper's scheduling priority is than the sync's (``os.nice``): it is to take
# a core the writer leaves idle, not to share the writer's (see :func:`_start_worker`).
HELPER_NICENESS = 10
_STARTED = "started"  # a lone worker's first message: it got past its start-up
# What a pool's submit raises when it cannot start a worker: the pool is broken, or no process
# can start. ValueError too: in Python 3.11, a submit that spawns a worker while the pool's
# manager thread closes the queues of a pool a dead worker broke (``terminate_broken`` takes no
# lock) can pass a closed descriptor to the new process ("bad value(s) in fds_to_keep"): seen
# once in the full test suite, where every worker dies as it starts.
_SUBMIT_FAILED = (BrokenProcessPool, OSError, ValueError)


def _die_with_parent_linux() -> bool:
    """Ask the kernel for SIGKILL when the parent exits; False where prctl is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)  # orphaned: nothing of ours is left to report to
        time.sleep(WATCH_SECONDS)


def watch_parent(parent_pid: int) -> None:
    """Make this (worker) process exit when ``parent_pid`` is no longer its parent."""
    _die_with_parent_linux()
    threading.Thread(target=_watch, args=(parent_pid,), name="watch-parent", daemon=True).start()
    # The parent may have died before the death signal was armed: check once now.
    if os.getppid() != parent_pid:
        os._exit(1)


def _ignore_interrupts() -> None:
    """Leave Ctrl-C to the parent: a terminal sends SIGINT to the whole process group, and a
    worker it killed printed its traceback, or died halfway through sending a result, which
    left the pool's reader of results waiting for the rest for ever (and the sync's lock
    held). The parent stops its pool itself (:func:`_owned`), and its workers die with it.
    A worker is spawned with SIGINT blocked (:func:`_spawning`): ignored from here on, one
    that came while it started is dropped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _spawning() -> Iterator[None]:
    """Block SIGINT in this thread while it may start worker processes, which inherit the
    mask: a Ctrl-C while one starts (before :func:`_ignore_interrupts` runs in it) waits in it
    to be ignored. Here, it is delivered once the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _start_worker(parent_pid: int, name: str) -> None:
    """A pool worker's initializer: die with ``parent_pid``; ignore Ctrl-C; be called ``name``
    (what ``multiprocessing.current_process().name`` tells, in a traceback or a test); a
    helper, run at a lower priority (:data:`HELPER_NICENESS`).

    Three processes want the two cores of a small machine while a helper extracts: the writer,
    a worker and the helper. The writer, whose batches bound a large note sync, then ran at
    two thirds of a core. At a lower priority the helper still gets every core the others
    leave idle, and its chunk, soon needed in order, holds up the writer only when the writer
    waits for it, that is when a core is idle. Cold CLI syncs against the default priority
    (paired medians): the long vault of ``scripts/long_vault.py`` -0.06, +0.004 and -0.04 s
    in three runs (23 of 38 pairs faster), pydantic's tree -0.05 s (7 of 10), the four corpora
    -0.01 s (6 of 10).
    """
    _ignore_interrupts()
    watch_parent(parent_pid)
    current_process().name = name
    if name == HELPER and hasattr(os, "nice"):  # POSIX
        os.nice(HELPER_NICENESS)  # raising a process's niceness needs no privilege


def process_pool(max_workers: int, name: str = WORKER) -> ProcessPoolExecutor:
    """A spawned process pool whose workers die with this process.

    spawn, not fork: no database connection (or lock) may cross into a child process. A
    spawned pool starts a worker only when a task waits for one.
    """
    return ProcessPoolExecutor(
        max_workers=max_workers,
        mp_context=get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(), name),
    )


def started_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` (:func:`process_pool`) started now, each loading the extraction
    code (:func:`_warm_up`), for :func:`prepare_in_pool` to take over once the jobs are known.

    A spawned worker takes 0.1-0.2 s to start: begun while the sync scans, that is no longer
    time the writer waits for its first batch."""
    pool = process_pool(workers)
    with contextlib.suppress(*_SUBMIT_FAILED), _spawning():  # prepare_in_pool finds it broken
        for _ in range(workers):
            pool.submit(_warm_up)
    return pool


def _warm_up() -> None:
    """Import what extracting a note needs (the first chunk would, on the writer's time)."""
    from contextgraph.notes import wikilinks  # noqa: F401  (and the markdown parser it loads)
    from contextgraph.sync import ingest  # noqa: F401


def prepare_in_pool(
    jobs: Sequence[Job],
    workers: int,
    warn: Callable[[str], None],
    helpers: int = 0,
    pool: ProcessPoolExecutor | None = None,
    ahead: list[Future[list[Prepared]]] | None = None,
) -> Iterator[Prepared]:
    """``prepare`` each job in worker processes; the results come in job order. With
    ``helpers``, that many more workers take the jobs the pool has not started while the
    caller waits for a result (:func:`_pool_round`). ``pool``, a :func:`started_pool` of
    ``workers``, is used (and shut down) instead of a new one; ``ahead`` are its futures of
    the jobs, given to it already (:func:`submit_chunks`).

    A file whose extraction kills its worker process is reported ``failed`` and skipped; when
    worker processes cannot start, ``warn`` gets one line saying why and the rest is extracted
    in this process.
    """
    out = _Ordered(len(jobs))
    left = yield from _pool_round(jobs, workers, out, helpers, pool, ahead)
    if left:
        yield from _recover(jobs, left, workers, out, warn)


def chunk_bounds(count: int) -> list[int]:
    """Where each chunk of ``count`` jobs starts, then ``count``.

    Each chunk takes 1/:data:`CHUNK_SHARE` of the jobs not yet in a chunk, but at least
    :data:`CHUNK` and at most :data:`MAX_CHUNK` (guided self-scheduling): a sync of up to 1,024
    files gets chunks of 32, and a large one gets chunks of 128 until its last few thousand
    files, which shrink back to 32. Every chunk costs both processes a message and the writer
    a wait; a cold CLI sync of 13,415 notes in chunks of 128 took 0.09 s less than in chunks of
    32 (8 of 8 pairs), but pydantic's 531 files, whose extraction bounds their sync, took 0.5 s
    more: the last chunk, one process's work while the other had none, was four times as long.
    """
    bounds = [0]
    while bounds[-1] < count:
        left = count - bounds[-1]
        bounds.append(bounds[-1] + min(left, MAX_CHUNK, max(CHUNK, -(-left // CHUNK_SHARE))))
    return bounds


def submit_chunks(pool: ProcessPoolExecutor, jobs: Sequence[Job]) -> list[Future[list[Prepared]]]:
    """Give ``pool`` every job, in the chunks of :func:`chunk_bounds`, in order: a future per
    chunk, as far as the pool took them (a broken pool, or one that cannot start a process,
    takes no more; what is left is the caller's, :func:`_pool_round`)."""
    futures: list[Future[list[Prepared]]] = []
    bounds = chunk_bounds(len(jobs))
    try:
        with _spawning():
            for start, end in pairwise(bounds):
                futures.append(pool.submit(_prepare_chunk, list(jobs[start:end])))
    except _SUBMIT_FAILED:
        pass
    return futures


def _prepare_chunk(jobs: list[Job]) -> list[Prepared]:
    from contextgraph.sync import ingest

    return [ingest.prepare(job) for job in jobs]


class _Ordered:
    """Results that may come in any order, handed on in job order."""

    def __init__(self, size: int) -> None:
        self.results: list[Prepared | None] = [None] * size
        self.next = 0

    def put(self, index: int, prepared: Prepared) -> None:
        self.results[index] = prepared

    def ready(self) -> Iterator[Prepared]:
        results = self.results
        while self.next < len(results) and (prepared := results[self.next]) is not None:
            results[self.next] = None  # handed on: its text need not stay in memory
            self.next += 1
            yield prepared


def _pool_round(
    jobs: Sequence[Job],
    workers: int,
    out: _Ordered,
    helpers: int,
    started: ProcessPoolExecutor | None = None,
    ahead: list[Future[list[Prepared]]] | None = None,
) -> Generator[Prepared, None, list[int]]:
    """Extract in a process pool; the indexes of the jobs left unfinished by a broken pool.

    Every chunk of jobs goes to the pool at once. While the caller waits for the next chunk in
    order, each idle helper (a second pool of ``helpers`` workers, started on first need)
    takes the first chunk the pool has not started (:class:`_Helping`): a sync that its
    extraction bounds (notes that need a full markdown parse, code) gets the core its writer
    leaves idle, while one its writes bound (whose pool keeps ahead of it) never starts a
    helper. A helper holds one chunk at a time, taken while the writer waits, so it competes
    with the writer for at most that chunk; and its chunk is the next but few in order, so
    what it holds is soon handed on. ``ahead``: ``started``'s futures of the chunks, given
    to it already (:func:`submit_chunks`).
    """
    bounds = chunk_bounds(len(jobs))
    chunks = len(bounds) - 1
    with contextlib.ExitStack() as stack:
        # Its workers die with this process; leaving the block shuts it down.
        pool = stack.enter_context(_owned(started or process_pool(workers)))
        aid = stack.enter_context(_owned(process_pool(helpers, HELPER))) if helpers else None
        # Broken, or no process could start: the jobs not submitted are left below.
        futures = list(ahead) if ahead is not None else submit_chunks(pool, jobs)
        helping = _Helping(jobs, bounds, futures, aid, helpers)
        try:
            for k in range(len(futures)):  # k is used after a break
                helping.wait(k)
                try:
                    chunk = futures[k].result()
                except (BrokenProcessPool, CancelledError):  # cancelled: no helper could take it
                    break
                yield from chunk
                out.next += len(chunk)
            else:
                if len(futures) == chunks:
                    return []
                k = len(futures)
        except BaseException:  # the sync stops (its writer failed): extract no more
            for future in futures:
                future.cancel()
            raise
    left: list[int] = []
    for j in range(k, len(futures)):
        future, start, end = futures[j], bounds[j], bounds[j + 1]
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or isinstance(error, BrokenProcessPool):
            left.extend(range(start, end))
        elif error is None:
            for i, prepared in enumerate(future.result(), start=start):
                out.put(i, prepared)
        else:
            raise error  # prepare itself failed: as if it had run in this process
    left.extend(range(bounds[len(futures)], len(jobs)))  # the chunks never submitted
    return left


@contextlib.contextmanager
def _owned(pool: ProcessPoolExecutor) -> Iterator[ProcessPoolExecutor]:
    """``pool``, shut down at the end: waiting for its workers when all went well; else (the
    sync failed or was interrupted, or stopped reading) not: the chunks not started are
    cancelled, and the workers end once their chunk is sent. Not killed: one killed while it
    sent a result would leave the pool's reader of results waiting for the rest of it (the
    parent holds the pipe's other end too), and the interpreter's exit waits for that reader."""
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class _Helping:
    """Helper workers that take the pool's unstarted chunks while the writer waits."""

    def __init__(
        self,
        jobs: Sequence[Job],
        bounds: list[int],
        futures: list[Future[list[Prepared]]],
        aid: ProcessPoolExecutor | None,
        helpers: int,
    ) -> None:
        self.jobs, self.bounds, self.futures = jobs, bounds, futures
        self.aid, self.helpers = aid, helpers
        self.running: list[Future[list[Prepared]]] = []  # the helpers' chunks not done yet
        self.scanned = 0  # the chunks before it are a helper's, started or done: none to take
        self.start_up = 0.0  # how long the writer waited for the first chunk
        self.waited = 0.0  # how long it has waited for the others

    def wait(self, k: int) -> None:
        """Wait until chunk ``k`` is done, handing chunks after it to idle helpers meanwhile.

        Helpers start only once the writer has waited for the later chunks as long as it
        waited for the first. Every sync waits while its workers start and fill its first
        batch; one its writes bound waits little more (its pool keeps ahead of it), and a
        helper started there cost bench's vault 0.04-0.1 s. One its extraction bounds gets
        there within a few batches (three copies of the real corpora), or within its one batch
        (pydantic's tree)."""
        futures = self.futures
        if futures[k].done():
            return
        began = time.perf_counter()
        while self.aid is not None and k and self.waited > self.start_up and not futures[k].done():
            self.running = [f for f in self.running if not f.done()]
            if len(self.running) < self.helpers and self._take(k + 1):
                continue
            wait_for([futures[k], *self.running], return_when=FIRST_COMPLETED)
        wait_for([futures[k]])
        if k:
            self.waited += time.perf_counter() - began
        else:
            self.start_up = time.perf_counter() - began

    def _take(self, first: int) -> bool:
        """Move the first chunk from ``first`` on that the pool has not started to a helper."""
        assert self.aid is not None, "only a round with helpers takes chunks"
        futures = self.futures
        for j in range(max(first, self.scanned), len(futures)):
            self.scanned = j + 1
            if not futures[j].cancel():
                continue  # started (or done) in the pool: for good
            try:
                with _spawning():
                    part = list(self.jobs[self.bounds[j] : self.bounds[j + 1]])
                    futures[j] = self.aid.submit(_prepare_chunk, part)
            except _SUBMIT_FAILED:
                self.aid = None  # no helper can run: the chunk is left for _recover
                return False
            self.running.append(futures[j])
            return True
        return False


@dataclass
class _Lone:
    """A worker process of its own for ``todo`` (job indexes); it sends each result at once."""

    process: BaseProcess
    conn: Connection
    todo: list[int]
    started: bool = False


def _serve(conn: Connection, parent_pid: int) -> None:
    """A lone worker's body: ``_STARTED``, then its jobs come, then each one's result (or the
    error ``prepare`` raised)."""
    _ignore_interrupts()
    watch_parent(parent_pid)
    from contextgraph.sync import ingest

    conn.send(_STARTED)
    jobs: list[Job] = conn.recv()
    for job in jobs:
        try:
            prepared = ingest.prepare(job)
        except Exception as exc:  # handed to the parent, which raises it as a pool would
            conn.send(exc)
            return
        conn.send(prepared)
    conn.close()


def _start(jobs: Sequence[Job], todo: list[int]) -> _Lone:
    """Start a lone worker for ``todo``.

    Its jobs go through the pipe once it runs, not as arguments of the process: those are
    written to the child while the parent still holds the pipe's other end too, so a child that
    dies before it read them all (a main script that fails in it) would block that write for
    ever.
    """
    ctx = get_context("spawn")
    mine, theirs = ctx.Pipe()
    process = ctx.Process(target=_serve, args=(theirs, os.getpid()), daemon=True)
    try:
        with _spawning():
            process.start()
    finally:
        theirs.close()  # the child holds the only other end: its death reads as EOF here
    with contextlib.suppress(OSError):  # it is gone already: ``_take`` reads that and why
        mine.send([jobs[i] for i in todo])
    return _Lone(process, mine, todo)


def _ended(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def _split(left: list[int], parts: int) -> list[list[int]]:
    size = -(-len(left) // parts)
    return [left[i : i + size] for i in range(0, len(left), size)]


def _take(lone: _Lone, jobs: Sequence[Job], out: _Ordered, queue: deque[list[int]]) -> bool:
    """Take one message of ``lone``; False once it is gone (with a ``todo`` left only if it
    died before its start-up).

    A worker that dies after its start-up was killed by the file it was extracting: that file
    is failed, and the jobs after it go back to ``queue``, first.
    """
    from contextgraph.sync.ingest import Prepared

    try:
        message = lone.conn.recv()
    except (EOFError, OSError):  # the process is gone: nothing of it is left to read
        lone.conn.close()
        lone.process.join()
        if lone.todo and lone.started:
            index, *rest = lone.todo
            job = jobs[index]
            reason = f"its extraction killed the worker process ({_ended(lone.process.exitcode)})"
            out.put(index, Prepared(job.path, job.kind, "failed", reason))
            if rest:
                queue.appendleft(rest)
            lone.todo = []
        return False
    if isinstance(message, BaseException):
        raise message  # prepare itself failed: as if it had run in this process
    if isinstance(message, str):
        lone.started = True
    else:
        out.put(lone.todo.pop(0), message)
    return True


def _recover(
    jobs: Sequence[Job],
    left: list[int],
    workers: int,
    out: _Ordered,
    warn: Callable[[str], None],
) -> Iterator[Prepared]:
    """Extract ``left`` (what a broken pool did not finish) in lone worker processes.

    Each lone worker reports after every file, so when one dies the file it was extracting is
    known: that file is reported failed (it killed a process that ran it alone, after a pool
    that had it broke) and a fresh worker goes on after it. At most ``workers`` run at once,
    and only one until a first one got past its start-up: a worker that dies before that
    means none can start, and the rest is extracted in this process.
    """
    queue = deque(_split(left, workers))
    running: dict[Connection, _Lone] = {}
    started = False  # whether some lone worker got past its start-up
    failure: str | None = None  # why no worker process can be used
    try:
        while failure is None and (queue or running):
            while queue and len(running) < (workers if started else 1):
                todo = queue.popleft()
                try:
                    lone = _start(jobs, todo)
                except OSError as exc:
                    queue.appendleft(todo)
                    failure = f"a worker process could not be started ({exc})"
                    break
                running[lone.conn] = lone
            for ready in wait(list(running)) if failure is None else ():
                lone = running[cast(Connection, ready)]
                if not _take(lone, jobs, out, queue):
                    del running[lone.conn]
                    if lone.todo:  # it ended before it sent its first message
                        queue.appendleft(lone.todo)
                        ended = _ended(lone.process.exitcode)
                        failure = f"a worker process ended while starting ({ended})"
                        break
                started = started or lone.started
            yield from out.ready()
    finally:
        for lone in running.values():
            queue.appendleft(lone.todo)
            lone.process.kill()
            lone.process.join()
            lone.conn.close()
    if failure is None:
        return
    rest = sorted(i for todo in queue for i in todo)
    warn(
        f"worker processes could not be used: {failure}; the remaining {len(rest)} files were "
        "extracted in this process (a script whose top level calls contextgraph must guard "
        'that code with `if __name__ == "__main__":`)'
    )
    from contextgraph.sync import ingest

    for i in rest:
        out.put(i, ingest.prepare(jobs[i]))
        yield from out.ready()


__all__ = ["prepare_in_pool", "process_pool", "submit_chunks", "watch_parent"]
