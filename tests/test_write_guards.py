"""Writing notes (SPEC §14): what must stop a write before any file changes, and what a write
must leave on disk, found by a hunt for hostile inputs (stop 41)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import snapshot

from contextgraph import ContextGraph, InvalidArgument, NotFound, Settings, UnsafePath
from contextgraph.errors import ContextGraphError, ReadOnlyDatabase, SourceError
from contextgraph.store import db
from contextgraph.sync import writing

pytestmark = pytest.mark.engines("sqlite")


@pytest.fixture
def graph(db_path: Path, vault: Path) -> Iterator[ContextGraph]:
    (vault / "seed.md").write_text("Seed [[Alpha]] [[Beta]]\n", encoding="utf-8")
    (vault / "other.md").write_text("Other [[Beta]]\n", encoding="utf-8")
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
        yield graph


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def fresh_snapshot(vault: Path, tmp_path: Path) -> dict[str, object]:
    with ContextGraph.open(tmp_path / "fresh.db") as fresh:
        fresh.sync([vault])
        return snapshot(fresh)


def test_a_read_only_database_refuses_every_write_before_touching_a_file(
    graph: ContextGraph, db_path: Path, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph.close()
    before = files_of(vault)
    monkeypatch.setattr(db, "_writable", lambda _path: False)  # the tests run as root
    with ContextGraph.open(db_path) as read_only:
        assert read_only.read_only
        calls = [
            lambda: read_only.write_note("new.md", "[[Gamma]]\n"),
            lambda: read_only.write_note("seed.md", "gone\n", overwrite=True),
            lambda: read_only.edit_note("seed.md", "append", content="more"),
            lambda: read_only.move_note("seed.md", "moved.md"),
            lambda: read_only.delete_note("seed.md"),
        ]
        for call in calls:
            with pytest.raises(ReadOnlyDatabase, match="read-only: cannot write notes"):
                call()
    assert files_of(vault) == before


def test_the_title_a_write_adds_counts_toward_the_size_cap(
    db_path: Path, vault: Path, tmp_path: Path
) -> None:
    with ContextGraph.open(db_path, settings=Settings(max_file_bytes=200)) as graph:
        graph.sync([vault])
        first = graph.write_note("a:b", "short [[Alpha]]\n")
        assert first.path == "a-b.md"
        kept = (vault / "a-b.md").read_bytes()
        with pytest.raises(InvalidArgument, match="over 200 bytes"):
            graph.write_note("a:b", "x" * 190, overwrite=True)  # 190 + the title: over 200
        assert (vault / "a-b.md").read_bytes() == kept
        assert graph.read("a:b").hash == first.hash
        assert snapshot(graph) == fresh_snapshot(vault, tmp_path)


def test_a_symlinked_note_is_not_edited_moved_or_deleted(
    graph: ContextGraph, vault: Path, tmp_path: Path
) -> None:
    (vault / "alias.md").symlink_to("seed.md")
    graph.sync()
    before = files_of(vault)
    with pytest.raises(UnsafePath, match="is a symlink"):
        graph.edit_note("alias.md", "append", content="[[Gamma]]")
    with pytest.raises(UnsafePath, match="is a symlink"):
        graph.move_note("alias.md", "elsewhere/alias.md")
    with pytest.raises(UnsafePath, match="is a symlink"):
        graph.delete_note("alias.md")
    assert files_of(vault) == before and (vault / "alias.md").is_symlink()
    assert snapshot(graph) == fresh_snapshot(vault, tmp_path)


def test_a_write_into_a_source_whose_folder_is_gone_creates_nothing(
    graph: ContextGraph, vault: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "moved-away"
    vault.rename(moved)
    for call in (
        lambda: graph.write_note("deep/new.md", "[[Gamma]]\n"),
        lambda: graph.write_note("new.md", "[[Gamma]]\n"),
        lambda: graph.edit_note("seed.md", "append", content="x"),
    ):
        with pytest.raises(SourceError, match="is gone: restore it"):
            call()
    assert not vault.exists()  # never created again, so it can be put back
    assert sorted(p.name for p in moved.iterdir()) == ["other.md", "seed.md"]


def test_new_notes_follow_the_umask(graph: ContextGraph, vault: Path) -> None:
    (vault / "shared.md").write_text("[[Alpha]]\n", encoding="utf-8")
    (vault / "shared.md").chmod(0o640)
    graph.sync()
    previous = os.umask(0o077)
    try:
        graph.write_note("private.md", "[[Alpha]]\n")
        graph.write_note("shared.md", "[[Beta]]\n", overwrite=True)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((vault / "private.md").stat().st_mode) == 0o600
    assert stat.S_IMODE((vault / "shared.md").stat().st_mode) == 0o640  # a replaced file's own


def test_a_byte_order_mark_stays_first_through_edits(
    graph: ContextGraph, vault: Path, tmp_path: Path
) -> None:
    note = vault / "bom.md"
    note.write_text("\ufeff---\ntitle: Bommy\n---\n# Status\nold [[Alpha]]\n", encoding="utf-8")
    graph.sync()
    graph.edit_note("Bommy", "prepend", content="[[Gamma]] first")
    graph.edit_note("Bommy", "replace_section", heading="Status", content="new [[Beta]]")
    assert note.read_text(encoding="utf-8") == (
        "\ufeff---\ntitle: Bommy\n---\n[[Gamma]] first\n# Status\nnew [[Beta]]\n"
    )
    assert graph.read("Bommy").path == "bom.md"
    assert snapshot(graph) == fresh_snapshot(vault, tmp_path)


def test_no_write_goes_where_a_sync_does_not_look(graph: ContextGraph, vault: Path) -> None:
    (vault / "tools").mkdir()
    (vault / "tools" / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    with pytest.raises(UnsafePath, match="a sync does not look inside"):
        graph.write_note("tools/note.md", "[[Gamma]]\n")
    with pytest.raises(UnsafePath, match="a sync does not look inside"):
        graph.move_note("seed.md", "tools/seed.md")
    assert sorted(p.name for p in (vault / "tools").iterdir()) == ["pyvenv.cfg"]
    assert (vault / "seed.md").is_file()


@pytest.mark.parametrize("title", ["~draft", "Sale 50%25 off", "v1%2e2 notes", "Q: what now"])
def test_a_title_no_path_could_name_is_read_and_edited_by_its_title(
    graph: ContextGraph, vault: Path, title: str
) -> None:
    written = graph.write_note(title, "[[Gamma]] body\n")
    assert not written.path.startswith("~") and "%2" not in written.path.lower()
    assert graph.read(title).path == written.path
    edited = graph.edit_note(title, "append", content="[[Delta]]")
    assert edited.concepts == ("delta", "gamma")
    graph.delete_note(title)
    assert not (vault / written.path).exists()


def test_paths_that_are_refused_stay_refused_when_no_title_matches(graph: ContextGraph) -> None:
    for path in ("/etc/passwd", "~/secret.md", "C:/x.md", "a/%2e%2e/b.md"):
        with pytest.raises(UnsafePath):
            graph.read(path)


def test_a_file_system_refusal_is_a_clear_error(graph: ContextGraph, vault: Path) -> None:
    (vault / "afile").write_text("not a folder\n", encoding="utf-8")
    with pytest.raises(ContextGraphError) as raised:
        graph.move_note("seed.md", "afile/seed.md")
    assert "afile" in str(raised.value) and "Errno" not in str(raised.value)
    with pytest.raises(ContextGraphError):
        graph.write_note("afile/new.md", "[[Gamma]]\n")
    assert (vault / "seed.md").is_file()


def test_a_source_removed_while_a_write_waited_for_the_lock_loses_no_file(
    graph: ContextGraph, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = writing.lock_database

    @contextmanager
    def removed_first(engine: object, *, wait: bool = True) -> Iterator[None]:
        monkeypatch.setattr(writing, "lock_database", taken)  # the removal takes the lock too
        graph.remove_source("vault")  # what another process did just before
        with taken(engine, wait=wait):  # type: ignore[arg-type]
            yield

    monkeypatch.setattr(writing, "lock_database", removed_first)
    with pytest.raises(NotFound):
        graph.delete_note("seed.md")
    assert (vault / "seed.md").read_text(encoding="utf-8") == "Seed [[Alpha]] [[Beta]]\n"


def test_a_move_after_an_edit_on_disk_keeps_the_reads(graph: ContextGraph, vault: Path) -> None:
    graph.read("seed.md", now="2026-11-29T00:00:00Z")
    (vault / "seed.md").write_text("Seed [[Alpha]] [[Gamma]]\n", encoding="utf-8")  # not synced
    moved = graph.move_note("seed.md", "kept/seed.md")
    assert moved.action == "moved" and moved.concepts == ("alpha", "gamma")
    again = graph.read("kept/seed.md", now="2026-01-01T00:00:00Z")  # a read never goes back
    assert again.last_accessed is not None and again.last_accessed.startswith("2026-11-29")


def test_an_edit_that_changes_nothing_still_reads_a_file_changed_on_disk(
    graph: ContextGraph, vault: Path, tmp_path: Path
) -> None:
    (vault / "seed.md").write_text("Seed [[Alpha]] [[Delta]]\n", encoding="utf-8")  # not synced
    same = graph.edit_note("seed.md", "replace_text", find="Seed", replace="Seed")
    assert same.action == "unchanged" and same.concepts == ("alpha", "delta")
    assert snapshot(graph) == fresh_snapshot(vault, tmp_path)


def test_a_killed_writes_temporary_file_is_removed_by_the_next_write(
    graph: ContextGraph, vault: Path
) -> None:
    import time

    from contextgraph.sync.atomicfile import LEFTOVER_SECONDS

    stale = vault / ".contextgraph-killed.tmp"  # what a write killed before its rename leaves
    fresh = vault / ".contextgraph-running.tmp"  # a write still under way, elsewhere
    for leftover in (stale, fresh):
        leftover.write_bytes(b"half a note")
    old = time.time() - LEFTOVER_SECONDS - 60
    os.utime(stale, (old, old))
    graph.write_note("next.md", "[[A]]\n")
    assert not stale.exists() and fresh.exists()
