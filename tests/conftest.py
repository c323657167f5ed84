"""Shared fixtures: every test gets its own HOME and database; nothing touches a real home."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import NOW, DbFactory, Writer
from hypothesis import settings as hypothesis_settings

from contextgraph import ContextGraph
from contextgraph.settings import Settings

# CI runs the property tests on a fixed sequence of examples (no flakes on a shared machine);
# locally every run explores new ones.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    # A resident server's sockets live here: a fresh short folder (sockets take ~100 bytes of
    # path at most), so no test reaches a server of the user's or of another test.
    runtime = tempfile.mkdtemp(prefix="cg-", dir="/tmp" if os.path.isdir("/tmp") else None)
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.setenv("CONTEXTGRAPH_DB", str(tmp_path / "env.db"))
    for name in list(os.environ):
        if name.startswith(("CONTEXTGRAPH_", "MAENIFOLD_")) and name != "CONTEXTGRAPH_DB":
            monkeypatch.delenv(name)
    yield
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "graph.db"


@pytest.fixture
def store(db_url: str) -> Iterator[ContextGraph]:
    """A fresh database (a file, or a PostgreSQL database for the engines tier) with the default
    settings and a fixed clock."""
    graph = ContextGraph.open(db_url, settings=Settings.from_env(now=_now()))
    yield graph
    graph.close()


def _now() -> object:
    from contextgraph.settings import parse_datetime

    return parse_datetime(NOW)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


@pytest.fixture
def write(vault: Path) -> Writer:
    """Write a note into the vault: ``write("a.md", "text", created="2026-11-01")``."""

    def _write(rel: str, body: str, *, created: str | None = None, root: Path = vault) -> Path:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(body)
        if created is not None:
            text = f"---\ncreated: {created}\n---\n{text}"
        path.write_text(text, encoding="utf-8")
        return path

    return _write


# --------------------------------------------------------------------------------------------
# Both engines (SPEC §15). A module opts in with ``pytestmark = pytest.mark.engines("sqlite",
# "postgresql")``; its tests then take ``backend`` / ``db_url`` / ``new_db`` and run once per
# engine. PostgreSQL runs in a throwaway cluster started once per session (initdb in a temp
# folder, a free port on 127.0.0.1, trust auth, run as the ``postgres`` user when we are root);
# every test gets a fresh database copied from a migrated template.


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "engines(*names): run the module's tests on these engines")
    config.addinivalue_line("markers", "sqlite_only: a test of SQLite-specific behaviour")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("engines")
    if marker is None or metafunc.definition.get_closest_marker("sqlite_only") is not None:
        return  # the ``backend`` fixture defaults to SQLite
    metafunc.parametrize("backend", list(marker.args), indirect=True, scope="function")


class PgCluster:
    """A PostgreSQL server of our own for the tests; databases made from a migrated template."""

    TEMPLATE = "cg_template"

    def __init__(self, bindir: Path, root: Path, port: int, run_as: list[str]) -> None:
        self.bindir, self.root, self.port, self.run_as = bindir, root, port, run_as
        self.counter = 0

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self) -> str:
        self.counter += 1
        name = f"cg_{os.getpid()}_{self.counter}"
        self.admin(f'CREATE DATABASE "{name}" TEMPLATE {self.TEMPLATE}')
        return name

    def drop(self, name: str) -> None:
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Read at import: the autouse fixture clears CONTEXTGRAPH_* before each test.
# CONTEXTGRAPH_PG_BINDIR names the server binaries; CONTEXTGRAPH_TEST_POSTGRES=off skips the tier.
_PG_BINDIR_ENV = os.environ.get("CONTEXTGRAPH_PG_BINDIR")
_PG_TIER = os.environ.get("CONTEXTGRAPH_TEST_POSTGRES", "auto")


def _pg_bindir() -> Path | None:
    import shutil
    import subprocess

    candidates: list[Path] = []
    if _PG_BINDIR_ENV:
        candidates.append(Path(_PG_BINDIR_ENV))
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    return None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster | str]:
    """The session's PostgreSQL cluster, or the one-line reason there is none."""
    import shutil
    import subprocess
    import tempfile

    if _PG_TIER == "off":
        yield "PostgreSQL tier skipped: CONTEXTGRAPH_TEST_POSTGRES=off"
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        yield 'PostgreSQL tier skipped: psycopg is not installed (pip install -e ".[test]")'
        return
    bindir = _pg_bindir()
    if bindir is None:
        yield "PostgreSQL tier skipped: no PostgreSQL server binaries (initdb) on this machine"
        return
    root = Path(tempfile.mkdtemp(prefix="cg-pg-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to the postgres user
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            yield "PostgreSQL tier skipped: running as root and there is no postgres user"
            return
        os.chown(root, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    port = _free_port()
    initdb = [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
    init = subprocess.run(
        [*run_as, *initdb, "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
        capture_output=True,
        text=True,
    )
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        yield f"PostgreSQL tier skipped: initdb failed: {init.stderr.strip().splitlines()[-1:]}"
        return
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
    )
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-o", options]
    start = subprocess.run(
        [*run_as, *pg_ctl, "-l", str(root / "server.log"), "-w", "-t", "60", "start"],
        capture_output=True,
        text=True,
    )
    if start.returncode != 0:
        log = (root / "server.log").read_text(errors="replace")[-500:]
        shutil.rmtree(root, ignore_errors=True)
        yield f"PostgreSQL tier skipped: the server did not start: {log!r}"
        return
    cluster = PgCluster(bindir, root, port, run_as)
    try:
        cluster.admin(f"CREATE DATABASE {cluster.TEMPLATE}")
        with ContextGraph.open(cluster.url(cluster.TEMPLATE)):
            pass  # migrated to head; every test database is a copy
        yield cluster
    finally:
        subprocess.run(
            [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The engine under test: ``sqlite`` or ``postgresql`` (see ``pytest_generate_tests``)."""
    name = str(getattr(request, "param", "sqlite"))
    if name == "postgresql":
        cluster = request.getfixturevalue("pg_cluster")
        if isinstance(cluster, str):
            pytest.skip(cluster)
    return name


@pytest.fixture
def new_db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DbFactory]:
    """Make fresh, empty databases on the engine under test (see :class:`DbFactory`)."""
    cluster = request.getfixturevalue("pg_cluster") if backend == "postgresql" else None
    factory = DbFactory(backend, tmp_path, cluster if isinstance(cluster, PgCluster) else None)
    yield factory
    factory.close()


@pytest.fixture
def db_url(new_db: DbFactory, backend: str, db_path: Path) -> str:
    """The test's database on the engine under test (SQLite: the ``db_path`` file)."""
    return str(db_path) if backend == "sqlite" else new_db("graph")
