"""Hostile folders, second round (SPEC §2, §3, §9, §12): what a sync takes, reports and serves.

Each test is one defect found by syncing real-looking hostile trees: a sync that stopped on one
note, a rename that kept a stale parse, a link swapped in between the scan and the read, folders
skipped or files dropped without a word, names the store took but ``read`` refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import Writer, snapshot
from sqlalchemy import text

from contextgraph import ContextGraph, SourceError
from contextgraph.graph.ftsquery import query_terms
from contextgraph.graph.snippet import Highlighter
from contextgraph.store import db
from contextgraph.sync.ingest import Job, prepare
from contextgraph.sync.scan import scan


def stored(graph: ContextGraph) -> dict[str, tuple[str | None, str | None, str | None]]:
    with db.read(graph.engine) as conn:
        rows = conn.execute(text("SELECT path, title, facts, warning FROM files"))
        return {r[0]: (r[1], r[2], r[3]) for r in rows}


def test_a_title_spelled_with_surrogate_escapes_stops_no_sync(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("emoji.md", '---\ntitle: "Party \\uD83C\\uDF89 \\uD800"\n---\nbody [[Party]]\n')
    write("ok.md", "ok [[Fine]]\n")
    report = store.sync([vault])
    assert report.added == 2 and not report.failed
    assert stored(store)["emoji.md"][0] == "Party \U0001f389 \ufffd"
    assert store.read("emoji.md").title == "Party \U0001f389 \ufffd"


def test_a_code_file_renamed_to_another_language_is_parsed_as_that_language(
    store: ContextGraph, vault: Path, write: Writer, tmp_path: Path
) -> None:
    write("tool.py", "def pyfunc():\n    pass\n")
    store.sync([vault])
    (vault / "tool.py").rename(vault / "tool.js")
    report = store.sync()
    assert report.renamed == 1
    facts, warning = stored(store)["tool.js"][1:]
    assert facts is None and warning is not None and "does not parse" in warning
    with ContextGraph.open(tmp_path / "fresh.db", settings=store.settings) as fresh:
        fresh.sync([vault])
        assert snapshot(store) == snapshot(fresh)


def test_a_file_swapped_for_a_link_out_of_the_source_after_the_scan_is_not_read(
    vault: Path, write: Writer, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("TOPSECRETTOKEN [[Leak]]\n", encoding="utf-8")
    note = write("n.md", "fine [[Fine]]\n")
    (found,) = scan(vault).files
    note.unlink()
    note.symlink_to(secret)  # swapped between the scan and the read
    job = Job(found.path, found.abspath, found.kind, None, 1 << 20, os.path.realpath(vault))
    result = prepare(job)
    assert (result.status, result.reason) == ("failed", "leads out of the source folder")
    os.remove(note)
    os.symlink(vault / "inside.md", note)  # a link that stays inside is read as before
    write("inside.md", "inside [[Fine]]\n")
    assert prepare(job).status == "new"


def test_folders_named_like_virtual_environments_are_synced_unless_they_are_one(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("env/variables.md", "# Environment variables\n[[Deploy]]\n")
    write("venv/notes.md", "[[Deploy]]\n")
    write("real/pyvenv.cfg", "home = /usr/bin\n")
    write("real/lib/readme.md", "[[Deploy]]\n")
    store.sync([vault])
    assert set(stored(store)) == {"env/variables.md", "venv/notes.md"}
    assert store.read("env/variables.md").title == "Environment variables"


# Root reads every folder: as root, the sync runs without the capabilities that allow it.
_AS_USER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


@pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root reads every folder"
)
def test_files_of_a_folder_that_cannot_be_searched_are_reported(
    db_path: Path, vault: Path, write: Writer
) -> None:
    write("top.md", "x [[A]]\n")
    write("locked/n.md", "y [[B]]\n")
    cli = [sys.executable, "-m", "contextgraph", "--db", str(db_path), "sync", "--json"]
    subprocess.run([*cli, str(vault)], check=True, capture_output=True)
    (vault / "locked").chmod(0o600)  # listed, but nothing in it can be looked at
    try:
        run = subprocess.run(
            [*(_AS_USER if os.geteuid() == 0 else []), *cli],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        (vault / "locked").chmod(0o755)
    report = json.loads(run.stdout)
    assert [(p["path"], p["reason"]) for p in report["failed"]] == [
        ("locked/n.md", "cannot stat: Permission denied")
    ]


def test_names_that_are_not_utf8_are_reported_only_for_files_a_sync_would_take(
    vault: Path, write: Writer
) -> None:
    write("ok.md", "[[A]]\n")
    os.close(os.open(os.fsencode(vault) + b"/photo\xe9.png", os.O_CREAT | os.O_WRONLY))
    os.close(os.open(os.fsencode(vault) + b"/note\xe9.md", os.O_CREAT | os.O_WRONLY))
    os.mkdir(os.fsencode(vault) + b"/dir\xe9")
    result = scan(vault)
    assert [f.path for f in result.files] == ["ok.md"]
    assert sorted(result.problems) == [
        ("dir?", "folder name is not valid UTF-8"),
        ("note?.md", "file name is not valid UTF-8"),
    ]


def test_a_source_folder_whose_path_is_not_utf8_is_refused_in_one_line(
    store: ContextGraph, tmp_path: Path
) -> None:
    folder = os.fsencode(tmp_path) + b"/notes\xff"
    os.mkdir(folder)
    with pytest.raises(SourceError, match="not valid UTF-8"):
        store.sync([os.fsdecode(folder)])


@pytest.mark.parametrize("name", ["~draft.md", "C:notes.md", "100%25.md", "~/t.md", "x\\..\\y.md"])
def test_read_serves_the_uri_search_gives_for_names_a_typed_path_may_not_take(
    store: ContextGraph, vault: Path, write: Writer, name: str
) -> None:
    write(name, "odd name [[Odd]]\n")
    store.sync([vault])
    (hit,) = store.search("odd").hits
    assert hit.uri == f"memory://vault/{name}"
    assert store.read(hit.uri).content == "odd name [[Odd]]\n"
    if "/" in name:
        folder = name.rsplit("/", 1)[0]
        assert [h.uri for h in store.search("odd", folder=folder).hits] == [hit.uri]


def test_a_word_in_capitals_and_a_whole_query_word_are_marked_whole() -> None:
    cases = {
        "TOPSECRETTOKEN": ("a TOPSECRETTOKEN b", "TOPSECRETTOKEN"),
        "postgresql": ("use PostgreSQL now", "PostgreSQL"),
        "validate": ("ValidationError here", "Validation"),
        # Words the Porter-stemmed index matched only through the stem.
        "running": ("We run the tests nightly.", "run"),
        "boxes": ("Put it in the box.", "box"),
        "mapped": ("a map of it", "map"),
    }
    for query, (body, marked) in cases.items():
        spans = Highlighter(query_terms(query)).spans(body)
        assert [body[a:b] for a, b in spans] == [marked], query


def test_a_source_folder_with_a_line_break_is_shown_on_one_line(
    db_path: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "my\nnotes"
    folder.mkdir()
    (folder / "a.md").write_text("[[A]]\n", encoding="utf-8")
    cli = [sys.executable, "-m", "contextgraph", "--db", str(db_path)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], capture_output=True, text=True, check=False)

    assert run("sync", str(folder), "--name", "notes").returncode == 0
    for command in ("sources", "stats"):
        out = run(command).stdout
        assert "my\\nnotes" in out and "my\nnotes" not in out, command
    shutil.rmtree(folder)
    missing = run("sync")
    assert missing.returncode == 1
    said = [line for line in missing.stderr.splitlines() if "my" in line]
    assert said and all("my\\nnotes" in line for line in said), missing.stderr
