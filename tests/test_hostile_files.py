"""Hostile files in a vault (SPEC §2, §3): the sync completes, reports or handles each one, and
loses nothing else.

Every test puts one kind of bad file next to a normal note (``control.md``) and checks that the
sync finished, that the control note keeps its concepts, that ``doctor()`` is ok, that a second
sync has nothing to do and that the store equals a from-scratch sync of the same files.
"""

from __future__ import annotations

import os
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import Writer, snapshot
from sqlalchemy import text

from contextgraph import ContextGraph, NotFound, UnsafePath
from contextgraph.store import db
from contextgraph.sync import ingest
from contextgraph.sync import run as sync_module
from contextgraph.sync.run import SyncReport
from contextgraph.sync.scan import ScanResult, scan

CONTROL = "[[Control Alpha]] and [[Control Beta]] stay together."


@pytest.fixture
def control(write: Writer) -> Path:
    return write("control.md", CONTROL)


def concepts_of(graph: ContextGraph, path: str) -> set[str]:
    with db.read(graph.engine) as conn:
        rows = conn.execute(
            text(
                "SELECT e.key FROM mentions m JOIN entities e ON e.id = m.concept_id"
                " JOIN files f ON f.id = m.file_id WHERE f.path = :p"
            ),
            {"p": path},
        )
        return {r[0] for r in rows}


def stored_paths(graph: ContextGraph) -> set[str]:
    with db.read(graph.engine) as conn:
        return {r[0] for r in conn.execute(text("SELECT path FROM files"))}


def reasons(report: SyncReport) -> dict[str, str]:
    return {p.path: p.reason for p in [*report.failed, *report.warnings]}


def assert_sound(graph: ContextGraph, vault: Path, tmp_path: Path) -> None:
    """The control note kept its concepts; the store is consistent, settled and converged."""
    ctx = graph.build_context("Control Alpha")
    assert [(r.name, r.co_occurrence_count) for r in ctx.direct_relations] == [("control-beta", 1)]
    assert ctx.direct_relations[0].files == ("memory://vault/control.md",)
    assert concepts_of(graph, "control.md") == {"control-alpha", "control-beta"}
    assert graph.read("control.md").content == CONTROL
    doctor = graph.doctor()
    assert doctor.ok, doctor.problems
    again = graph.sync()
    assert (again.added, again.updated, again.deleted, again.renamed) == (0, 0, 0, 0)
    with ContextGraph.open(tmp_path / "fresh.db", settings=graph.settings) as fresh:
        fresh.sync([vault])
        assert snapshot(graph) == snapshot(fresh)


# -- encodings and content -------------------------------------------------------------------


def test_an_empty_note_is_taken_with_no_concepts(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "empty.md").write_bytes(b"")
    report = store.sync([vault])
    assert report.added == 2 and report.failed == []
    assert concepts_of(store, "empty.md") == set()
    assert store.read("empty.md").content == ""
    assert_sound(store, vault, tmp_path)


def test_crlf_line_endings_parse_like_lf(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "crlf.md").write_bytes(
        b"---\r\ntitle: Crlf Title\r\ncreated: 2026-01-02\r\n---\r\n"
        b"# Head\r\n[[Crlf A]] and\r\n[[Crlf B]]\r\n[[Not\r\nALink]] [[Cr\rOnly]]\r\n"
        b"```\r\n[[In Code]]\r\n```\r\n"
    )
    report = store.sync([vault])
    assert report.failed == []
    assert concepts_of(store, "crlf.md") == {"crlf-a", "crlf-b"}
    note = store.read("crlf.md")
    assert note.title == "Crlf Title"
    assert note.created is not None and note.created.startswith("2026-01-02")
    assert_sound(store, vault, tmp_path)


