"""The ``ContextGraph`` facade: one object on one database, every operation as a method."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from contextgraph import db
from contextgraph.errors import InvalidArgument
from contextgraph.settings import Settings, parse_datetime
from contextgraph.sources import SourceInfo, list_sources, register
from contextgraph.stats import DoctorReport, counts, doctor

if TYPE_CHECKING:  # the query modules load on first use: `contextgraph sync` never needs them
    # and sync (scan, extraction, the process pool) loads only for a sync: queries never need it
    from contextgraph.context import Context
    from contextgraph.expand import ExpandResult
    from contextgraph.notes import Note
    from contextgraph.search import SearchResult
    from contextgraph.sync import Progress, SyncReport


def clean(text: str) -> str:
    """Replace lone surrogates (unencodable in UTF-8, so unbindable in SQLite) with U+FFFD."""
    if not isinstance(text, str):
        raise InvalidArgument(f"expected text, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def default_database() -> str:
    """``$CONTEXTGRAPH_DB``, else ``~/.contextgraph/graph.db``."""
    env = os.environ.get("CONTEXTGRAPH_DB")
    if env:
        return env
    return str(Path.home() / ".contextgraph" / "graph.db")


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
    ) -> ContextGraph:
        """Open (creating and migrating as needed) the database at ``path_or_url``."""
        chosen = settings or Settings.from_env()
        engine = db.make_engine(
            path_or_url if path_or_url is not None else default_database(),
            busy_timeout_ms=chosen.busy_timeout_ms,
        )
        if migrate:
            db.upgrade(engine)
        return cls(engine, chosen)

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

    def _now(self, now: datetime | str | None) -> float:
        if isinstance(now, str):
            now = parse_datetime(now)
        return (now or self.settings.current_time()).timestamp()

    # -- sources and sync -------------------------------------------------------------------

    def add_source(self, root: str | os.PathLike[str], *, name: str | None = None) -> SourceInfo:
        """Register a folder as a source (idempotent for the same folder)."""
        return register(self.engine, Path(root), name)

    def sources(self) -> list[SourceInfo]:
        """Return the registered sources."""
        with db.read(self.engine) as conn:
            return list_sources(conn)

    def sync(
        self,
        paths: Sequence[str | os.PathLike[str]] = (),
        *,
        name: str | None = None,
        wait: bool = True,
        progress: Progress | None = None,
    ) -> SyncReport:
        """Sync ``paths`` (registering new ones), or every registered source when none given."""
        from contextgraph.sync import run_sync

        if name is not None and len(paths) > 1:
            raise InvalidArgument("--name applies to a single PATH")
        chosen = [self.add_source(p, name=name).name for p in paths]
        return run_sync(
            self.engine,
            self.settings,
            sources=chosen or None,
            wait=wait,
            progress=progress,
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
        from contextgraph.context import build_context

        with db.read(self.engine) as conn:
            return build_context(
                conn,
                clean(concept),
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
    ) -> ExpandResult:
        """Expand retriever seed entities into what they depend on (SPEC §8)."""
        from contextgraph.expand import expand

        with db.read(self.engine) as conn:
            return expand(
                conn,
                [clean(s) for s in seeds],
                settings=self.settings,
                max_depth=self.settings.expand_max_depth if max_depth is None else max_depth,
                max_nodes=self.settings.expand_max_nodes if max_nodes is None else max_nodes,
            )

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        page: int = 1,
        source: str | None = None,
        folder: str | None = None,
        all_words: bool = False,
        now: datetime | str | None = None,
    ) -> SearchResult:
        """Full-text search over notes and code: any word (or ``all_words``), bm25 × recency."""
        from contextgraph.search import search

        with db.read(self.engine) as conn:
            return search(
                conn,
                clean(query),
                settings=self.settings,
                now=self._now(now),
                limit=limit,
                page=page,
                source=None if source is None else clean(source),
                folder=None if folder is None else clean(folder),
                all_words=all_words,
            )

    def read(self, identifier: str, *, now: datetime | str | None = None) -> Note:
        """Return a note by URI, path or title, and record the read (its recency boost)."""
        from contextgraph.notes import read_note

        stamp = self._now(now) if now is not None or self.settings.now is not None else None
        return read_note(
            self.engine,
            clean(identifier),
            database=self.database_path,
            now=stamp,
            retry_seconds=self.settings.lock_retry_seconds,
        )

    def visualize(self, concept: str, *, depth: int = 2, max_nodes: int = 30) -> str:
        """A Mermaid flowchart of the concept's neighbourhood."""
        from contextgraph.visualize import visualize

        with db.read(self.engine) as conn:
            return visualize(conn, clean(concept), depth=depth, max_nodes=max_nodes)

    def communities(self, *, rebuild: bool = False) -> dict[str, Any]:
        """The latest community run and every community (recomputed first with ``rebuild``)."""
        from contextgraph import communities

        if rebuild:
            communities.recompute(self.engine, self.settings)
        with db.read(self.engine) as conn:
            run = communities.latest_run(conn)
            listed = communities.list_communities(conn)
        return {
            "run": None if run is None else run.as_dict(),
            "communities": [c.as_dict() for c in listed],
        }

    # -- housekeeping -----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts, community summary, database size and the effective settings."""
        with db.read(self.engine) as conn:
            out = counts(conn)
        path = self.database_path
        out["database"] = str(path) if path else str(self.engine.url)
        out["databaseBytes"] = sum(
            p.stat().st_size for p in ([path, Path(f"{path}-wal")] if path else []) if p.exists()
        )
        out["schemaRevision"] = db.current_revision(self.engine)
        out["settings"] = self.settings.as_dict()
        return out

    def doctor(self) -> DoctorReport:
        """Check the file's integrity and recount co-occurrence from the mentions."""
        with db.read(self.engine) as conn:
            return doctor(conn)
