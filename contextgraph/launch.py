"""Hand a CLI query to a resident server: the first thing every ``contextgraph`` run tries.

A CLI process spends most of its life importing (SQLAlchemy alone is 0.2-0.4 s) before it runs a
query of a few milliseconds. ``contextgraph resident`` is a long-running process that has paid
for the imports once and keeps its database open; while one runs for a database, a query on
that database, or a sync that turns out to change nothing (:data:`FORWARDED`), is sent to it
over a Unix socket and this process, having imported almost nothing, prints what the server's
run of the same command line printed and exits with its status. The server runs the command
with this process's arguments, working directory and environment, so the answer is the one
this process would have given.

Anything else runs here, exactly as without a server: other commands, ``--help`` and
``--version``, no server (or a socket left by one that died), a server running other code than
this process (after an upgrade or an edit: :func:`fingerprint`), a platform without Unix
sockets, or ``CONTEXTGRAPH_NO_RESIDENT=1``. A server that goes away mid-answer is also answered
here: the forwarded commands are queries, so running one again is harmless (``read`` records the
read, at worst twice; ``communities --rebuild`` recomputes the communities again).

This module is imported by every CLI run, so it loads only the standard library's light modules
(``socket``, ``json``, ``hashlib``); the server half is :mod:`contextgraph.cli.resident`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import sys

TYPE_CHECKING = False  # typing itself costs 20 ms of a CLI run; mypy honours the name
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, BinaryIO, TextIO

# Commands a resident server answers: the queries (``read`` and ``communities --rebuild`` write),
# and ``sync`` while it would change nothing (UNCHANGED_ONLY: the server runs it refusing every
# write, contextgraph.store.nowrite, and hands back a sync that has work to do).
UNCHANGED_ONLY = frozenset({"sync"})
FORWARDED = frozenset(
    {"context", "expand", "search", "read", "retrieve", "visualize", "communities", "stats"}
    | UNCHANGED_ONLY
)
OPT_OUT = "CONTEXTGRAPH_NO_RESIDENT"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
MAX_REQUEST_BYTES = 8 * 1024 * 1024  # argv, cwd and environment; far above any real command line
MAX_ANSWER_BYTES = 1 << 40  # what a command prints is the command's business
SOCKET_PATH_LIMIT = 100  # sun_path is 104-108 bytes, terminator included
SEND_SECONDS = 5.0  # the longest a request's sending may take
POLL_SECONDS = 1.0  # how often a client waiting for its answer looks whether the server stopped
_FS, _FS_ERRORS = "utf-8", "surrogateescape"


def command_and_database(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """The command ``argv`` names and its ``--db`` value, or None when it must run here.

    A light scan, not click's parse: it gives up (None) on anything it is not sure of (``--``,
    help, an unknown option before the command). The server parses the line with click, so a
    mistaken guess costs at most a lookup of the wrong socket, never a wrong answer.
    """
    found = _database_option(argv)
    if found is None:
        return None
    database, rest = found
    command: str | None = None
    for arg in rest:
        if arg in ("--", "-h", "--help", "--version"):
            return None
        if command is None:
            if arg.startswith("-"):
                return None
            command = arg
    if command is None:
        return None
    return command, database


def plain_sync(argv: Sequence[str]) -> tuple[str | None, list[str], bool] | None:
    """(``--db``, folder paths, ``--json``) of a ``sync`` command line with nothing else but
    ``--no-wait``; None for any other line (``--name``, help, ``--``: click parses those).

    A sync that would change nothing is answered before the CLI loads
    (:mod:`contextgraph.sync.unchanged`); one that finds the lock taken never is, so
    ``--no-wait`` changes nothing there.
    """
    found = _database_option(argv)
    if found is None:
        return None
    database, rest = found
    if database == "" or not rest or rest[0] != "sync":
        return None
    paths: list[str] = []
    as_json = False
    for arg in rest[1:]:
        if arg in ("--json", "--no-wait"):
            as_json = as_json or arg == "--json"
        elif arg.startswith("-") or not arg:
            return None
        else:
            paths.append(arg)
    return database, paths, as_json


def _database_option(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """The last ``--db`` value of ``argv`` (``--db PATH`` or ``--db=PATH``) and its other
    arguments, in order; None when the last argument is a ``--db`` without its value."""
    database: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--db":
            if i + 1 == len(argv):
                return None
            database = argv[i + 1]
            i += 2
            continue
        if arg.startswith("--db="):
            database = arg[len("--db=") :]
        else:
            rest.append(arg)
        i += 1
    return database, rest


def database_key(database: str) -> str | None:
    """What names ``database`` for every process: a URL as given, a file by its real path.

    The same rule as :func:`contextgraph.store.db.database_url` (``~`` and ``~/…`` expanded,
    ``~name`` literal, relative to the working directory); None for a private in-memory
    database, which nothing can share.
    """
    if not database or database == ":memory:":
        return None
    if "://" in database:
        return database
    if database == "~" or database.startswith("~/"):  # ``~name`` is a file's name
        database = os.path.expanduser(database)
    return os.path.realpath(database)


def default_database() -> str:
    """``$CONTEXTGRAPH_DB``, else ``~/.contextgraph/graph.db``."""
    return os.environ.get("CONTEXTGRAPH_DB") or os.path.join(
        os.path.expanduser("~"), ".contextgraph", "graph.db"
    )


def socket_folder() -> str:
    """The private folder of this user's resident sockets (``$XDG_RUNTIME_DIR``, else a temp)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"contextgraph-{os.getuid()}")


