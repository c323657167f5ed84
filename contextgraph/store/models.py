"""The tables, in one place. Migrations in ``migrations/versions`` must create exactly these."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Nanosecond mtimes and byte sizes outgrow PostgreSQL's 4-byte INTEGER; SQLite's INTEGER is
# already 8 bytes, so its schema stays exactly as it was.
BigInt = Integer().with_variant(BigInteger(), "postgresql")
# Text compares and sorts byte-wise on both engines (SQLite's BINARY is PostgreSQL's "C"), so
# every ORDER BY name, tie-break and community vertex order is the same on either.
Str = String().with_variant(String(collation="C"), "postgresql")
LongText = Text().with_variant(Text(collation="C"), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Source(Base):
    """A registered root folder; its name is the host part of ``memory://`` URIs."""

    __tablename__ = "sources"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(Str, unique=True)
    root: Mapped[str] = mapped_column(Str)
    created_at: Mapped[float] = mapped_column(Float)


class File(Base):
    """A note or code file of a source, with what change detection and decay need."""

    __tablename__ = "files"
    __table_args__ = (
        UniqueConstraint("source_id", "path"),
        Index("ix_files_hash", "hash"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("sources.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(Str)  # posix, relative to the source root
    kind: Mapped[str] = mapped_column(Str)  # note | code | config
    size: Mapped[int] = mapped_column(BigInt)
    mtime_ns: Mapped[int] = mapped_column(BigInt)
    hash: Mapped[str] = mapped_column(Str)
    title: Mapped[str | None] = mapped_column(Str)
    created: Mapped[float | None] = mapped_column(Float)  # frontmatter `created`, epoch seconds
    modified: Mapped[float] = mapped_column(Float)  # mtime, epoch seconds
    last_accessed: Mapped[float | None] = mapped_column(Float)  # set only by read()
    text: Mapped[str | None] = mapped_column(LongText)
    facts: Mapped[str | None] = mapped_column(LongText)  # parsed code facts (JSON), code files only
    # Indexed beside title and text (contextgraph.graph.searchterms): what names the file, and the
    # other spellings of its identifiers.
    search_meta: Mapped[str | None] = mapped_column(LongText)
    search_parts: Mapped[str | None] = mapped_column(LongText)
    concept_count: Mapped[int] = mapped_column(Integer, default=0)
    pairs: Mapped[int] = mapped_column(Integer, default=1)  # 0 when over max_concepts_per_file
    warning: Mapped[str | None] = mapped_column(Str)


class Entity(Base):
    """A node of the one graph: a concept, a code file, a code symbol or an external package."""

    __tablename__ = "entities"
    __table_args__ = (
        UniqueConstraint("kind", "key"),
        Index("ix_entities_name_lower", "name_lower"),
        Index("ix_entities_file_id", "file_id"),
        Index("ix_entities_community_id", "community_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(Str)  # concept | file | symbol | package
    key: Mapped[str] = mapped_column(Str)
    name: Mapped[str] = mapped_column(Str)
    name_lower: Mapped[str] = mapped_column(Str)
    file_id: Mapped[int | None] = mapped_column(ForeignKey("files.id", ondelete="CASCADE"))
    path: Mapped[str | None] = mapped_column(Str)  # source-relative path of code entities
    community_id: Mapped[int | None] = mapped_column(Integer)


class Mention(Base):
    """How often one note links one concept."""

    __tablename__ = "mentions"
    __table_args__ = (
        Index("ix_mentions_concept_id_file_id", "concept_id", "file_id"),
        {"sqlite_with_rowid": False},
    )
    file_id: Mapped[int] = mapped_column(
        ForeignKey("files.id", ondelete="CASCADE"), primary_key=True
    )
    concept_id: Mapped[int] = mapped_column(
        ForeignKey("entities.id", ondelete="CASCADE"), primary_key=True
    )
    count: Mapped[int] = mapped_column(Integer)


class ConceptRelation(Base):
    """An unordered co-occurrence edge, stored once with ``a_id < b_id``.

    Its source files (provenance) are the notes whose ``mentions`` hold both concepts, a join
    over two indexes (the view ``relation_files`` spells it out). Storing the pairs once more per
    file would roughly triple the rows a sync writes (394k extra at 10,000 notes) and no query
    needs them: BuildContext aggregates co-occurrence and decay straight from the mentions.
    """

    __tablename__ = "concept_relations"
    __table_args__ = (
        CheckConstraint("a_id < b_id", name="ordered"),
        Index("ix_concept_relations_b_id_a_id", "b_id", "a_id"),
        {"sqlite_with_rowid": False},
    )
    a_id: Mapped[int] = mapped_column(
        ForeignKey("entities.id", ondelete="CASCADE"), primary_key=True
    )
    b_id: Mapped[int] = mapped_column(
        ForeignKey("entities.id", ondelete="CASCADE"), primary_key=True
    )
    count: Mapped[int] = mapped_column(Integer)


class Relation(Base):
    """A directed, typed, weighted code relation (imports, defines, inherits, references, ...)."""

    __tablename__ = "relations"
    __table_args__ = (
        UniqueConstraint("src_id", "dst_id", "type"),
        Index("ix_relations_dst_id", "dst_id"),
        Index("ix_relations_file_id", "file_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    src_id: Mapped[int] = mapped_column(ForeignKey("entities.id", ondelete="CASCADE"))
    dst_id: Mapped[int] = mapped_column(ForeignKey("entities.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(Str)
    weight: Mapped[float] = mapped_column(Float)
    file_id: Mapped[int] = mapped_column(ForeignKey("files.id", ondelete="CASCADE"))


class CommunityRun(Base):
    """One community detection run, as recorded for ``contextgraph communities``."""

    __tablename__ = "community_runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    algorithm: Mapped[str] = mapped_column(Str)
    resolution: Mapped[float] = mapped_column(Float)
    seed: Mapped[int] = mapped_column(Integer)
    modularity: Mapped[float] = mapped_column(Float)
    node_count: Mapped[int] = mapped_column(Integer)
    edge_count: Mapped[int] = mapped_column(Integer)
    community_count: Mapped[int] = mapped_column(Integer)
    seconds: Mapped[float] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)


class Community(Base):
    """A community of the latest run; its id is kept stable across runs."""

    __tablename__ = "communities"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    size: Mapped[int] = mapped_column(Integer)


class Meta(Base):
    """Small key/value facts about the store (e.g. whether communities are stale)."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(Str, primary_key=True)
    value: Mapped[str] = mapped_column(Str)


class RelationWeight(Base):
    """Precomputed: one concept's neighbours in BuildContext's rank order, with their weight sums.

    Derived from ``mentions`` and the decay weights at one instant
    (:mod:`contextgraph.graph.weights`);
    valid only for the graph version and settings recorded in ``meta`` and, per concept, within
    its ``relation_weight_windows`` row. Readers that find it stale compute on the fly.
    """

    __tablename__ = "relation_weights"
    __table_args__ = ({"sqlite_with_rowid": False},)
    concept_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    rank: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    other_id: Mapped[int] = mapped_column(Integer)
    count: Mapped[int] = mapped_column(Integer)
    total: Mapped[float] = mapped_column(Float)
    name: Mapped[str] = mapped_column(String)
    community_id: Mapped[int | None] = mapped_column(Integer)


class RelationWeightWindow(Base):
    """The instants between which no note of the concept changes its decay weight."""

    __tablename__ = "relation_weight_windows"
    concept_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    valid_from: Mapped[float] = mapped_column(Float)
    valid_until: Mapped[float] = mapped_column(Float)


class ConceptStrength(Base):
    """Precomputed with the relation weights: a concept's weighted degree (sum of its counts)."""

    __tablename__ = "concept_strengths"
    concept_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    strength: Mapped[int] = mapped_column(Integer)


def table_of(model: type[Base]) -> Table:
    """The Core ``Table`` of a model, typed as such (``__table__`` is typed as a FromClause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table
