"""The resident server: one process that answers the CLI's queries on one database.

``contextgraph resident`` runs :meth:`Resident.serve` in the foreground until it is stopped. A
CLI run whose command it serves (:data:`contextgraph.launch.FORWARDED`) connects to its socket
and sends its arguments, working directory, environment and output encodings; the server runs
the same click command line in-process with those, captures what it prints, and sends back the
output and the exit status (:func:`contextgraph.launch.forward` prints them).

- **A sync only while it changes nothing** (:data:`contextgraph.launch.UNCHANGED_ONLY`): it runs
  refusing every write (:mod:`contextgraph.store.nowrite`), and one that stops where it would
  begin to write or to read files is handed back to its client, which runs it itself.
- **Exact answers.** The command line is parsed and run by the same code, under the client's
  working directory and environment (``CONTEXTGRAPH_NOW``, every setting), and the server
  refuses (the client then runs the command itself) when its code is not the client's
  (:func:`contextgraph.launch.fingerprint`). The database stays open between requests, and
  every answer reads what is committed when it starts, as a fresh process would; the library's
  caches follow the graph's version. The database is opened again when its file was replaced or
  removed, or its schema moved off this code's head (another process migrated or reverted it).
- **One request at a time**, in arrival order: a command runs with the process's working
  directory, environment and standard streams set to the client's, so two cannot overlap.
  Clients wait in the listen queue.
- **Private.** The socket lives in a folder only this user may enter (``$XDG_RUNTIME_DIR``, else
  the temp folder: :func:`contextgraph.launch.socket_folder`), is itself ``0600``, and on Linux a
  peer of another user is refused by its credentials. One server a database: a lock file beside
  the socket is held while it serves; a socket left by a server that died is replaced.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

from contextgraph import launch
from contextgraph.api import ContextGraph
from contextgraph.errors import (
    Conflict,
    ContextGraphError,
    CorruptDatabase,
    DatabaseError,
    InvalidArgument,
)
from contextgraph.settings import Settings
from contextgraph.store import db

log = logging.getLogger(__name__)

KEPT_GRAPHS = 4  # open graphs kept, one per distinct settings a client ran with
# One request at a time: a client that connects and sends nothing, or stops reading its answer
# (suspended with Ctrl-Z), holds every other one up, so each is dropped after this long without
# progress (a client sends its request as soon as it connects, and reads its answer whole).
REQUEST_READ_SECONDS = 2.0
ANSWER_SEND_SECONDS = 5.0
_ACCEPT_POLL_SECONDS = 0.25  # how often the accept loop looks at its stop event


class Resident:
    """Serve CLI queries on ``database`` from this process (see the module docstring)."""

    def __init__(self, database: str, *, settings: Settings | None = None) -> None:
        key = launch.database_key(database)
        if key is None:
            raise InvalidArgument("a resident server needs a database file or URL, not :memory:")
        if not hasattr(socket, "AF_UNIX"):
            raise InvalidArgument("a resident server needs Unix sockets, which this system lacks")
        self.key = key
        self.socket_path = launch.socket_path(key)
        if len(self.socket_path) > launch.SOCKET_PATH_LIMIT:
            raise InvalidArgument(
                f"the socket path {self.socket_path!r} is too long for a Unix socket: "
                "point $XDG_RUNTIME_DIR at a shorter folder"
            )
        self.fingerprint = launch.fingerprint()
        self.served = 0  # requests answered (tests and the log read it)
        self._graphs: dict[Settings, ContextGraph] = {}
        self._identity: _Identity | None = None
        # Opened now, so a missing or foreign database fails the start, not the first query.
        _warm(self._graph_for(settings or Settings.from_env()))

    def serve(
        self, stop: threading.Event, *, on_ready: Callable[[str], None] | None = None
    ) -> None:
        """Answer requests until ``stop`` is set; the socket is removed when it returns."""
        import fcntl  # POSIX only, as Unix sockets are (checked when the server was made)

        folder = launch.socket_folder()
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not launch.folder_is_private(folder):
            raise InvalidArgument(
                f"{folder} must be a folder of this user's that only they may enter (mode 0700)"
            )
        with open(self.socket_path + ".lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise Conflict(
                    f"a resident server already serves {self.key} (socket {self.socket_path})"
                ) from None
            if os.path.lexists(self.socket_path):  # left by a server that died: we hold the lock
                os.unlink(self.socket_path)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(self.socket_path)
                os.chmod(self.socket_path, 0o600)
                listener.listen(64)
                listener.settimeout(_ACCEPT_POLL_SECONDS)
                # Each request runs in its client's folder, then comes back here: a folder that
                # cannot be removed from under the server (every path it holds is absolute).
                os.chdir("/")
                if on_ready is not None:
                    on_ready(self.socket_path)
                self._accept_until(listener, stop)
            finally:
                listener.close()
                if os.path.lexists(self.socket_path):
                    os.unlink(self.socket_path)

    def close(self) -> None:
        for graph in self._graphs.values():
            graph.close()
        self._graphs.clear()

    def _accept_until(self, listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    self._answer(conn)
                except OSError as exc:  # the client went away: its answer is nobody's
                    log.debug("a client left before its answer: %s", exc)

    def _answer(self, conn: socket.socket) -> None:
        if not _same_user(conn):
            log.warning("refused a connection from another user")
            return
        conn.settimeout(REQUEST_READ_SECONDS)
        with conn.makefile("rb") as reader:
            try:
                header, _ = launch.receive_message(reader, launch.MAX_REQUEST_BYTES)
                request = _Request.from_header(header)
            except (ConnectionError, ValueError, TypeError, RecursionError) as exc:
                log.warning("ignored a malformed request: %s", exc)
                return
        conn.settimeout(ANSWER_SEND_SECONDS)
        if request.fingerprint != self.fingerprint:
            log.warning("a client runs other code than this server: restart the server")
            launch.send_message(conn, {"status": "stale"})
            return
        parsed = launch.command_and_database(request.argv)
        if parsed is None or parsed[0] not in launch.FORWARDED:
            launch.send_message(conn, {"status": "refused"})
            return
        try:
            answer = self._run(request, unchanged_only=parsed[0] in launch.UNCHANGED_ONLY)
        except (OSError, LookupError, ValueError) as exc:
            # Its cwd is gone, an unknown encoding, a variable no environment can hold: the
            # client runs the command itself (and meets the same trouble in its own way).
            log.debug("left a request to its client: %s", exc)
            answer = None
        if answer is None:
            launch.send_message(conn, {"status": "refused"})
            return
        code, writes = answer
        self.served += 1
        streams = [which for which, _ in writes]  # 1 stdout, 2 stderr, in the order written
        payloads = [data for _, data in writes]
        launch.send_message(conn, {"status": "done", "exit": code, "streams": streams}, *payloads)

    def _run(
        self, request: _Request, *, unchanged_only: bool
    ) -> tuple[int, list[tuple[int, bytes]]] | None:
        """Run the request's command line here, as its client would have: its exit status, and
        what it wrote, as (1 for stdout or 2 for stderr, bytes) in the order written (a client
        whose two streams go to one terminal or file shows them interleaved as they came).

        ``unchanged_only`` (a sync): every write is refused, and None (the client runs the
        command itself) when the command stopped where it would have begun one.
        """
        from contextgraph.cli import base, cli
        from contextgraph.store import nowrite

        writes: list[tuple[int, bytes]] = []
        stdout = io.TextIOWrapper(_Tape(writes, 1), *request.stdout, write_through=True)
        stderr = io.TextIOWrapper(_Tape(writes, 2), *request.stderr, write_through=True)
        saved_cwd, saved_environ = os.getcwd(), dict(os.environ)
        saved_streams = sys.stdout, sys.stderr
        os.chdir(request.cwd)
        try:
            os.environ.clear()
            os.environ.update(request.environ)
            sys.stdout, sys.stderr = stdout, stderr
            base.graph_provider = self._provided
            with nowrite.refusing() if unchanged_only else nullcontext() as refusal:
                code = _exit_status(cli, request.argv)
            if refusal is not None and refusal.stopped is not None:
                log.debug("handed a command back: it would %s", refusal.stopped)
                return None
        finally:
            base.graph_provider = None
            sys.stdout, sys.stderr = saved_streams
            os.environ.clear()
            os.environ.update(saved_environ)
            os.chdir(saved_cwd)
        stdout.flush()
        stderr.flush()
        return code, writes

    @contextmanager
    def _provided(self, database: str, settings: Settings) -> Iterator[ContextGraph]:
        """``open_graph`` in a served command: this database stays open, any other does not."""
        if launch.database_key(database) != self.key:
            with ContextGraph.open(database, settings=settings, create=False) as other:
                yield other
            return
        graph = self._graph_for(settings)
        try:
            yield graph
        except (CorruptDatabase, DatabaseError):
            self._drop(settings)  # the file may have been rewritten in place: open it anew
            raise
        except ContextGraphError:
            raise  # a refusal (unknown note, bad argument): the graph is as good as before
        except BaseException:
            self._drop(settings)  # anything else may have left its connection pool unwell
            raise

    def _graph_for(self, settings: Settings) -> ContextGraph:
        identity = self._file_identity()
        if _another_database(self._identity, identity):
            self.close()
        self._identity = identity
        graph = self._graphs.get(settings)
        if graph is not None and db.current_revision(graph.engine) != db.SCHEMA_HEAD:
            self._drop(settings)  # migrated or reverted by another process: open it anew
            graph = None
        if graph is None:  # by its key: a relative path was the server's, not the client's
            graph = ContextGraph.open(self.key, settings=settings, create=False)
            if len(self._graphs) >= KEPT_GRAPHS:
                self._drop(next(iter(self._graphs)))
            self._graphs[settings] = graph
        return graph

    def _drop(self, settings: Settings) -> None:
        graph = self._graphs.pop(settings, None)
        if graph is not None:
            graph.close()

    def _file_identity(self) -> _Identity | None:
        if "://" in self.key:
            return None
        try:
            st = os.stat(self.key)
        except OSError:
            return None
        try:
            log_st = os.stat(self.key + "-wal")
            log: tuple[int, int] | None = (log_st.st_size, log_st.st_mtime_ns)
        except OSError:
            log = None
        writable = db.opens_writable(Path(self.key))
        return _Identity((st.st_dev, st.st_ino, writable), (st.st_size, st.st_mtime_ns), log)


class _Identity(NamedTuple):
    """What tells the database file the server has open from another one at the same path."""

    file: tuple[int, int, bool]  # device, inode, and whether it opens for writing
    content: tuple[int, int]  # the file's size and modification time
    log: tuple[int, int] | None  # the same of its -wal, if any


def _another_database(before: _Identity | None, now: _Identity | None) -> bool:
    """Whether what is open is no longer the file at the path: replaced or removed, made
    read-only or writable (``chmod``), or rewritten in place (``cp backup.db graph.db``: the
    file changed while its -wal did not, which no SQLite writer does, since a checkpoint
    copies what a commit wrote to the -wal first). A change it misjudges costs a reopen."""
    if before is None or now is None:
        return before != now
    if before.file != now.file:
        return True
    return before.content != now.content and before.log == now.log


class _Tape(io.BufferedIOBase):
    """A stream's bytes, appended to ``writes`` tagged ``which`` (consecutive ones merged)."""

    def __init__(self, writes: list[tuple[int, bytes]], which: int) -> None:
        super().__init__()
        self.writes, self.which = writes, which

    @property
    def name(self) -> str:
        return f"<the client's {'stdout' if self.which == 1 else 'stderr'}>"

    def writable(self) -> bool:
        return True

    def write(self, data: Any, /) -> int:
        chunk = bytes(data)
        if chunk:
            if self.writes and self.writes[-1][0] == self.which:
                self.writes[-1] = (self.which, self.writes[-1][1] + chunk)
            else:
                self.writes.append((self.which, chunk))
        return len(chunk)


