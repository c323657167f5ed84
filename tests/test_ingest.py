"""ingest.prepare: read, hash and extract one file, with no database in sight."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contextgraph import ContextGraph
from contextgraph.notes.wikilinks import MAX_CONCEPT_LENGTH, extract_note
from contextgraph.store.identity import content_hash
from contextgraph.sync.ingest import Job, prepare

LIMIT = 1 << 20


def _job(path: Path, kind: str, known: str | None = None, limit: int = LIMIT) -> Job:
    return Job(path.name, str(path), kind, known, limit)


def test_a_note_is_extracted(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("---\ntitle: T\ncreated: 2026-01-02\n---\n[[A]] [[b]] [[A]]\n", "utf-8")
    p = prepare(_job(note, "note"))
    assert p.status == "new"
    assert p.title == "T"
    assert p.created is not None
    assert dict(p.concepts) == {"a": 2, "b": 1}
    assert p.size == note.stat().st_size and p.hash


def test_an_unchanged_hash_is_same_and_carries_no_text(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("[[a]]", encoding="utf-8")
    first = prepare(_job(note, "note"))
    again = prepare(_job(note, "note", known=first.hash))
    assert again.status == "same"
    assert again.hash == first.hash and again.text is None and again.concepts == ()


def test_files_that_cannot_be_taken_fail_with_a_reason(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_text("x" * 100, encoding="utf-8")
    assert prepare(_job(big, "note", limit=10)).reason == "larger than 10 bytes"
    binary = tmp_path / "b.md"
    binary.write_bytes(b"a\x00b")
    assert prepare(_job(binary, "note")).reason == "binary file (contains NUL bytes)"
    gone = prepare(_job(tmp_path / "missing.md", "note"))
    assert (gone.status, gone.reason) == ("failed", "vanished during the scan")
    (tmp_path / "dir.md").mkdir()
    assert prepare(_job(tmp_path / "dir.md", "note")).reason == "is a folder"


def test_invalid_utf8_and_a_bom_are_handled(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(b"\xef\xbb\xbf[[a]] \xff")
    p = prepare(_job(note, "note"))
    assert p.status == "new"
    assert p.text is not None and not p.text.startswith("\ufeff")
    assert "not valid UTF-8: decoded with replacement characters" in p.warnings


def test_code_that_does_not_parse_is_kept_with_a_warning(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("import os\n\ndef f():\n    return os.sep\n", encoding="utf-8")
    bad.write_text("def (:\n", encoding="utf-8")
    ok = prepare(_job(good, "code"))
    assert ok.status == "new" and ok.facts is not None and ok.warnings == ()
    broken = prepare(_job(bad, "code"))
    assert broken.status == "new" and broken.facts is None
    assert broken.warnings and broken.warnings[0].startswith("does not parse:")


def _reported_size(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Make fstat report ``size`` bytes, as if the file grew (or was empty) after fstat."""
    real = os.fstat

    def fstat(fd: int) -> os.stat_result:
        st = real(fd)
        return os.stat_result((*st[:6], size, *st[7:10]))

    monkeypatch.setattr(os, "fstat", fstat)


def test_the_read_is_what_one_read_of_the_limit_returns(tmp_path: Path) -> None:
    import random

    rng = random.Random(14)
    for size in [0, 1, 2, 4095, 4096, 4097, 65536, 200_003, *rng.sample(range(300_000), 20)]:
        data = bytes(rng.randrange(1, 256) for _ in range(size))
        path = tmp_path / f"f{size}.txt"
        path.write_bytes(data)
        for limit in (size, size + 1, LIMIT):
            p = prepare(_job(path, "other", limit=limit))
            assert p.status == "new" and p.size == size
            assert p.hash == content_hash(data)
        if size:
            assert prepare(_job(path, "other", limit=size - 1)).status == "failed"


def test_a_file_that_grew_after_fstat_is_read_to_its_end_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "n.md"
    body = "[[grown]] " * 500
    note.write_text(body, encoding="utf-8")
    for reported in (0, 1, 10, len(body) - 1):
        _reported_size(monkeypatch, reported)
        p = prepare(_job(note, "note"))
        assert (p.status, p.text, dict(p.concepts)) == ("new", body, {"grown": 500})
        # past the limit while it grew: refused as one read of limit + 1 bytes would see it
        refused = prepare(_job(note, "note", limit=len(body) - 1))
        assert (refused.status, refused.reason) == (
            "failed",
            f"larger than {len(body) - 1} bytes",
        )
        exact = prepare(_job(note, "note", limit=len(body)))
        assert exact.status == "new" and exact.text == body


def test_reads_that_come_back_short_still_read_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read may return fewer bytes than asked (a signal, a network or FUSE file system):
    the file is read on to its end, and its limit still holds."""
    note = tmp_path / "n.md"
    body = "[[short]] reads " * 300
    note.write_text(body, encoding="utf-8")
    real = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real(fd, min(n, 7)))
    p = prepare(_job(note, "note"))
    assert (p.status, p.text, dict(p.concepts)) == ("new", body, {"short": 300})
    refused = prepare(_job(note, "note", limit=len(body) - 1))
    assert (refused.status, refused.reason) == ("failed", f"larger than {len(body) - 1} bytes")


def _fails_on_poison(text: str, max_length: int = MAX_CONCEPT_LENGTH) -> object:
    if "POISON" in text:
        raise IndexError("list index out of range")
    return extract_note(text, max_length)  # the real one: the module's name is what is replaced


def test_an_unexpected_error_in_extraction_fails_that_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("contextgraph.notes.wikilinks.extract_note", _fails_on_poison)
    bad, good = tmp_path / "bad.md", tmp_path / "good.md"
    bad.write_text("[[A]] POISON", encoding="utf-8")
    good.write_text("[[A]] [[B]]", encoding="utf-8")
    failed = prepare(_job(bad, "note"))
    assert failed.status == "failed"
    assert failed.reason == "extraction failed (IndexError: list index out of range)"
    assert failed.text is None and failed.concepts == ()
    assert prepare(_job(good, "note")).status == "new"


def test_a_sync_reports_a_file_whose_extraction_raised_and_takes_it_once_it_extracts(
    store: ContextGraph, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (vault / "bad.md").write_text("[[Alpha]] [[Beta]] POISON", encoding="utf-8")
    (vault / "good.md").write_text("[[Alpha]] [[Gamma]]", encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setattr("contextgraph.notes.wikilinks.extract_note", _fails_on_poison)
        report = store.sync([vault])
    assert report.added == 1
    assert {p.path: p.reason for p in report.failed} == {
        "bad.md": "extraction failed (IndexError: list index out of range)"
    }
    assert [r.name for r in store.build_context("Alpha").direct_relations] == ["gamma"]
    again = store.sync()
    assert (again.added, again.failed) == (1, [])
    assert {r.name for r in store.build_context("Alpha").direct_relations} == {"beta", "gamma"}
