"""The resident server answers the CLI's read-only queries exactly as a fresh process would.

Every test runs real processes: a ``contextgraph resident`` server and ``contextgraph`` clients,
each answer compared byte for byte (stdout, stderr, exit status) with the same command line run
with ``CONTEXTGRAPH_NO_RESIDENT=1``. The server's closing line says how many queries it answered,
which tells a forwarded query from one the client ran itself.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Writer

from contextgraph import ContextGraph, launch

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def run(db: Path, *args: str, cwd: Path | None = None, **env: str) -> tuple[int, bytes, bytes]:
    """``contextgraph --db DB ARGS`` in a new process: (exit status, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "contextgraph", "--db", str(db), *args],
        env=_env(**env),
        cwd=cwd,
        capture_output=True,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


def run_here(db: Path, *args: str, **env: str) -> tuple[int, bytes, bytes]:
    return run(db, *args, **{launch.OPT_OUT: "1", **env})


class Server:
    """A ``contextgraph resident`` process on ``db``, ready when constructed."""

    def __init__(self, db: Path, *, cwd: Path, given: str | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "contextgraph", "--db", given or str(db), "resident"],
            env=_env(),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.socket = launch.socket_path(str(db.resolve()))
        deadline = time.monotonic() + 60
        while not _accepts(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"the server did not start: {self.proc.communicate()}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Stop the server; its exit status and the number of queries it answered."""
        self.proc.send_signal(sig)
        _out, err = self.proc.communicate(timeout=60)
        last = err.decode().strip().splitlines()[-1]
        assert last.startswith("stopped after "), err
        return self.proc.returncode, last


def _accepts(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


@pytest.fixture
def synced(db_path: Path, write: Writer, vault: Path) -> Path:
    write("a.md", "# Alpha note\n[[Alpha]] and [[Beta]] and [[Gamma]].", created="2026-11-01")
    write("b.md", "[[Alpha]] with [[Beta]], about search.", created="2026-10-01")
    write("c.md", "[[Gamma]] and [[Delta]] [[Beta]].", created="2026-09-01")
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
    return db_path


@pytest.fixture
def server(synced: Path, tmp_path: Path) -> Iterator[Server]:
    running = Server(synced, cwd=tmp_path)
    yield running
    if running.proc.poll() is None:
        running.proc.kill()
        running.proc.communicate()


QUERIES = [
    ("stats", "--json"),
    ("stats",),
    ("context", "Alpha"),
    ("context", "Alpha", "--json", "--depth", "1"),
    ("context", "Nobody Knows"),
    ("expand", "Alpha", "Delta", "--json"),
    ("search", "search"),
    ("search", "alpha", "--json", "--all"),
    ("retrieve", "alpha beta", "--json"),
    ("communities", "--json"),
    ("visualize", "Beta"),
    ("read", "a.md"),
    ("read", "Alpha note", "--json"),
    ("read", "missing.md"),  # exit 1, one line
    ("context", "Alpha", "--depth", "99"),  # exit 2, usage
    ("search",),  # exit 2, a missing argument
]


def test_every_forwarded_query_answers_byte_for_byte_as_a_fresh_process(
    server: Server, synced: Path
) -> None:
    statuses = set()
    clock = {"CONTEXTGRAPH_NOW": "2026-12-01T00:00:00Z"}  # a read's JSON says when it was read
    for args in QUERIES:
        here = run_here(synced, *args, **clock)
        served = run(synced, *args, **clock)
        assert served == here, args
        statuses.add(here[0])
    assert statuses == {0, 1, 2}  # answers, refusals and usage errors all came back as they are
    code, last = server.stop()
    assert code == 0
    assert last == f"stopped after {len(QUERIES)} queries"
    assert not os.path.lexists(server.socket)


def test_the_clients_environment_and_working_directory_rule_the_answer(
    server: Server, synced: Path
) -> None:
    # A setting and the clock come from the client's environment, not the server's.
    env = {"CONTEXTGRAPH_MAX_ENTITIES": "1", "CONTEXTGRAPH_NOW": "2027-06-01T00:00:00Z"}
    here = run_here(synced, "context", "Beta", "--json", **env)
    served = run(synced, "context", "Beta", "--json", **env)
    assert served == here
    assert len(json.loads(here[1])["directRelations"]) == 1
    default = run(synced, "context", "Beta", "--json")
    assert json.loads(default[1])["directRelations"] != json.loads(served[1])["directRelations"]
    # A relative --db is the client's: the same socket, the same answer.
    relative = run(Path(synced.name), "stats", "--json", cwd=synced.parent)
    assert relative == run_here(synced, "stats", "--json")
    _code, last = server.stop()
    assert last == "stopped after 3 queries"


def test_a_server_started_with_a_relative_path_serves_clients_anywhere(
    synced: Path, tmp_path: Path
) -> None:
    server = Server(synced, cwd=synced.parent, given=synced.name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Other settings make the server open the database again, from the client's folder.
    env = {"CONTEXTGRAPH_MAX_ENTITIES": "1"}
    served = run(synced, "context", "Beta", "--json", cwd=elsewhere, **env)
    assert served == run_here(synced, "context", "Beta", "--json", **env)
    assert served[0] == 0
    assert server.stop() == (0, "stopped after 1 queries")


def test_what_another_process_writes_is_in_the_next_answer(
    server: Server, synced: Path, vault: Path, write: Writer
) -> None:
    before = json.loads(run(synced, "context", "Delta", "--json")[1])
    assert "epsilon" not in {r["name"] for r in before["directRelations"]}
    write("d.md", "[[Delta]] meets [[Epsilon]].")
    with ContextGraph.open(synced) as graph:
        graph.sync([vault])
    after = run(synced, "context", "Delta", "--json")
    assert after == run_here(synced, "context", "Delta", "--json")
    assert "epsilon" in {r["name"] for r in json.loads(after[1])["directRelations"]}
    _code, last = server.stop()
    assert last == "stopped after 2 queries"


def test_a_database_replaced_under_the_server_is_opened_anew(
    server: Server, synced: Path, tmp_path: Path, write: Writer
) -> None:
    assert b"gamma" in run(synced, "context", "Alpha")[1]
    other_vault = tmp_path / "other"
    write("x.md", "[[Alpha]] and [[Omega]].", root=other_vault)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{synced}{suffix}").unlink(missing_ok=True)
    with ContextGraph.open(synced) as graph:
        graph.sync([other_vault])
    answer = run(synced, "context", "Alpha")
    assert answer == run_here(synced, "context", "Alpha")
    assert b"omega" in answer[1] and b"gamma" not in answer[1]
    _code, last = server.stop()
    assert last == "stopped after 2 queries"


def _timeless(answer: tuple[int, bytes, bytes]) -> tuple[int, object, bytes]:
    """A sync's answer without its seconds per phase (the one part no two runs share)."""
    code, out, err = answer
    if out.startswith(b"{"):
        report = json.loads(out)
        report.pop("seconds")
        return code, report, err
    return code, [line for line in out.splitlines() if not line.startswith(b"time: ")], err


def test_a_sync_that_changes_nothing_is_answered_and_one_with_work_is_handed_back(
    server: Server, synced: Path, vault: Path, write: Writer
) -> None:
    served = 0
    for args in (("sync", "--json"), ("sync",)):
        answer = run(synced, *args)
        served += 1
        assert _timeless(answer) == _timeless(run_here(synced, *args))
    assert json.loads(run(synced, "sync", "--json")[1])["files"]["unchanged"] == 3
    served += 1
    write("e.md", "[[Alpha]] and [[Zeta]].")  # work to do: the client syncs it itself
    code, out, _err = run(synced, "sync", "--json")
    assert code == 0 and json.loads(out)["files"]["added"] == 1
    assert "zeta" in run(synced, "context", "Alpha")[1].decode()
    served += 1
    answer = run(synced, "sync", str(vault), "--json")  # a known folder: nothing to register
    assert _timeless(answer) == _timeless(run_here(synced, "sync", str(vault), "--json"))
    assert answer[0] == 0 and json.loads(answer[1])["files"]["unchanged"] == 4
    served += 1
    other = vault.parent / "other"
    write("f.md", "[[Alpha]] elsewhere.", root=other)
    code, out, _err = run(synced, "sync", str(other), "--json")  # registering is a write
    assert code == 0 and json.loads(out)["files"]["added"] == 1
    listed = json.loads(run(synced, "sources", "--json")[1])["sources"]  # run by the client
    assert [s["name"] for s in listed] == ["other", "vault"]
    from contextgraph.sync.run import sync_lock

    with sync_lock(synced):  # another sync runs: the client waits for it, or says so
        assert run(synced, "sync", "--no-wait") == run_here(synced, "sync", "--no-wait")
        assert run(synced, "sync", "--no-wait")[0] == 1
    _code, last = server.stop()
    assert last == f"stopped after {served} queries"


def test_a_sync_that_only_reads_notes_failing_at_every_sync_is_answered(
    server: Server, synced: Path, vault: Path, write: Writer
) -> None:
    """A binary note is never stored, so every sync reads it again and writes nothing for
    it: the server answers such a sync (as the client's standard-library check would), and
    hands back one whose new file would be stored."""
    (vault / "binary.md").write_bytes(b"[[Alpha]]\0\0\0")
    assert run_here(synced, "sync")[0] == 0  # stores nothing for it: it fails
    for args in (("sync", "--json"), ("sync",)):
        answer = run(synced, *args)
        assert _timeless(answer) == _timeless(run_here(synced, *args))
    assert json.loads(run(synced, "sync", "--json")[1])["files"]["failed"] == 1
    write("e.md", "[[Alpha]] and [[Zeta]].")  # would be stored: the client syncs it
    code, out, _err = run(synced, "sync", "--json")
    assert code == 0 and json.loads(out)["files"]["added"] == 1
    _code, last = server.stop()
    assert last == "stopped after 3 queries"


def test_commands_that_write_and_help_run_in_the_client(
    server: Server, synced: Path, vault: Path, write: Writer
) -> None:
    write("e.md", "[[Alpha]] and [[Zeta]].")
    code, out, _err = run(synced, "sync", str(vault), "--json")
    assert code == 0 and json.loads(out)["files"]["added"] == 1
    assert run(synced, "context", "--help") == run_here(synced, "context", "--help")
    assert run(synced, "--version")[0] == 0
    _code, last = server.stop()
    assert last == "stopped after 0 queries"


def test_a_client_of_other_code_is_told_stale_and_a_bad_request_is_dropped(
    server: Server, synced: Path
) -> None:
    request = _request(synced, "stats", fingerprint="not this code")
    assert _ask(server.socket, json.dumps(request).encode() + b"\n")[0]["status"] == "stale"
    # A request the server cannot set up (a variable no environment holds, a folder that is
    # gone) is handed back: the client runs it itself.
    for change in ({"environ": {"A=B": "1"}}, {"cwd": str(synced.parent / "gone")}):
        bad = _request(synced, "stats", **change)
        assert _ask(server.socket, json.dumps(bad).encode() + b"\n")[0]["status"] == "refused"
    # Garbage, a header without its payload, and a request with a field of the wrong type: each
    # is dropped without an answer, and the server goes on serving.
    for raw in (
        b"\xff\xfe not json\n",
        b'{"lengths": [10]}\n',
        b'{"argv": 3, "lengths": []}\n',
        b"[" * 200_000 + b"\n",  # deeper than the JSON parser recurses
    ):
        with pytest.raises(ConnectionError):
            _ask(server.socket, raw)
    assert run(synced, "stats", "--json") == run_here(synced, "stats", "--json")
    _code, last = server.stop()
    assert last == "stopped after 1 queries"


def test_clients_at_once_are_answered_in_turn_and_one_that_leaves_costs_nothing(
    server: Server, synced: Path
) -> None:
    request = _request(synced, "context", "Alpha", "--json")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as leaving:
        leaving.connect(server.socket)
        leaving.sendall(json.dumps(request).encode() + b"\n")
    # ...gone before its answer. Now six clients at once, each with its own question.
    queries = [("context", name, "--json") for name in ("Alpha", "Beta", "Gamma")] * 2
    expected = [run_here(synced, *q) for q in queries]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "contextgraph", "--db", str(synced), *q],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for q in queries
    ]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        answers.append((proc.returncode, out, err))
    assert answers == expected
    _code, last = server.stop()
    assert last == "stopped after 7 queries"  # the one that left was answered too, to nobody


@functools.cache
def _client_fingerprint() -> str:
    """A client process's :func:`contextgraph.launch.fingerprint`: not this one's, whose import
    path pytest changed."""
    code = "from contextgraph import launch; print(launch.fingerprint())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _request(synced: Path, *argv: str, **fields: object) -> dict[str, object]:
    """A request as :func:`contextgraph.launch.forward` makes it, with ``fields`` changed."""
    request: dict[str, object] = {
        "argv": list(argv),
        "cwd": str(synced.parent),
        "environ": dict(os.environ),
        "fingerprint": _client_fingerprint(),
        "stdout": ["utf-8", "strict"],
        "stderr": ["utf-8", "strict"],
        "lengths": [],
    }
    return {**request, **fields}


def _ask(path: str, raw: bytes) -> tuple[dict[str, object], list[bytes]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        conn.sendall(raw)
        conn.shutdown(socket.SHUT_WR)
        with conn.makefile("rb") as reader:
            return launch.receive_message(reader, limit=1 << 30)


def test_one_server_a_database_and_a_dead_servers_socket_is_replaced(
    server: Server, synced: Path, tmp_path: Path
) -> None:
    code, out, err = run(synced, "resident")
    assert code == 1 and out == b""
    assert err.decode().startswith("Error: a resident server already serves ")
    assert len(err.decode().strip().splitlines()) == 1
    server.proc.kill()  # no chance to remove its socket
    server.proc.communicate()
    assert os.path.lexists(server.socket)
    assert run(synced, "stats", "--json") == run_here(synced, "stats", "--json")  # ran here
    again = Server(synced, cwd=tmp_path)
    assert run(synced, "stats")[0] == 0
    code, last = again.stop(signal.SIGINT)
    assert (code, last) == (130, "stopped after 1 queries")


def test_a_server_of_an_empty_database_answers_too(db_path: Path, tmp_path: Path) -> None:
    assert run_here(db_path, "init")[0] == 0
    empty = Server(db_path, cwd=tmp_path)
    for args in (("stats", "--json"), ("context", "Alpha", "--json"), ("search", "alpha")):
        assert run(db_path, *args) == run_here(db_path, *args)
    assert empty.stop() == (0, "stopped after 3 queries")


def test_a_missing_database_fails_the_start_in_one_line(tmp_path: Path) -> None:
    code, out, err = run(tmp_path / "absent.db", "resident")
    assert code == 1 and out == b""
    assert err.startswith(b"Error: ") and len(err.strip().splitlines()) == 1


def test_a_forwarding_client_loads_neither_click_nor_sqlalchemy(
    server: Server, synced: Path
) -> None:
    probe = (
        "import sys\n"
        "from contextgraph.launch import forward\n"
        f"code = forward(['--db', {str(synced)!r}, 'stats', '--json'])\n"
        "assert code == 0, code\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, check=True
    )
    loaded = set(done.stderr.split())
    assert not {m.split(".")[0] for m in loaded} & {"click", "sqlalchemy", "typing"}
    assert not {"contextgraph.api", "contextgraph.settings", "contextgraph.cli"} & loaded
    assert json.loads(done.stdout)["files"] == {"note": 3}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["context", "X"], ("context", None)),
        (["--db", "a.db", "context", "X"], ("context", "a.db")),
        (["context", "X", "--db=b.db"], ("context", "b.db")),
        (["search", "q", "--db", "c.db", "--json"], ("search", "c.db")),
        (["context", "--help"], None),
        (["--version"], None),
        (["--db"], None),
        (["-x", "context"], None),
        (["search", "--", "--db"], None),
        ([], None),
    ],
)
def test_the_light_scan_finds_the_command_and_database_or_gives_up(
    argv: list[str], expected: tuple[str, str | None] | None
) -> None:
    assert launch.command_and_database(argv) == expected


