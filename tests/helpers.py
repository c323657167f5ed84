"""Shared test helpers (plain imports): paths, the fixed clock, snapshots, running scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextgraph import ContextGraph

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPORA = SHARED / "corpora"
EXAMPLES = REPO / "examples"
NOW = "2026-11-30T12:00:00+00:00"

Writer = Callable[..., Path]


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child process: no CONTEXTGRAPH_* of ours, this checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGRAPH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def kill_sync_mid_way(
    database: Path, folder: Path | list[Path], *, files: int, after: int = 20
) -> int:
    """Start ``contextgraph sync folder`` (one file per batch; several folders: one sync of
    them all), SIGKILL it once ``after`` batches are committed, and return how many files
    were when it died; skip the test when the kill missed the sync."""
    import signal
    import sqlite3
    import time

    import pytest

    folders = [str(f) for f in (folder if isinstance(folder, list) else [folder])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextgraph", "--db", str(database), "sync", *folders],
        env=child_env(CONTEXTGRAPH_BATCH_FILES="1", CONTEXTGRAPH_WORKERS="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stored() -> int:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("SELECT count(*) FROM files").fetchone()[0])
        finally:
            conn.close()

    committed = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if database.exists():
            try:
                committed = stored()
            except sqlite3.Error:  # not created yet
                committed = 0
            if committed >= after:
                break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if committed:  # a batch may have committed between the count and the kill
        committed = stored()
    if not 0 < committed < files:
        pytest.skip(f"the kill did not land mid-sync ({committed} files committed)")
    return committed


def write_numbered_notes(root: Path, count: int, tag: str = "") -> None:
    """``count`` notes in four folders, linking a few dozen shared topics (and ``[[Shared]]``)."""
    for n in range(count):
        folder = root / f"f{n % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{n:04d}.md").write_text(
            f"# Note {n} {tag}\n[[Topic {n % 17}]] and [[Topic {(n * 7) % 23}]] [[Shared]]\n",
            encoding="utf-8",
        )


def write_topic_notes(vault: Path, count: int, tail: str = "") -> None:
    """``count`` flat notes ``nNNN.md``, each linking two of twenty topics (then ``tail``)."""
    vault.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (vault / f"n{n:03d}.md").write_text(
            f"[[Topic {n % 13}]] [[Topic {n % 7 + 20}]] note {n}{tail}\n", encoding="utf-8"
        )


def run_script(name: str, *argv: str, timeout: float = 900) -> dict[str, Any]:
    """Run ``scripts/<name>.py`` in a child process and return the JSON object it prints."""
    env = child_env()
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / f"{name}.py"), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def snapshot(graph: ContextGraph) -> dict[str, object]:
    """A canonical dump of everything sync derives from the files (ids and read times left out)."""
    from sqlalchemy import text

    from contextgraph.store import db

    queries = {
        "files": "SELECT s.name, f.path, f.kind, f.hash, f.size, f.title, f.created, f.text,"
        " f.facts, f.concept_count, f.pairs FROM files f JOIN sources s ON s.id = f.source_id",
        "mentions": "SELECT s.name, f.path, e.key, m.count FROM mentions m"
        " JOIN files f ON f.id = m.file_id JOIN sources s ON s.id = f.source_id"
        " JOIN entities e ON e.id = m.concept_id",
        "concept_relations": "SELECT a.key, b.key, r.count FROM concept_relations r"
        " JOIN entities a ON a.id = r.a_id JOIN entities b ON b.id = r.b_id",
        "entities": "SELECT e.kind, e.key, e.name, e.path FROM entities e",
        "relations": "SELECT a.kind, a.key, b.kind, b.key, r.type, r.weight, f.path"
        " FROM relations r JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id"
        " JOIN files f ON f.id = r.file_id",
        "fts": "SELECT rowid, title, text, search_meta, search_parts FROM files_fts",
    }
    if graph.engine.dialect.name == "postgresql":
        queries["fts"] = "SELECT id, search_tsv::text, NULL FROM files"
    out: dict[str, object] = {}
    with db.read(graph.engine) as conn:
        for name, sql in queries.items():
            rows = [tuple(r) for r in conn.execute(text(sql))]
            if name == "concept_relations":  # stored by id order, which differs between stores
                rows = [(*sorted(r[:2]), r[2]) for r in rows]
            if name == "fts":
                paths = dict(conn.execute(text("SELECT id, path FROM files")).all())
                rows = [(paths.get(r[0]), *r[1:]) for r in rows]
            out[name] = sorted(rows, key=repr)
    return out


class DbFactory:
    """Fresh, empty databases on one engine: ``new_db("fresh")`` gives a path or URL."""

    def __init__(self, backend: str, tmp_path: Path, cluster: Any) -> None:
        self.backend, self.tmp_path, self.cluster = backend, tmp_path, cluster
        self.made: list[str] = []
        self.count = 0

    def __call__(self, name: str) -> str:
        self.count += 1
        if self.cluster is not None:
            dbname = self.cluster.new_database()
            self.made.append(dbname)
            return self.cluster.url(dbname)
        return str(self.tmp_path / f"{name}-{self.count}.db")

    def drop(self, url: str) -> None:
        """Remove a database made here (its engines must be closed)."""
        if self.cluster is not None:
            dbname = url.rsplit("/", 1)[1]
            self.cluster.drop(dbname)
            self.made.remove(dbname)
            return
        for suffix in ("", "-wal", "-shm", ".sync.lock"):
            Path(url + suffix).unlink(missing_ok=True)

    def close(self) -> None:
        if self.cluster is not None:
            from contextgraph.graph.neighbourhood import Neighbourhoods

            Neighbourhoods._states.clear()
            for dbname in self.made:
                self.cluster.drop(dbname)


def first_links_agree(text: str) -> int:
    """Check that ``LinkIndex``, reading only as far as each question needs, in either order
    of questions, finds each concept's first link where the whole note's links put it; return
    how many concepts were checked."""
    from contextgraph.notes.wikilinks import LinkIndex, find_links

    first: dict[str, int] = {}
    for link in find_links(text):
        if link.concept:
            first.setdefault(link.concept, link.start)
    for order in (list(first), list(reversed(first))):
        index = LinkIndex(text)
        assert {concept: index.first(concept) for concept in order} == {
            concept: first[concept] for concept in order
        }, text[:200]
        assert index.first("no-such-concept-in-any-note") is None
    return len(first)


def whole_note_preview(text: str, related: str, query: str) -> str:
    """``content_preview`` as it was before notes were read only as far as needed: every link
    of the whole note found first, then the first sentence that holds one (the reference the
    lazy reading must agree with)."""
    from contextgraph.notes import preview
    from contextgraph.notes.wikilinks import find_links

    note = preview.Note(text)
    starts: dict[str, list[int]] = {}
    for link in find_links(text):
        if link.concept:
            starts.setdefault(link.concept, []).append(link.start)
    budget = 200
    if not note.blocks:
        return ""
    chosen: str | None = None
    for wanted in (related, query):
        if not wanted or chosen is not None:
            continue
        for block_start, block_end, _ in note.blocks:
            for a, b in preview._sentences(text, block_start, block_end):
                if any(a <= s < b for s in starts.get(wanted, [])):
                    chosen = preview._clean(text[a:b])
                    break
            if chosen is not None:
                break
    if chosen is None:
        chosen = preview._opening(text, note.blocks, budget)
    return preview._shorten(chosen, budget)[:240]


def remove_deep(root: Path, folder: str, depth: int, leaf: str) -> None:
    """Remove ``root``/folder/folder/.../leaf (``depth`` folders) bottom-up, without recursion:
    shutil.rmtree, pytest's too, recurses once per level and fails past about 990."""
    fds = [os.open(root, os.O_RDONLY)]
    for _ in range(depth):
        fds.append(os.open(folder, os.O_RDONLY, dir_fd=fds[-1]))
    os.unlink(leaf, dir_fd=fds[-1])
    while len(fds) > 1:
        os.close(fds.pop())
        os.rmdir(folder, dir_fd=fds[-1])
    os.close(fds[0])


def wait_for_file(path: str, timeout: float = 120.0) -> None:
    """Return once ``path`` exists (or after ``timeout`` seconds): run in a worker process, it
    keeps that worker from taking anything else until the test creates the file."""
    import time

    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