def socket_path(key: str) -> str:
    """The socket of the resident server of the database named ``key``."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(socket_folder(), f"{digest}.sock")


def folder_is_private(folder: str) -> bool:
    """Whether ``folder`` is a directory of this user's that nobody else may enter."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    is_dir = (st.st_mode & 0o170000) == 0o040000
    return is_dir and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0


def fingerprint() -> str:
    """What must be equal for a server's answer to be this process's: code and interpreter.

    The interpreter, every module of the package by size and modification time (an upgrade or
    an edit of an editable install changes it), and the import path's ``site-packages`` (and
    ``dist-packages``) folders by modification time. About a millisecond.
    """
    root = os.path.dirname(os.path.abspath(__file__))
    # surrogateescape: a path that is not UTF-8 (bytes decoded by the file system) still hashes
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}\0{root}".encode(_FS, _FS_ERRORS))
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                line = f"\0{folder}/{name}:{st.st_size}:{st.st_mtime_ns}"
                digest.update(line.encode(_FS, _FS_ERRORS))
    # The folders packages are installed into, and when each last changed: installing or
    # upgrading a dependency (click, SQLAlchemy, igraph) adds or removes entries there. Not
    # the other entries of the import path: the working folder, a project's own folder (an
    # editable install's), which change as files are saved and say nothing of the code.
    for entry in sys.path:
        if os.path.basename(os.path.normpath(entry)) not in ("site-packages", "dist-packages"):
            continue
        try:
            changed = os.stat(entry).st_mtime_ns
        except OSError:
            changed = -1
        digest.update(f"\0{entry}:{changed}".encode(_FS, _FS_ERRORS))
    return digest.hexdigest()


def send_message(conn: socket.socket, header: Mapping[str, object], *payloads: bytes) -> None:
    """One message: a JSON header line (with the payloads' lengths), then the payloads."""
    header = dict(header, lengths=[len(p) for p in payloads])
    conn.sendall(json.dumps(header).encode() + b"\n" + b"".join(payloads))


def receive_message(reader: BinaryIO, limit: int) -> tuple[dict[str, Any], list[bytes]]:
    """Read one message of :func:`send_message` from a buffered reader of the socket."""
    line = reader.readline(limit + 1)
    if not line.endswith(b"\n"):
        raise ConnectionError("the message ended before its header did")
    header = json.loads(line)
    lengths = header.get("lengths") if isinstance(header, dict) else None
    if (
        not isinstance(lengths, list)
        or not all(isinstance(n, int) and n >= 0 for n in lengths)
        or sum(lengths) > limit
    ):
        raise ConnectionError("a malformed message")
    payloads = []
    for length in lengths:
        data = reader.read(length)
        if len(data) != length:
            raise ConnectionError("the message ended before its payload did")
        payloads.append(data)
    return header, payloads