def test_no_server_or_the_opt_out_means_the_client_answers(synced: Path) -> None:
    assert launch.forward(["--db", str(synced), "stats"]) is None  # nobody listens
    assert run(synced, "stats", "--json") == run_here(synced, "stats", "--json")


def test_with_precomputed_lists_on_the_server_refreshes_them_when_due(
    db_path: Path, write: Writer, vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.graph import weights
    from contextgraph.store import db, meta

    monkeypatch.setenv("CONTEXTGRAPH_WEIGHTS_MIN_NOTES", "1")  # the server's environment too
    write("a.md", "[[Alpha]] and [[Beta]].", created="2026-11-01")
    write("b.md", "[[Alpha]] with [[Gamma]].", created="2025-01-01")
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
        with db.write(graph.engine) as conn:  # as if computed for a day long past
            meta.put(conn, weights.REFRESHED_KEY, repr(86400.0))
        running = Server(db_path, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with db.read(graph.engine) as conn:
                    if meta.get(conn, weights.REFRESHED_KEY) != repr(86400.0):
                        break
                time.sleep(0.05)
            else:
                raise AssertionError("the server did not refresh the lists")
            assert weights.is_current(graph.engine, graph.settings)
        finally:
            running.stop()


# -- a hunt of the resident server (stop 43) --------------------------------------------------


def test_a_client_that_stops_reading_holds_up_no_other_nor_the_stop(
    server: Server, synced: Path, vault: Path, write: Writer
) -> None:
    write("big.md", "[[Alpha]] " + "word " * 1_000_000)  # an answer far over a socket buffer
    with ContextGraph.open(synced) as graph:
        graph.sync([vault])
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        stalled.connect(server.socket)
        request = _request(synced, "--db", str(synced), "read", "big.md")
        stalled.sendall(json.dumps(request).encode() + b"\n")
        stalled.shutdown(socket.SHUT_WR)  # ...and never reads its answer
        idle.connect(server.socket)  # ...and never sends anything
        answer = run(synced, "stats", "--json")  # waits at most for the two to be dropped
        assert answer == run_here(synced, "stats", "--json")
        code, last = server.stop()
        assert code == 0 and last == "stopped after 2 queries"
    finally:
        stalled.close()
        idle.close()


def test_a_client_of_a_stopped_server_answers_itself(server: Server, synced: Path) -> None:
    server.proc.send_signal(signal.SIGSTOP)
    try:
        answer = run(synced, "stats", "--json")
    finally:
        server.proc.send_signal(signal.SIGCONT)
    assert answer == run_here(synced, "stats", "--json")
    # Continued, the server answers the queued request, to nobody: the client had answered.
    assert server.stop() == (0, "stopped after 1 queries")


def test_a_database_rewritten_in_place_is_opened_anew(
    server: Server, synced: Path, tmp_path: Path, vault: Path, write: Writer
) -> None:
    newer = tmp_path / "newer.db"
    shutil.copyfile(synced, newer)
    write("z.md", "[[Alpha]] and the zebraword.")
    with ContextGraph.open(newer) as graph:
        graph.sync([vault])  # closed: everything is in the file, no -wal left
    assert b"0 matches" in run(synced, "search", "zebraword")[1]
    inode = synced.stat().st_ino
    with open(newer, "rb") as source, open(synced, "r+b") as target:  # cp over, same inode
        shutil.copyfileobj(source, target)
        target.truncate()
    assert synced.stat().st_ino == inode
    for args in (("search", "zebraword"), ("stats", "--json")):
        assert run(synced, *args) == run_here(synced, *args), args
    assert b"1 matches" in run(synced, "search", "zebraword")[1]
    assert server.stop() == (0, "stopped after 4 queries")


def test_what_tells_another_database_at_the_same_path() -> None:
    from contextgraph.cli.resident import _another_database, _Identity

    now = _Identity((1, 2, True), (4096, 10), (800, 11))
    assert not _another_database(now, now)
    assert not _another_database(now, now._replace(content=(8192, 12), log=(900, 12)))  # commits
    assert not _another_database(now, now._replace(content=(8192, 12), log=None))  # last close
    assert _another_database(now, now._replace(content=(8192, 12)))  # rewritten, log unchanged
    assert _another_database(now, now._replace(file=(1, 3, True)))  # replaced
    assert _another_database(now, now._replace(file=(1, 2, False)))  # made read-only
    assert _another_database(now, None) and _another_database(None, now)


def test_a_closed_stdout_or_a_removed_working_folder_changes_nothing(
    synced: Path, tmp_path: Path
) -> None:
    start = tmp_path / "start"
    start.mkdir()
    server = Server(synced, cwd=start)
    try:
        start.rmdir()
        assert run(synced, "stats", "--json") == run_here(synced, "stats", "--json")
        done = subprocess.run(
            [sys.executable, "-m", "contextgraph", "--db", str(synced), "stats"],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            close_fds=True,
            pass_fds=(),
            preexec_fn=lambda: os.close(1),
            timeout=120,
        )
        assert done.returncode == 0 and done.stderr == b""
        assert server.stop() == (0, "stopped after 2 queries")
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.communicate()


def test_the_fingerprint_ignores_folders_that_hold_no_installed_package(tmp_path: Path) -> None:
    """Saving a file in the working folder, or in a project's folder on the import path (an
    editable install's), must not make every client stale (a review, stop 43)."""
    code = "from contextgraph import launch; print(launch.fingerprint())"
    env = _env(PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")

    def fingerprint() -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        return done.stdout.strip()

    before = fingerprint()
    (tmp_path / "note.md").write_text("saved\n", encoding="utf-8")
    assert fingerprint() == before


def test_a_tilde_and_a_name_is_a_files_name_for_the_client_as_for_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.store import db

    monkeypatch.chdir(tmp_path)
    assert launch.database_key("~root/x.db") == str(tmp_path / "~root" / "x.db")
    assert db.database_url("~root/x.db").database == str(tmp_path / "~root" / "x.db")
    assert launch.database_key("~/x.db") == os.path.realpath(os.path.expanduser("~/x.db"))


def test_a_served_commands_two_streams_come_out_in_the_order_written(
    server: Server, synced: Path, vault: Path
) -> None:
    (vault / "binary.md").write_bytes(b"[[Alpha]]\0\0\0")  # a failure line on stderr
    assert run_here(synced, "sync")[0] == 0

    def merged(**env: str) -> list[bytes]:  # ``2>&1``: one pipe for both
        done = subprocess.run(
            [sys.executable, "-m", "contextgraph", "--db", str(synced), "sync"],
            env=_env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        lines = done.stdout.splitlines()
        return [b"time:" if line.startswith(b"time:") else line for line in lines]

    here = merged(**{launch.OPT_OUT: "1"})
    assert merged() == here
    assert here.index(b"time:") > next(i for i, x in enumerate(here) if x.startswith(b"failed:"))
    assert server.stop() == (0, "stopped after 1 queries")


def test_a_forwarded_answer_that_cannot_be_written_is_one_line(
    server: Server, synced: Path
) -> None:
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "contextgraph", "--db", str(synced), "stats"],
            env=_env(),
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stderr == b"Error: cannot write the answer: No space left on device\n"
    code, last = server.stop()
    assert code == 0 and last == "stopped after 1 queries"  # the server answered it