class _Request:
    """A client's request, its fields checked."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.argv: list[str] = header["argv"]
        self.cwd: str = header["cwd"]
        self.environ: dict[str, str] = header["environ"]
        self.fingerprint: str = header["fingerprint"]
        self.stdout: tuple[str, str] = tuple(header["stdout"])
        self.stderr: tuple[str, str] = tuple(header["stderr"])

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> _Request:
        def strings(value: Any) -> bool:
            return isinstance(value, list) and all(isinstance(v, str) for v in value)

        environ = header.get("environ")
        valid = (
            strings(header.get("argv"))
            and isinstance(header.get("cwd"), str)
            and isinstance(header.get("fingerprint"), str)
            and isinstance(environ, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in environ.items())
            and all(strings(header.get(s)) and len(header[s]) == 2 for s in ("stdout", "stderr"))
        )
        if not valid:
            raise ValueError("a request lacks a field or has one of the wrong type")
        return cls(header)


def _warm(graph: ContextGraph) -> None:
    """Ask each kind of query once, before any client does.

    A process's first query of a kind pays for compiling its statements and for reading the
    database's pages from disk: on bench.py's 13,415-note vault a median concept's first
    ``context`` through a new server took twice its later ones. The concept asked about is the
    first member of the largest community (none on an empty graph: stats only). Only reads:
    ``read``, which records, is not asked.
    """
    graph.stats()
    listing = graph.communities()
    name = next((c.members[0] for c in listing.communities if c.members), None)
    if name is None:
        return
    graph.build_context(name)
    graph.expand([name])
    graph.search(name)
    graph.retrieve(name)
    graph.visualize(name)


def _exit_status(cli: Any, argv: list[str]) -> int:
    """Run the click group as ``contextgraph ARGV`` would, and return its exit status."""
    try:
        cli.main(argv, prog_name="contextgraph", standalone_mode=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # what the interpreter does with sys.exit("text")
        return 1
    return 0


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer runs as this user (always true where credentials cannot be read)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True  # the folder's mode already keeps other users out
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, 12))
    return bool(uid == os.getuid())
