"""Store statistics and the ``doctor`` consistency check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    CompoundSelect,
    Connection,
    ScalarSelect,
    Select,
    and_,
    except_,
    func,
    select,
    text,
)

from contextgraph.store.models import (
    T_CREL,
    T_ENTITIES,
    T_FILES,
    T_MENTIONS,
    T_REL,
    T_RUNS,
    T_SOURCES,
)
from contextgraph.store.sqlcore import compiled_tuples

if TYPE_CHECKING:
    from contextgraph.graph.communities import CommunityInfo, CommunityRunInfo


def counts(conn: Connection, *, files: bool = True) -> dict[str, Any]:
    """Count sources, files by kind, entities by kind, relations and communities.

    ``files=False`` leaves the files out (``{}``): counting them reads the whole files table.
    Each statement is compiled once per process (:func:`compiled_tuples`), not once per engine.
    """
    by_kind: dict[str, int] = dict(_run(conn, "files_by_kind")) if files else {}
    entities: dict[str, int] = dict(_run(conn, "entities_by_kind"))
    code_relations: dict[str, int] = dict(_run(conn, "relations_by_type"))
    runs = _run(conn, "latest_run")
    run = runs[0] if runs else None
    return {
        "sources": [{"name": name, "root": root} for name, root in _run(conn, "sources")],
        "files": {k: int(v) for k, v in by_kind.items()},
        "concepts": int(entities.get("concept", 0)),
        "entities": {k: int(v) for k, v in entities.items()},
        "relations": int(_run(conn, "concept_relations")[0][0]),
        "codeRelations": {k: int(v) for k, v in code_relations.items()},
        "communities": None if run is None else int(run[0]),
        "modularity": None if run is None else float(run[1]),
        "communityAlgorithm": None if run is None else run[2],
    }


# What :func:`counts` and :func:`engine_info` read, by name (built on first use).
# The counts by kind are in the kinds' order on every engine (SQLite's GROUP BY sorts them;
# PostgreSQL's hashes them), so stats prints the same JSON on both.
_COUNTS: dict[str, Callable[[], Select[Any]]] = {
    "files_by_kind": lambda: _by(T_FILES.c.kind),
    "entities_by_kind": lambda: _by(T_ENTITIES.c.kind),
    "relations_by_type": lambda: _by(T_REL.c.type),
    "latest_run": lambda: (
        select(T_RUNS.c.community_count, T_RUNS.c.modularity, T_RUNS.c.algorithm)
        .order_by(T_RUNS.c.id.desc())
        .limit(1)
    ),
    "sources": lambda: select(T_SOURCES.c.name, T_SOURCES.c.root).order_by("name"),
    "concept_relations": lambda: select(func.count()).select_from(T_CREL),
    "sqlite_version": lambda: select(func.sqlite_version()),
}


def _by(column: Any) -> Select[Any]:
    return select(column, func.count()).group_by(column).order_by(column)


def _run(conn: Connection, name: str) -> list[tuple[Any, ...]]:
    return compiled_tuples(conn, ("stats", name), _COUNTS[name], {})


@dataclass(frozen=True)
class Stats:
    """What ``contextgraph stats`` shows; ``as_dict`` gives its JSON shape."""

    sources: tuple[Mapping[str, str], ...]
    files: Mapping[str, int]
    concepts: int
    entities: Mapping[str, int]
    relations: int
    code_relations: Mapping[str, int]
    communities: int | None
    modularity: float | None
    community_algorithm: str | None
    database: str
    database_bytes: int
    schema_revision: str | None
    settings: Mapping[str, Any]
    engine: str = "sqlite"  # sqlite | postgresql
    server_version: str = ""

    @classmethod
    def from_counts(
        cls,
        totals: Mapping[str, Any],
        *,
        database: str,
        database_bytes: int,
        schema_revision: str | None,
        settings: Mapping[str, Any],
        engine: Mapping[str, str] | None = None,
    ) -> Stats:
        return cls(
            sources=tuple(dict(s) for s in totals["sources"]),
            files=dict(totals["files"]),
            concepts=int(totals["concepts"]),
            entities=dict(totals["entities"]),
            relations=int(totals["relations"]),
            code_relations=dict(totals["codeRelations"]),
            communities=totals["communities"],
            modularity=totals["modularity"],
            community_algorithm=totals["communityAlgorithm"],
            database=database,
            database_bytes=database_bytes,
            schema_revision=schema_revision,
            settings=dict(settings),
            engine=(engine or {}).get("engine", "sqlite"),
            server_version=(engine or {}).get("serverVersion", ""),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "sources": [dict(s) for s in self.sources],
            "files": dict(self.files),
            "concepts": self.concepts,
            "entities": dict(self.entities),
            "relations": self.relations,
            "codeRelations": dict(self.code_relations),
            "communities": self.communities,
            "modularity": self.modularity,
            "communityAlgorithm": self.community_algorithm,
            "database": self.database,
            "databaseBytes": self.database_bytes,
            "schemaRevision": self.schema_revision,
            "engine": self.engine,
            "serverVersion": self.server_version,
            "settings": dict(self.settings),
        }


@dataclass(frozen=True)
class CommunityListing:
    """The latest community run (None before any) and the current communities, largest first."""

    run: CommunityRunInfo | None
    communities: tuple[CommunityInfo, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": None if self.run is None else self.run.as_dict(),
            "communities": [c.as_dict() for c in self.communities],
        }


@dataclass(frozen=True)
class Revision:
    """One schema migration: its id, the one it follows, and what it does."""

    revision: str
    down_revision: str | None
    doc: str

    def as_dict(self) -> dict[str, Any]:
        return {"revision": self.revision, "downRevision": self.down_revision, "doc": self.doc}


def _recount() -> Select[Any]:
    """(missing or miscounted, stored wrongly, counts <= 0, concepts without mentions).

    Co-occurrence is recounted from the mentions: the pairs of concepts sharing a note whose
    pairs count.
    """
    m1, m2, f = T_MENTIONS.alias("m1"), T_MENTIONS.alias("m2"), T_FILES.alias("f")
    derived = (
        select(
            m1.c.concept_id.label("a_id"), m2.c.concept_id.label("b_id"), func.count().label("n")
        )
        .select_from(
            m1.join(m2, and_(m2.c.file_id == m1.c.file_id, m1.c.concept_id < m2.c.concept_id)).join(
                f, and_(f.c.id == m1.c.file_id, f.c.pairs == 1)
            )
        )
        .group_by(m1.c.concept_id, m2.c.concept_id)
        .cte("derived")
    )
    recounted = select(derived.c.a_id, derived.c.b_id, derived.c.n)
    stored = select(T_CREL.c.a_id, T_CREL.c.b_id, T_CREL.c.count)

    def count_of(rows: CompoundSelect[Any]) -> ScalarSelect[int]:
        return select(func.count()).select_from(rows.subquery()).scalar_subquery()

    mentioned = select(T_MENTIONS.c.concept_id).where(T_MENTIONS.c.concept_id == T_ENTITIES.c.id)
    return select(
        count_of(except_(recounted, stored)),
        count_of(except_(stored, recounted)),
        select(func.count()).where(T_CREL.c.count <= 0).scalar_subquery(),
        select(func.count())
        .where(T_ENTITIES.c.kind == "concept", ~mentioned.exists())
        .scalar_subquery(),
    )


# Rows whose foreign keys point nowhere (the constraints forbid them; a damaged or hand-edited
# store can still hold them).
_ORPHANS = """
SELECT
    (SELECT count(*) FROM mentions m WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.id = m.file_id)
        OR NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = m.concept_id))
  + (SELECT count(*) FROM concept_relations r
        WHERE NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = r.a_id)
        OR NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = r.b_id))
  + (SELECT count(*) FROM relations r
        WHERE NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = r.src_id)
        OR NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = r.dst_id)
        OR NOT EXISTS (SELECT 1 FROM files f WHERE f.id = r.file_id))
  + (SELECT count(*) FROM entities e WHERE e.file_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM files f WHERE f.id = e.file_id))
  + (SELECT count(*) FROM files f
        WHERE NOT EXISTS (SELECT 1 FROM sources s WHERE s.id = f.source_id))
