"""Read, hash and extract one file; pure enough to run in a worker process.

Nothing here touches the database: sync hands each changed file to :func:`prepare` (in-process or
in a process pool) and writes the results in short transactions.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Literal, NamedTuple

from contextgraph.graph.searchterms import identifier_parts, meta_terms_of
from contextgraph.limits import MAX_CONCEPT_LENGTH
from contextgraph.store.identity import content_hash, nonblocking
from contextgraph.sync.scan import ScannedFile, inside

if TYPE_CHECKING:
    from contextgraph.settings import Settings

Status = Literal["new", "same", "failed"]
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: bytes as they are, no line ends translated


class Job(NamedTuple):
    """One file to look at; ``known_hash`` is what the store has (None for a new file).

    Jobs and results are named tuples, not frozen dataclasses: they cross between processes by
    the ten thousand, and the process that writes unpickles a tuple faster (bench.py's 13,415
    results: 0.07 against 0.11 s CPU).
    """

    path: str
    abspath: str
    kind: str
    known_hash: str | None
    max_bytes: int
    root: str | None = None  # the source's real folder: what is read must lie inside it
    max_concept_length: int = MAX_CONCEPT_LENGTH  # the setting: longer names are dropped


def read_job(file: ScannedFile, known_hash: str | None, settings: Settings, real_root: str) -> Job:
    """The job of reading ``file``, found in the source whose real folder is ``real_root``,
    with the limits of ``settings``; ``known_hash``: what the store has of it."""
    return Job(
        file.path,
        file.abspath,
        file.kind,
        known_hash,
        settings.max_file_bytes,
        real_root,
        settings.max_concept_length,
    )


class Prepared(NamedTuple):
    """What :func:`prepare` found: ``status`` is ``new`` (to apply), ``same`` or ``failed``."""

    path: str
    kind: str
    status: Status
    reason: str | None = None
    size: int = 0
    mtime_ns: int = 0
    hash: str | None = None
    text: str | None = None
    title: str | None = None
    created: float | None = None
    concepts: tuple[tuple[str, int], ...] = ()
    dropped: int = 0
    warnings: tuple[str, ...] = ()
    facts: str | None = None  # code facts as JSON; None when the file does not parse
    search_meta: str | None = None  # path words, heading, symbol names (searchterms.meta_terms)
    search_parts: str | None = None  # other spellings of the text's identifiers


def prepare(job: Job) -> Prepared:
    """Read the file behind ``job`` and, if its content changed, extract what it holds."""
    try:
        # Without blocking: a named pipe swapped in since the scan would hold the open (and the
        # sync's lock) until some writer came. A bare descriptor, not a file object: a sync
        # opens every file it reads, and ``open``'s buffered reader cost a cold load of 13,415
        # notes 0.04 s more CPU.
        fd = nonblocking(job.abspath, os.O_RDONLY | _BINARY)
    except FileNotFoundError:
        return Prepared(job.path, job.kind, "failed", "vanished during the scan")
    except IsADirectoryError:
        return Prepared(job.path, job.kind, "failed", "is a folder")
    except OSError as exc:
        return Prepared(job.path, job.kind, "failed", f"unreadable: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return Prepared(job.path, job.kind, "failed", "is a folder")
        if not stat.S_ISREG(st.st_mode):
            return Prepared(job.path, job.kind, "failed", "not a regular file")
        if job.root is not None and not _opened_inside(fd, job.abspath, job.root):
            # The scan took a file inside the source; a link swapped in since leads out.
            return Prepared(job.path, job.kind, "failed", "leads out of the source folder")
        if st.st_size > job.max_bytes:
            return Prepared(job.path, job.kind, "failed", f"larger than {job.max_bytes} bytes")
        # Read what fstat promises plus one byte, not max_bytes + 1: a read of n bytes
        # allocates n bytes before it reads, and with the default 10 MiB limit that allocation
        # cost more CPU than the read (bench.py's 13,415 notes: 0.31 -> 0.10 s). A file that
        # grew since fstat is read on up to the same max_bytes + 1, so ``data`` is what one
        # read of max_bytes + 1 bytes would return.
        data = _read_at_most(fd, st.st_size + 1)
        if len(data) > st.st_size:
            data += _read_at_most(fd, job.max_bytes + 1 - len(data))
    except OSError as exc:
        return Prepared(job.path, job.kind, "failed", f"unreadable: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if len(data) > job.max_bytes:
        return Prepared(job.path, job.kind, "failed", f"larger than {job.max_bytes} bytes")
    digest = content_hash(data)
    size, mtime_ns = st.st_size, st.st_mtime_ns
    if digest == job.known_hash:
        return Prepared(job.path, job.kind, "same", size=size, mtime_ns=mtime_ns, hash=digest)
    if b"\x00" in data:
        return Prepared(job.path, job.kind, "failed", "binary file (contains NUL bytes)")
    try:
        return _extract(job, data, size, mtime_ns, digest)
    except Exception as exc:  # a bug met on hostile content: the file fails, the sync goes on
        reason = f"extraction failed ({type(exc).__name__}: {str(exc)[:200]})"
        return Prepared(job.path, job.kind, "failed", reason)


def _read_at_most(fd: int, size: int) -> bytes:
    """``size`` bytes from ``fd``, fewer only at the end of the file: one read may return
    fewer than asked (a signal, some file systems), so reads go on until ``size`` bytes have
    come or one returns nothing."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)  # one chunk (the usual case) comes back as it is, not copied