def test_a_byte_order_mark_does_not_hide_the_frontmatter(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    bom = "\ufeff---\ntitle: Bom Title\ntags: [[[Not In Frontmatter]]]\n---\n[[Bom A]] [[Bom B]]\n"
    (vault / "bom.md").write_bytes(bom.encode())
    report = store.sync([vault])
    assert report.failed == []
    assert concepts_of(store, "bom.md") == {"bom-a", "bom-b"}
    note = store.read("bom.md")
    assert note.title == "Bom Title"
    assert not note.content.startswith("\ufeff")
    assert_sound(store, vault, tmp_path)


def test_invalid_utf8_is_decoded_with_replacement_and_warned(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "latin.md").write_bytes(b"[[Caf\xe9 Noir]] [[Valid Link]] \xff\xfe\xc3(")
    report = store.sync([vault])
    assert report.failed == []
    assert "UTF-8" in reasons(report)["latin.md"]
    assert concepts_of(store, "latin.md") == {"caf\ufffd-noir", "valid-link"}
    assert_sound(store, vault, tmp_path)


def test_a_note_with_nul_bytes_fails_as_binary(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "nul.md").write_bytes(b"[[Nul A]] text\x00more [[Nul B]]")
    report = store.sync([vault])
    assert "binary" in {p.path: p.reason for p in report.failed}["nul.md"]
    assert "nul.md" not in stored_paths(store)
    assert store.build_context("Nul A").direct_relations == ()
    assert_sound(store, vault, tmp_path)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,
        b"\x7fELF\x02\x01\x01\x00" + os.urandom(4096),
        os.urandom(8192) + b"\x00",
    ],
    ids=["png", "elf", "random"],
)
def test_a_binary_file_renamed_md_fails_as_binary(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path, payload: bytes
) -> None:
    (vault / "picture.md").write_bytes(payload)
    report = store.sync([vault])
    assert "binary" in {p.path: p.reason for p in report.failed}["picture.md"]
    assert stored_paths(store) == {"control.md"}
    assert_sound(store, vault, tmp_path)


def test_a_note_that_turns_binary_is_retracted(
    store: ContextGraph, vault: Path, control: Path, write: Writer, tmp_path: Path
) -> None:
    note = write("turns.md", "[[Control Alpha]] [[Was Here]]")
    store.sync([vault])
    assert concepts_of(store, "turns.md") == {"control-alpha", "was-here"}
    note.write_bytes(b"\x00\x01[[Control Alpha]] [[Was Here]]")
    report = store.sync()
    assert "binary" in {p.path: p.reason for p in report.failed}["turns.md"]
    assert "turns.md" not in stored_paths(store)
    assert store.build_context("Was Here").direct_relations == ()
    assert_sound(store, vault, tmp_path)