def _stream_codec(stream: object) -> list[str]:
    return [
        getattr(stream, "encoding", None) or "utf-8",
        getattr(stream, "errors", None) or "strict",
    ]


def forward(argv: Sequence[str]) -> int | None:
    """Have the resident server run ``argv``; its exit status, or None to run it here."""
    if os.environ.get(OPT_OUT, "").strip() not in ("", "0") or not hasattr(socket, "AF_UNIX"):
        return None
    parsed = command_and_database(argv)
    if parsed is None or parsed[0] not in FORWARDED:
        return None
    key = database_key(parsed[1] or default_database())
    if key is None or not folder_is_private(socket_folder()):
        return None
    path = socket_path(key)
    if len(path) > SOCKET_PATH_LIMIT:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)  # first: with no server, a run here pays for nothing more
            request = {
                "argv": list(argv),
                "cwd": os.getcwd(),
                "environ": dict(os.environ),
                "fingerprint": fingerprint(),
                "stdout": _stream_codec(sys.stdout),
                "stderr": _stream_codec(sys.stderr),
            }
            conn.settimeout(SEND_SECONDS)  # a stopped server's full queue must not hold us
            send_message(conn, request)
            conn.shutdown(socket.SHUT_WR)
            answer = _answer_of(conn)
            if answer is None:
                return None
            header, payloads = receive_message(io.BytesIO(answer), limit=MAX_ANSWER_BYTES)
    except (OSError, ValueError):  # no server, a dead one's socket, or one that went away
        return None
    code, streams = header.get("exit"), header.get("streams")
    if header.get("status") != "done" or not isinstance(code, int):  # "stale", "refused"
        return None
    if not isinstance(streams, list) or len(streams) != len(payloads):
        return None
    try:
        for which, data in zip(streams, payloads, strict=True):  # in the order written
            _write(sys.stderr if which == 2 else sys.stdout, data)
    except BrokenPipeError:  # the reader went away (`| head`): end quietly, as the CLI does
        quiet_closed_stdout()
        return 0
    except OSError as exc:  # a full disk, say
        return unwritten(exc)
    return code


def _answer_of(conn: socket.socket) -> bytes | None:
    """All the server sends, up to its end; None when the server is stopped (``kill -STOP``,
    Ctrl-Z in its terminal): the kernel queued the connection, but no answer would come.

    A long command is waited for; every :data:`POLL_SECONDS` without a byte, the server's state
    is looked up by its pid (Linux: ``SO_PEERCRED`` and ``/proc``; elsewhere it is waited for).
    """
    pid = _peer_pid(conn)
    conn.settimeout(POLL_SECONDS)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = conn.recv(1 << 20)
        except TimeoutError:
            if pid is not None and _stopped(pid):
                return None
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _peer_pid(conn: socket.socket) -> int | None:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    import struct

    pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, 12))
    return int(pid) or None


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (``T``) or traced (``t``), by ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"T", b"t")


def quiet_closed_stdout() -> None:
    """After a closed stdout (`| head`): point it at /dev/null, so the final flush at exit
    cannot raise again, and the process ends quietly (here and in the CLI's commands)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # no real stdout to redirect (a test runner's buffer): nothing will flush it


def unwritten(exc: OSError) -> int:
    """A run whose answer could not be written (a full disk): one line on stderr, and status 1,
    as the CLI ends on an error; the output still buffered goes nowhere at exit."""
    if sys.stderr is not None:
        try:
            sys.stderr.write(f"Error: cannot write the answer: {exc.strerror or exc}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # stderr fails too: the status says it
    quiet_closed_stdout()
    return 1


def _write(stream: TextIO, data: bytes) -> None:
    """Write the server's bytes for ``stream`` as they are (its encoding was the server's)."""
    if not data or stream is None:  # None: that descriptor was closed (``>&-``)
        return
    stream.flush()
    binary = getattr(stream, "buffer", None)
    if binary is None:  # a text-only stream (a host program's): decode as the server encoded
        stream.write(data.decode(*_stream_codec(stream)))
    else:
        binary.write(data)
        binary.flush()