def _opened_inside(fd: int, path: str, root: str) -> bool:
    """Whether the file open as ``fd`` (opened by ``path``) lies inside the folder ``root``.

    Linux names the file an open descriptor reads (``/proc/self/fd``), so a link swapped in
    for the file, or for a folder on its path, after the scan cannot lead the read out of the
    source (SPEC §3: never follow a symlink out of the root). Elsewhere the path is resolved
    once more, which leaves only the instant between the open and that resolution.
    """
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
    return inside(real, root)


def _extract(job: Job, data: bytes, size: int, mtime_ns: int, digest: str) -> Prepared:
    """What a changed file holds. The parsers guard against what they know bad input raises
    (markdown-it's, YAML's and the code parsers' errors, too deep nesting); :func:`prepare`
    turns anything else into a failed file (SPEC §3: bad files never stop a sync)."""
    warnings: list[str] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        warnings.append("not valid UTF-8: decoded with replacement characters")
    if text.startswith("\ufeff"):
        text = text[1:]
    common = {
        "size": size,
        "mtime_ns": mtime_ns,
        "hash": digest,
        "text": text,
        "search_parts": identifier_parts(text),
    }
    if job.kind == "note":
        return _prepare_note(job, text, warnings, common)
    if job.kind == "code":
        return _prepare_code(job, text, warnings, common)
    return Prepared(
        job.path,
        job.kind,
        "new",
        warnings=tuple(warnings),
        search_meta=meta_terms_of(job.path, text, ()),
        **common,  # type: ignore[arg-type]
    )


def _prepare_note(job: Job, text: str, warnings: list[str], common: dict[str, object]) -> Prepared:
    from contextgraph.notes.wikilinks import extract_note

    facts = extract_note(text, job.max_concept_length)
    warnings.extend(facts.warnings)
    created = facts.created.timestamp() if facts.created is not None else None
    return Prepared(
        job.path,
        job.kind,
        "new",
        title=facts.title,
        created=created,
        concepts=tuple(facts.concepts.items()),
        dropped=facts.dropped,
        warnings=tuple(warnings),
        search_meta=meta_terms_of(job.path, text, ()),
        **common,  # type: ignore[arg-type]
    )


def _prepare_code(job: Job, text: str, warnings: list[str], common: dict[str, object]) -> Prepared:
    from contextgraph.code import CodeParseError, parse_code

    facts: str | None = None
    symbols: list[str] = []
    try:
        parsed = parse_code(job.path, text)
        facts = parsed.to_json()
        symbols = [s.qualname for s in parsed.symbols]
    except CodeParseError as exc:
        warnings.append(f"does not parse: {exc}")
    except RecursionError:
        warnings.append("does not parse: nested too deeply")
    return Prepared(
        job.path,
        job.kind,
        "new",
        facts=facts,
        warnings=tuple(warnings),
        search_meta=meta_terms_of(job.path, text, symbols),
        **common,  # type: ignore[arg-type]
    )