"""

# Full-text rows out of step with the files: SQLite counts the FTS5 index's rows against the
# files; PostgreSQL recomputes each file's tsvector and compares it with the stored one.
_STALE_FTS = {
    "sqlite": "SELECT (SELECT count(*) FROM files_fts_docsize) - (SELECT count(*) FROM files)",
    "postgresql": "SELECT count(*) FROM files"
    " WHERE search_tsv IS DISTINCT FROM"
    " contextgraph_search_vector(title, text, search_meta, search_parts)",
}


def engine_info(conn: Connection) -> dict[str, str]:
    """The database engine (``sqlite`` | ``postgresql``) and its version."""
    if conn.dialect.name == "postgresql":
        version = conn.execute(select(func.current_setting("server_version"))).scalar_one()
    else:
        version = _run(conn, "sqlite_version")[0][0]
    return {"engine": conn.dialect.name, "serverVersion": str(version)}


def database_bytes(conn: Connection) -> int | None:
    """The size of a PostgreSQL database on its server (None for SQLite: its files are sized)."""
    if conn.dialect.name != "postgresql":
        return None
    size = select(func.pg_database_size(func.current_database()))
    return int(conn.execute(size).scalar_one())


@dataclass
class DoctorReport:
    integrity: str = "ok"
    missing_relations: int = 0
    wrong_relations: int = 0
    nonpositive_counts: int = 0
    orphan_concepts: int = 0
    orphan_rows: int = 0
    fts: str = "ok"
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def integrity_line(self) -> str:
        """The integrity check as one line; also the problem a failed check adds."""
        return f"integrity_check: {self.integrity}"

    @classmethod
    def damaged(cls, reason: str) -> DoctorReport:
        """The report for a file that SQLite cannot read as a database at all."""
        report = cls(integrity=reason, fts="not checked")
        report.problems.append(report.integrity_line)
        return report

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "integrityCheck": self.integrity,
            "missingRelations": self.missing_relations,
            "wrongRelations": self.wrong_relations,
            "nonPositiveCounts": self.nonpositive_counts,
            "orphanConcepts": self.orphan_concepts,
            "orphanRows": self.orphan_rows,
            "fts": self.fts,
            "problems": self.problems,
        }


def doctor(conn: Connection) -> DoctorReport:
    """Check the store: SQLite's ``PRAGMA integrity_check`` (a PostgreSQL server checks its own
    pages), co-occurrence recounted from the mentions, orphan rows, the full-text index."""
    report = DoctorReport()
    if conn.dialect.name == "sqlite":
        lines = [str(r[0]) for r in conn.execute(text("PRAGMA integrity_check"))]
        report.integrity = "ok" if lines == ["ok"] else "; ".join(lines[:20])
        if report.integrity != "ok":
            # Counts read from a damaged file mean nothing: the integrity problem is the diagnosis.
            report.problems.append(report.integrity_line)
            report.fts = "not checked"
            return report
    else:
        report.integrity = "not applicable (PostgreSQL)"
    row = conn.execute(_recount()).one()
    report.missing_relations, report.wrong_relations = int(row[0]), int(row[1])
    report.nonpositive_counts, report.orphan_concepts = int(row[2]), int(row[3])
    if report.missing_relations or report.wrong_relations:
        report.problems.append(
            f"co-occurrence differs from the mentions: {report.missing_relations} missing or "
            f"miscounted, {report.wrong_relations} stored wrongly"
        )
    if report.nonpositive_counts:
        report.problems.append(f"{report.nonpositive_counts} relations have a count <= 0")
    if report.orphan_concepts:
        report.problems.append(f"{report.orphan_concepts} concepts have no mentions")
    report.orphan_rows = int(conn.execute(text(_ORPHANS)).scalar_one())
    if report.orphan_rows:
        report.problems.append(f"{report.orphan_rows} rows refer to rows that do not exist")
    stale_fts = conn.execute(text(_STALE_FTS[conn.dialect.name])).scalar_one()
    if stale_fts:
        report.fts = f"{stale_fts} index rows differ from the files"
        report.problems.append(f"full-text index: {report.fts}")
    return report