def test_a_50_mib_note_fails_over_the_size_limit_without_being_read(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    big = vault / "big.md"
    with open(big, "wb") as handle:  # sparse: 50 MiB in no time and no disk
        handle.write(b"[[Big A]] [[Big B]]\n")
        handle.truncate(50 * 1024 * 1024)
    started = time.monotonic()
    report = store.sync([vault])
    assert time.monotonic() - started < 20
    assert "larger than" in {p.path: p.reason for p in report.failed}["big.md"]
    assert "big.md" not in stored_paths(store)
    assert_sound(store, vault, tmp_path)


def test_a_note_that_grows_over_the_limit_is_retracted(
    store: ContextGraph, vault: Path, control: Path, write: Writer, tmp_path: Path
) -> None:
    note = write("grows.md", "[[Control Alpha]] [[Grows]]")
    store.sync([vault])
    with open(note, "ab") as handle:
        handle.truncate(11 * 1024 * 1024)
    report = store.sync()
    assert "larger than" in {p.path: p.reason for p in report.failed}["grows.md"]
    assert "grows.md" not in stored_paths(store)
    assert_sound(store, vault, tmp_path)


def test_a_note_with_100000_links_keeps_its_mentions_but_adds_no_pairs(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    links = " ".join(f"[[Many {i % 1500}]]" for i in range(100_000))
    (vault / "many.md").write_text(links + " [[Control Alpha]]", encoding="utf-8")
    report = store.sync([vault])
    assert report.failed == []
    assert "concepts" in reasons(report)["many.md"]
    assert len(concepts_of(store, "many.md")) == 1501
    assert store.build_context("Many 7").direct_relations == ()  # no pairs from that file
    assert_sound(store, vault, tmp_path)


@pytest.mark.slow
def test_a_note_with_100000_distinct_links_keeps_its_mentions(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "many.md").write_text(
        " ".join(f"[[Distinct {i}]]" for i in range(100_000)), encoding="utf-8"
    )
    report = store.sync([vault])
    assert "concepts" in reasons(report)["many.md"]
    assert len(concepts_of(store, "many.md")) == 100_000
    assert_sound(store, vault, tmp_path)


# -- brackets and link targets -----------------------------------------------------------------


def test_nested_and_unclosed_brackets(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "brackets.md").write_text(
        "[[a [[b]] c]]\n[[unclosed\n[[also unclosed [[inner]]]\n[[[triple]]]\n"
        "]]closing first[[\n[[ok|alias [[x]]\n[[]] [[ ]] [[|]] [[#]]\n",
        encoding="utf-8",
    )
    report = store.sync([vault])
    assert report.failed == []
    # [[b]] and [[x]] are links (nothing but spaces and line ends around them); [[#]] keeps its
    # "#" (nothing follows it); the empty ones and everything touching a third bracket are not.
    assert concepts_of(store, "brackets.md") == {"b", "x", "#"}
    assert_sound(store, vault, tmp_path)


def test_a_10_kb_link_target_is_dropped_and_counted(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "long.md").write_text(
        f"[[{'t' * 10_000}]] [[{'word ' * 2000}]] [[Short One]]", encoding="utf-8"
    )
    report = store.sync([vault])
    assert report.dropped_links >= 2
    assert concepts_of(store, "long.md") == {"short-one"}
    assert_sound(store, vault, tmp_path)


def test_rtl_text_in_link_targets_is_kept(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "rtl.md").write_text(
        "שלום [[שלום עולם]] ו-[[مرحبا بالعالم]] and [[\u202eevil.exe]]", encoding="utf-8"
    )
    report = store.sync([vault])
    assert report.failed == []
    assert concepts_of(store, "rtl.md") == {"שלום-עולם", "مرحبا-بالعالم", "\u202eevil.exe"}
    names = {r.name for r in store.build_context("שלום עולם").direct_relations}
    assert names == {"مرحبا-بالعالم", "\u202eevil.exe"}
    picture = store.visualize("שלום עולם")
    assert picture.startswith("flowchart") and picture.count(" --") >= 2
    assert store.search("שלום").total == 1
    assert_sound(store, vault, tmp_path)


def test_combining_and_zero_width_characters_in_link_targets(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    (vault / "marks.md").write_text(
        "[[Cafe\u0301]] [[Café]] [[zero\u200bwidth]] [[zerowidth]] [[joi\u200dner]]",
        encoding="utf-8",
    )
    report = store.sync([vault])
    assert report.failed == []
    found = concepts_of(store, "marks.md")
    assert "café" in found and "cafe\u0301" not in found  # NFC: one concept for both spellings
    assert {"zero\u200bwidth", "zerowidth", "joi\u200dner"} <= found
    ctx = store.build_context("Cafe\u0301")  # a query is normalised the same way
    assert ctx.concept_name == "café" and len(ctx.direct_relations) == len(found) - 1
    assert_sound(store, vault, tmp_path)


# -- names and paths ---------------------------------------------------------------------------


def test_deep_nesting_of_100_folders(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    deep = vault.joinpath(*[f"d{i}" for i in range(100)])
    deep.mkdir(parents=True)
    (deep / "bottom.md").write_text("[[Bottom]] [[Deep Other]]", encoding="utf-8")
    report = store.sync([vault])
    assert report.failed == []
    rel = "/".join(f"d{i}" for i in range(100)) + "/bottom.md"
    assert concepts_of(store, rel) == {"bottom", "deep-other"}
    assert store.read(f"memory://vault/{rel}").content.startswith("[[Bottom]]")
    ctx = store.build_context("Bottom")
    assert ctx.direct_relations[0].files == (f"memory://vault/{rel}",)
    assert_sound(store, vault, tmp_path)


@pytest.mark.parametrize(
    "name",
    ["x" * 252 + ".md", "日" * 84 + ".md"],  # 255 bytes each
    ids=["ascii", "multibyte"],
)
def test_file_names_of_255_bytes(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path, name: str
) -> None:
    assert len(name.encode()) == 255
    (vault / name).write_text("[[Long Name]]", encoding="utf-8")
    report = store.sync([vault])
    assert report.failed == []
    assert concepts_of(store, name) == {"long-name"}
    assert store.read(name).content == "[[Long Name]]"
    assert store.read(f"memory://vault/{name}").path == name
    assert_sound(store, vault, tmp_path)


def test_file_names_with_shell_and_markdown_metacharacters(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    name = "odd <>:\"|?*^#[]%_ ' `$ name.md"
    (vault / name).write_text("[[Odd Name]] searchable", encoding="utf-8")
    report = store.sync([vault])
    assert report.failed == []
    assert concepts_of(store, name) == {"odd-name"}
    note = store.read(f"memory://vault/{name}")
    assert note.content.startswith("[[Odd Name]]")
    hits = store.search("searchable").hits
    assert [h.uri for h in hits] == [f"memory://vault/{name}"]
    assert_sound(store, vault, tmp_path)


def test_a_file_name_with_a_backslash_is_served_by_its_own_uri(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    name = "back\\slash.md"  # a legal POSIX file name, not a folder
    (vault / name).write_text("[[Backslash]] findme", encoding="utf-8")
    store.sync([vault])
    assert concepts_of(store, name) == {"backslash"}
    [hit] = store.search("findme").hits
    assert hit.uri == f"memory://vault/{name}"
    assert store.read(hit.uri).content == "[[Backslash]] findme"
    assert_sound(store, vault, tmp_path)


def test_nfc_and_nfd_twin_file_names_are_two_files(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    nfc = unicodedata.normalize("NFC", "café.md")
    nfd = unicodedata.normalize("NFD", "café.md")
    (vault / nfc).write_text("[[Composed]]", encoding="utf-8")
    (vault / nfd).write_text("[[Decomposed]]", encoding="utf-8")
    if len(os.listdir(vault)) != 3:
        pytest.skip("this file system folds NFC and NFD names together")
    report = store.sync([vault])
    assert report.failed == [] and report.added == 3
    assert concepts_of(store, nfc) == {"composed"}
    assert concepts_of(store, nfd) == {"decomposed"}
    assert store.read(f"memory://vault/{nfc}").content == "[[Composed]]"
    assert store.read(f"memory://vault/{nfd}").content == "[[Decomposed]]"
    assert_sound(store, vault, tmp_path)


def test_symlink_loops_end_and_visit_each_note_once(
    store: ContextGraph, vault: Path, control: Path, write: Writer, tmp_path: Path
) -> None:
    write("sub/inner.md", "[[Inner]] [[Inner Two]]")
    os.symlink(".", vault / "self")
    os.symlink("..", vault / "sub" / "up")
    os.symlink("loop-b.md", vault / "loop-a.md")
    os.symlink("loop-a.md", vault / "loop-b.md")
    started = time.monotonic()
    report = store.sync([vault])
    assert time.monotonic() - started < 20
    assert stored_paths(store) == {"control.md", "sub/inner.md"}
    assert report.scanned == 2
    assert store.build_context("Inner").direct_relations[0].co_occurrence_count == 1
    assert_sound(store, vault, tmp_path)


def test_symlinks_out_of_the_source_are_not_followed(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("[[Secret Concept]] [[Control Alpha]]", encoding="utf-8")
    os.symlink(outside / "secret.md", vault / "secret-link.md")
    os.symlink(outside, vault / "outside-dir")
    os.symlink("/etc", vault / "etc")
    report = store.sync([vault])
    assert stored_paths(store) == {"control.md"}
    assert report.scanned == 1
    assert store.build_context("Secret Concept").direct_relations == ()
    for identifier in ("secret-link.md", "outside-dir/secret.md", "etc/passwd"):
        with pytest.raises((NotFound, UnsafePath)):
            store.read(identifier)
    assert_sound(store, vault, tmp_path)


def test_a_note_replaced_by_a_symlink_out_of_the_source_is_not_served(
    store: ContextGraph, vault: Path, control: Path, write: Writer, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("top secret", encoding="utf-8")
    note = write("swap.md", "[[Swap]]")
    store.sync([vault])
    note.unlink()
    os.symlink(outside, note)  # swapped after the sync: the store still lists swap.md
    with pytest.raises(UnsafePath):
        store.read("swap.md")
    store.sync()
    assert "swap.md" not in stored_paths(store)
    assert_sound(store, vault, tmp_path)


def test_dangling_symlinks_are_skipped(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    os.symlink(vault / "nowhere.md", vault / "dangling.md")
    os.symlink(vault / "no-folder", vault / "dangling-dir")
    report = store.sync([vault])
    assert stored_paths(store) == {"control.md"}
    assert report.scanned == 1
    assert_sound(store, vault, tmp_path)


# -- unreadable and changing files -------------------------------------------------------------


def test_an_unreadable_file_is_reported(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    locked = vault / "locked.md"
    locked.write_text("[[Locked Away]]", encoding="utf-8")
    locked.chmod(0)
    try:
        try:
            locked.read_bytes()
        except PermissionError:
            pass
        else:
            pytest.skip("running as root: chmod 000 does not stop reads (see the monkeypatch test)")
        report = store.sync([vault])
        assert "unreadable" in {p.path: p.reason for p in report.failed}["locked.md"]
        assert "locked.md" not in stored_paths(store)
    finally:
        locked.chmod(0o644)


def test_a_file_that_cannot_be_opened_is_reported_and_retracted(
    store: ContextGraph,
    vault: Path,
    control: Path,
    write: Writer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    note = write("locked.md", "[[Locked Away]] [[Control Alpha]]")
    store.sync([vault])
    assert concepts_of(store, "locked.md") == {"locked-away", "control-alpha"}
    note.write_text("[[Locked Away]] [[Control Alpha]] edited", encoding="utf-8")
    real_open = ingest.nonblocking  # what a sync opens every file it reads with

    def refusing_open(path: str, flags: int) -> int:
        if path.endswith("locked.md"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags)

    monkeypatch.setattr(ingest, "nonblocking", refusing_open)
    report = store.sync()
    assert "unreadable" in {p.path: p.reason for p in report.failed}["locked.md"]
    assert "locked.md" not in stored_paths(store)  # as a fresh sync would have it
    assert store.build_context("Locked Away").direct_relations == ()
    monkeypatch.undo()
    report = store.sync()
    assert report.added == 1 and report.failed == []
    assert concepts_of(store, "locked.md") == {"locked-away", "control-alpha"}


def _scan_then(action: Callable[[], object]) -> Callable[..., ScanResult]:
    """The sync's ``scan``, followed by ``action`` (between the listing and the reads)."""

    def scan_then(root: Path, **kwargs: Any) -> ScanResult:
        result = scan(root, **kwargs)
        action()
        return result

    return scan_then


def test_a_file_deleted_between_scan_and_read_is_reported_as_vanished(
    store: ContextGraph,
    vault: Path,
    control: Path,
    write: Writer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doomed = write("doomed.md", "[[Doomed]] [[Control Alpha]]")
    new = write("new-doomed.md", "[[New Doomed]]")

    def delete_both() -> None:
        doomed.unlink()
        new.unlink()

    monkeypatch.setattr(sync_module, "scan", _scan_then(delete_both))
    report = store.sync([vault])
    failed = {p.path: p.reason for p in report.failed}
    assert "vanished" in failed["doomed.md"] and "vanished" in failed["new-doomed.md"]
    assert stored_paths(store) == {"control.md"}
    monkeypatch.undo()
    assert_sound(store, vault, tmp_path)


def test_a_known_file_deleted_between_scan_and_read_is_retracted(
    store: ContextGraph,
    vault: Path,
    control: Path,
    write: Writer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doomed = write("doomed.md", "[[Doomed]] [[Control Alpha]]")
    store.sync([vault])
    doomed.write_text("[[Doomed]] [[Control Alpha]] changed", encoding="utf-8")
    monkeypatch.setattr(sync_module, "scan", _scan_then(doomed.unlink))
    report = store.sync()
    assert "vanished" in {p.path: p.reason for p in report.failed}["doomed.md"]
    assert stored_paths(store) == {"control.md"}
    assert store.build_context("Doomed").direct_relations == ()
    monkeypatch.undo()
    assert_sound(store, vault, tmp_path)


@pytest.mark.parametrize("same_size", [False, True], ids=["new-size", "same-size"])
def test_a_file_rewritten_between_scan_and_read_stores_what_was_read(
    store: ContextGraph,
    vault: Path,
    control: Path,
    write: Writer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    same_size: bool,
) -> None:
    note = write("moving.md", "[[Before One]] [[Before Two]]")
    store.sync([vault])
    note.write_text("[[Middle One]] [[Middle Two]]", encoding="utf-8")
    after = "[[After One]] [[After Two]]" if same_size else "[[After]] [[Much Longer Target]]"
    monkeypatch.setattr(
        sync_module, "scan", _scan_then(lambda: note.write_text(after, encoding="utf-8"))
    )
    store.sync()
    expected = {"after-one", "after-two"} if same_size else {"after", "much-longer-target"}
    assert concepts_of(store, "moving.md") == expected
    monkeypatch.undo()
    assert_sound(store, vault, tmp_path)


@pytest.mark.slow
def test_ten_thousand_files_in_one_folder(
    store: ContextGraph, vault: Path, control: Path, tmp_path: Path
) -> None:
    folder = vault / "flat"
    folder.mkdir()
    for i in range(10_000):
        (folder / f"n{i:05d}.md").write_text(f"[[Flat {i % 50}]] [[Flat Hub]]", encoding="utf-8")
    report = store.sync([vault])
    assert report.added == 10_001 and report.failed == []
    hub = store.build_context("Flat Hub", max_entities=100)
    assert len(hub.direct_relations) == 50
    assert all(r.co_occurrence_count == 200 for r in hub.direct_relations)
    assert_sound(store, vault, tmp_path)


def test_a_note_replaced_by_a_named_pipe_is_refused_not_waited_on(
    store: ContextGraph, vault: Path, control: Path, write: Writer, tmp_path: Path
) -> None:
    """Opening a FIFO for reading waits for a writer, forever: read, edit and the other note
    writes must see it is no regular file instead (the sync already skips it)."""
    import threading

    from contextgraph import ContextGraphError

    note = write("pipe.md", "[[Pipe]] [[Flow]]")
    store.sync([vault])
    note.unlink()
    os.mkfifo(note)  # swapped after the sync: the store still lists pipe.md
    calls: dict[str, Callable[[], Any]] = {
        "read": lambda: store.read("pipe.md"),
        "edit": lambda: store.edit_note("pipe.md", "append", content="more"),
        "write": lambda: store.write_note("pipe.md", "new", overwrite=True),
    }
    outcome: dict[str, str] = {}

    def attempt(name: str, call: Callable[[], Any]) -> None:
        try:
            call()
            outcome[name] = "answered"
        except ContextGraphError as exc:
            outcome[name] = f"refused: {exc}"

    for name, call in calls.items():
        worker = threading.Thread(target=attempt, args=(name, call), daemon=True)
        worker.start()
        worker.join(20)
        if worker.is_alive():  # free the stuck open() before failing
            os.close(os.open(note, os.O_WRONLY | os.O_NONBLOCK))
            worker.join(5)
            outcome[name] = "hung on the pipe"
    assert {k: v.startswith("refused") for k, v in outcome.items()} == dict.fromkeys(calls, True)
    assert outcome["read"].endswith("not a regular file"), outcome
    store.sync()
    assert "pipe.md" not in stored_paths(store)
    assert_sound(store, vault, tmp_path)


def test_a_file_swapped_for_a_named_pipe_between_scan_and_read_fails_without_a_hang(
    store: ContextGraph,
    vault: Path,
    control: Path,
    write: Writer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scan saw a regular file; the read meets a FIFO, whose open would wait for a writer
    while the sync holds its lock."""
    import threading

    piped = write("piped.md", "[[Piped]] [[Control Alpha]]")

    def swap() -> None:
        piped.unlink()
        os.mkfifo(piped)

    monkeypatch.setattr(sync_module, "scan", _scan_then(swap))
    reports: list[SyncReport] = []
    worker = threading.Thread(target=lambda: reports.append(store.sync([vault])), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # free the stuck open() before failing
        os.close(os.open(piped, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(30)
        pytest.fail("the sync hung on the named pipe")
    failed = {p.path: p.reason for p in reports[0].failed}
    assert "not a regular file" in failed["piped.md"]
    assert stored_paths(store) == {"control.md"}
    monkeypatch.undo()
    assert_sound(store, vault, tmp_path)
