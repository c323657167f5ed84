"""The ``ContextGraph`` facade: one object on one database, every operation as a method."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from contextgraph.errors import (
    CorruptDatabase,
    InvalidArgument,
    SourceError,
    UnsafePath,
)
from contextgraph.launch import default_database
from contextgraph.limits import NAME, SYNC_MAX_PATHS, replace_lone_surrogates
from contextgraph.settings import Settings, parse_datetime
from contextgraph.store import db
from contextgraph.store.sources import SourceInfo, get_source, list_sources, register

if TYPE_CHECKING:  # the query modules load on first use: `contextgraph sync` never needs them
    # and sync (scan, extraction, the process pool) loads only for a sync: queries never need it
    from contextgraph.graph.context import Context
    from contextgraph.graph.expand import ExpandResult
    from contextgraph.graph.read import Note
    from contextgraph.graph.retrieve import Retrieval
    from contextgraph.graph.search import SearchResult
    from contextgraph.graph.stats import CommunityListing, DoctorReport, Revision, Stats
    from contextgraph.sync.run import Progress, SyncReport
    from contextgraph.sync.writing import Written


def clean(text: str) -> str:
    """Replace lone surrogates (unencodable in UTF-8, so unbindable in SQLite) with U+FFFD."""
    if not isinstance(text, str):
        raise InvalidArgument(f"expected text, got {type(text).__name__}")
    return replace_lone_surrogates(text)


def clean_name(text: str) -> str:
    """:func:`clean`, and each NUL made U+FFFD: a name or query looked up, never stored. No
    stored name holds a NUL, so such a lookup finds nothing on either engine, where PostgreSQL
    refused the text."""
    return clean(text).replace("\x00", "\ufffd")


class ContextGraph:
    """A knowledge graph stored in one SQLite file; safe to share between processes."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings

    @classmethod
    def open(
        cls,
        path_or_url: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        migrate: bool = True,
        create: bool = True,
    ) -> ContextGraph:
        """Open (creating and migrating as needed) the database at ``path_or_url``.

        ``create=False`` refuses a database file that does not exist (and creates nothing).
        A path is literal (``50%.db``); ``":memory:"`` is a private in-memory database. A
        file this process may not write is opened read-only: reads work, writes are refused.
        """
        chosen = settings or Settings.from_env()
        engine = db.make_engine(
            path_or_url if path_or_url is not None else default_database(),
            busy_timeout_ms=chosen.busy_timeout_ms,
            create=create,
        )
        try:
            if migrate:
                db.upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, chosen)

    @classmethod
    def diagnose(
        cls, path_or_url: str | os.PathLike[str] | None = None, *, settings: Settings | None = None
    ) -> DoctorReport:
        """Run :meth:`doctor` on an existing database, reporting a damaged file as a problem."""
        from contextgraph.graph.stats import DoctorReport

        try:
            graph = cls.open(path_or_url, settings=settings, create=False)
        except CorruptDatabase as exc:
            return DoctorReport.damaged(str(exc))
        with graph:
            return graph.doctor()

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    def __enter__(self) -> ContextGraph:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def database_path(self) -> Path | None:
        return db.database_path(self.engine)

    @property
    def read_only(self) -> bool:
        """Whether the database was opened read-only (reads work, writes are refused)."""
        return db.is_read_only(self.engine)

    def _writable(self, what: str) -> None:
        db.check_writable(self.engine, what)

    def _now(self, now: datetime | str | None) -> float:
        """Epoch seconds of ``now`` (a datetime, an ISO 8601 string, or None for the
        settings' current time); anything else is a clear error, not a stray exception."""
        if isinstance(now, str):
            now = parse_datetime(now)
        elif now is None:
            now = self.settings.current_time()
        elif not isinstance(now, datetime):
            raise InvalidArgument(
                f"now must be a datetime or an ISO 8601 string, not {type(now).__name__}"
            )
        try:
            return now.timestamp()
        except (OverflowError, ValueError) as exc:  # a naive datetime.min in a zone east of UTC
            raise InvalidArgument(f"now is out of range: {now!r}") from exc

    # -- sources and sync -------------------------------------------------------------------

    def add_source(self, root: str | os.PathLike[str], *, name: str | None = None) -> SourceInfo:
        """Register a folder as a source (idempotent for the same folder).

        One folder is one source: a folder that already is a source under another name, or lies
        inside or around one, is refused (:class:`SourceError` naming the existing source).
        """
        self._writable("register a source")
        return register(self.engine, root, name)

    def sources(self) -> list[SourceInfo]:
        """Return the registered sources."""
        with db.read(self.engine) as conn:
            return list_sources(conn)

    def remove_source(self, name: str) -> SyncReport:
        """Forget the source ``name`` and everything derived from it (its files' concepts,
        co-occurrences, code graph and search index); communities are recomputed as a sync
        would. The folder itself is not touched."""
        self._writable("remove a source")
        with db.read(self.engine) as conn:
            source = get_source(conn, clean_name(name))
        from contextgraph.sync.run import forget_source

        return forget_source(self.engine, self.settings, source)

    def sync(
        self,
        paths: Sequence[str | os.PathLike[str]] = (),
        *,
        name: str | None = None,
        wait: bool = True,
        progress: Progress | None = None,
        register: bool = True,
        allow: Sequence[str | os.PathLike[str]] | None = None,
    ) -> SyncReport:
        """Sync ``paths`` (registering new ones), or every registered source when none given.

        ``register=False`` refuses a path that is not already a source; ``allow`` refuses to
        register one outside the given folders (registered sources always re-sync).
        """
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        if name is not None and len(paths) != 1:
            raise InvalidArgument("a source name applies to exactly one folder")
        if len(paths) > SYNC_MAX_PATHS:
            raise InvalidArgument(
                f"at most {SYNC_MAX_PATHS} folders in one sync (got {len(paths)}): register the "
                "rest in another call; a sync with no folder syncs every source"
            )
        self._writable("sync")
        if not paths and not self.sources():
            raise SourceError("no sources registered: give a folder to sync")
        if paths and (not register or allow is not None):
            self._check_registration(paths, register=register, allow=allow or ())
        from contextgraph.sync.run import run_sync

        chosen = [self.add_source(p, name=name).name for p in paths]
        return run_sync(
            self.engine,
            self.settings,
            sources=chosen or None,
            wait=wait,
            progress=progress,
        )

    def _check_registration(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        register: bool,
        allow: Sequence[str | os.PathLike[str]],
    ) -> None:
        known = {s.root.resolve() for s in self.sources()}
        bounds = [Path(a).expanduser().resolve() for a in allow]
        for path in paths:
            resolved = Path(path).expanduser().resolve()
            if resolved in known:
                continue
            if not register:
                raise UnsafePath(f"{path} is not a registered source, and no new one may be added")
            if not any(resolved == b or resolved.is_relative_to(b) for b in bounds):
                listed = ", ".join(str(b) for b in bounds) or "(none)"
                raise UnsafePath(
                    f"{path} is outside the folders sources may be added from: {listed}"
                )

    # -- questions --------------------------------------------------------------------------

    def build_context(
        self,
        concept: str,
        *,
        depth: int | None = None,
        max_entities: int | None = None,
        include_content: bool = False,
        now: datetime | str | None = None,
    ) -> Context:
        """What belongs with ``concept``: direct, expanded and community-sibling relations."""
        from contextgraph.graph.context import build_context

        with db.read(self.engine) as conn:
            return build_context(
                conn,
                NAME.check(clean_name(concept)),
                settings=self.settings,
                now=self._now(now),
                depth=self.settings.depth if depth is None else depth,
                max_entities=self.settings.max_entities if max_entities is None else max_entities,
                include_content=include_content,
            )

    def expand(
        self,
        seeds: Sequence[str],
        *,
        max_depth: int | None = None,
        max_nodes: int | None = None,
        direction: str = "both",
    ) -> ExpandResult:
        """Expand retriever seed entities into what they depend on (SPEC §8).

        ``seeds`` is a list of names; one name alone (a string) is one seed, not its letters.
        """
        from contextgraph.graph.expand import expand

        if isinstance(seeds, str):
            seeds = [seeds]
        elif not isinstance(seeds, Iterable):
            raise InvalidArgument(f"seeds must be a list of names, not {type(seeds).__name__}")
        with db.read(self.engine) as conn:
            return expand(
                conn,
                [clean_name(s) for s in seeds],
                settings=self.settings,
                max_depth=self.settings.expand_max_depth if max_depth is None else max_depth,
                max_nodes=self.settings.expand_max_nodes if max_nodes is None else max_nodes,
                direction=direction,
            )

    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        page: int = 1,
        source: str | None = None,
        folder: str | None = None,
        all_words: bool = False,
        now: datetime | str | None = None,
    ) -> SearchResult:
        """Full-text search over notes and code: any word (or ``all_words``), bm25 × recency."""
        from contextgraph.graph.search import search

        with db.read(self.engine) as conn:
            return search(
                conn,
                clean_name(query),
                settings=self.settings,
                now=self._now(now),
                limit=self.settings.search_limit if limit is None else limit,
                page=page,
                source=None if source is None else clean_name(source),
                folder=None if folder is None else clean(folder),
                all_words=all_words,
            )

    def retrieve(
        self,
        query: str,
        *,
        k: int | None = None,
        budget_tokens: int | None = None,
        source: str | None = None,
        now: datetime | str | None = None,
    ) -> Retrieval:
        """The files and notes a question needs, ranked, with reasons and excerpts (SPEC §13)."""
        from contextgraph.graph.retrieve import retrieve

        with db.read(self.engine) as conn:
            return retrieve(
                conn,
                clean_name(query),
                settings=self.settings,
                now=self._now(now),
                k=self.settings.retrieve_k if k is None else k,
                budget_tokens=(
                    self.settings.retrieve_budget_tokens if budget_tokens is None else budget_tokens
                ),
                source=None if source is None else clean_name(source),
            )

    def read(self, identifier: str, *, now: datetime | str | None = None) -> Note:
        """Return a note by URI, path or title, and record the read (its recency boost)."""
        from contextgraph.graph.read import read_note

        stamp = self._now(now) if now is not None or self.settings.now is not None else None
        return read_note(
            self.engine,
            clean(identifier),
            database=self.database_path,
            now=stamp,
            retry_seconds=self.settings.lock_retry_seconds,
        )

    def visualize(
        self, concept: str, *, depth: int | None = None, max_nodes: int | None = None
    ) -> str:
        """A Mermaid flowchart of the concept's neighbourhood (depth and size: the settings'
        ``visualize_depth`` and ``visualize_max_nodes`` unless given)."""
        from contextgraph.graph.visualize import visualize

        depth = self.settings.visualize_depth if depth is None else depth
        max_nodes = self.settings.visualize_max_nodes if max_nodes is None else max_nodes
        with db.read(self.engine) as conn:
            name = NAME.check(clean_name(concept))
            return visualize(conn, name, depth=depth, max_nodes=max_nodes)

    def communities(self, *, rebuild: bool = False) -> CommunityListing:
        """The latest community run and every community (recomputed first with ``rebuild``)."""
        from contextgraph.graph import communities
        from contextgraph.graph.stats import CommunityListing

        if rebuild:
            self._writable("recompute the communities")
            communities.recompute(self.engine, self.settings)
        with db.read(self.engine) as conn:
            run = communities.latest_run(conn)
            listed = communities.list_communities(conn)
        return CommunityListing(run, tuple(listed))

    # -- writing (SPEC §14) -----------------------------------------------------------------

    def write_note(
        self,
        path_or_title: str,
        content: str,
        *,
        source: str | None = None,
        overwrite: bool = False,
        expected_hash: str | None = None,
    ) -> Written:
        """Create (or with ``overwrite`` replace) a note file and sync it at once."""
        from contextgraph.sync import writing

        return writing.write_note(
            self.engine,
            self.settings,
            clean(path_or_title),
            clean(content),
            source=None if source is None else clean(source),
            overwrite=overwrite,
            expected_hash=expected_hash,
        )

    def edit_note(
        self,
        identifier: str,
        operation: str,
        *,
        content: str | None = None,
        find: str | None = None,
        replace: str | None = None,
        count: int = 1,
        heading: str | None = None,
        expected_hash: str | None = None,
    ) -> Written:
        """Append, prepend, replace text or replace a section of a note; sync it at once."""
        from contextgraph.sync import writing

        return writing.edit_note(
            self.engine,
            self.settings,
            clean(identifier),
            operation,
            content=None if content is None else clean(content),
            find=None if find is None else clean(find),
            replace=None if replace is None else clean(replace),
            count=count,
            heading=None if heading is None else clean(heading),
            expected_hash=expected_hash,
        )

    def move_note(
        self, identifier: str, new_path: str, *, expected_hash: str | None = None
    ) -> Written:
        """Move a note within its source; the store records a rename."""
        from contextgraph.sync import writing

        return writing.move_note(
            self.engine,
            self.settings,
            clean(identifier),
            clean(new_path),
            expected_hash=expected_hash,
        )

    def delete_note(self, identifier: str, *, expected_hash: str | None = None) -> Written:
        """Delete a note's file and retract it from the store."""
        from contextgraph.sync import writing

        return writing.delete_note(
            self.engine, self.settings, clean(identifier), expected_hash=expected_hash
        )

    # -- housekeeping -----------------------------------------------------------------------

    def stats(self) -> Stats:
        """Counts, community summary, database size and the effective settings."""
        from contextgraph.graph.stats import Stats, counts, database_bytes, engine_info

        with db.read(self.engine) as conn:
            totals = counts(conn)
            engine = engine_info(conn)
            server_bytes = database_bytes(conn)
        path = self.database_path
        return Stats.from_counts(
            totals,
            database=_shown_database(path, self.engine),
            database_bytes=sum(
                p.stat().st_size
                for p in ([path, Path(f"{path}-wal")] if path else [])
                if p.exists()
            )
            + (server_bytes or 0),
            schema_revision=db.current_revision(self.engine),
            settings=self.settings.as_dict(),
            engine=engine,
        )

    def doctor(self) -> DoctorReport:
        """Check the file's integrity and recount co-occurrence from the mentions.

        A damaged file is a diagnosis (a problem in the report), not an exception.
        """
        from contextgraph.graph.stats import DoctorReport, doctor

        try:
            with db.read(self.engine) as conn:
                return doctor(conn)
        except CorruptDatabase as exc:
            return DoctorReport.damaged(str(exc))

    # -- schema -----------------------------------------------------------------------------

    def revision(self) -> str | None:
        """The database's schema revision (None for a blank database)."""
        return db.current_revision(self.engine)

    def upgrade(self, revision: str = "head") -> str | None:
        """Migrate the schema up to ``revision``; return the revision it is at afterwards."""
        db.upgrade(self.engine, revision)
        return db.current_revision(self.engine)

    @staticmethod
    def head() -> str:
        """The newest schema revision this version of contextgraph knows."""
        return db.SCHEMA_HEAD

    @staticmethod
    def history() -> list[Revision]:
        """Every schema revision, oldest first."""
        from alembic.script import ScriptDirectory

        from contextgraph.graph.stats import Revision

        script = ScriptDirectory(str(db.migrations_dir()))
        return [
            Revision(
                rev.revision,
                rev.down_revision if isinstance(rev.down_revision, str) else None,
                (rev.doc or "").strip(),
            )
            for rev in reversed(list(script.walk_revisions()))
        ]


def _shown_database(path: Path | None, engine: Engine) -> str:
    """The database ``stats`` names: its file's path (a byte that is not UTF-8 shown as U+FFFD:
    JSON holds no lone surrogate), ``:memory:``, or the server's URL (without its password)."""
    if path is not None:
        return os.fsencode(path).decode("utf-8", "replace")
    if db.is_memory(engine.url):
        return db.MEMORY
    return str(engine.url)
