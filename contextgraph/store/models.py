"""The tables, in one place. Migrations in ``migrations/versions`` must create exactly these.

Plain SQLAlchemy Core ``Table`` objects: every query and write goes through Core, and importing
``sqlalchemy.orm`` (declarative classes) would cost each CLI process about 80 ms for nothing.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
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

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

# Nanosecond mtimes and byte sizes outgrow PostgreSQL's 4-byte INTEGER; SQLite's INTEGER is
# already 8 bytes, so its schema stays exactly as it was.
BigInt = Integer().with_variant(BigInteger(), "postgresql")
# Text compares and sorts byte-wise on both engines (SQLite's BINARY is PostgreSQL's "C"), so
# every ORDER BY name, tie-break and community vertex order is the same on either.
Str = String().with_variant(String(collation="C"), "postgresql")
LongText = Text().with_variant(Text(collation="C"), "postgresql")

CASCADE = "CASCADE"

# A registered root folder; its name is the host part of ``memory://`` URIs.
T_SOURCES = Table(
    "sources",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", Str, nullable=False, unique=True),
    Column("root", Str, nullable=False),
    Column("created_at", Float, nullable=False),
)

# A note or code file of a source, with what change detection and decay need.
T_FILES = Table(
    "files",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("source_id", Integer, ForeignKey("sources.id", ondelete=CASCADE), nullable=False),
    Column("path", Str, nullable=False),  # posix, relative to the source root
    Column("kind", Str, nullable=False),  # note | code | config
    Column("size", BigInt, nullable=False),
    Column("mtime_ns", BigInt, nullable=False),
    Column("hash", Str, nullable=False),
    Column("title", Str),
    Column("created", Float),  # frontmatter `created`, epoch seconds
    Column("modified", Float, nullable=False),  # mtime, epoch seconds
    Column("last_accessed", Float),  # set only by read()
    Column("text", LongText),
    Column("facts", LongText),  # parsed code facts (JSON), code files only
    # Indexed beside title and text (contextgraph.graph.searchterms): what names the file, and
    # the other spellings of its identifiers.
    Column("search_meta", LongText),
    Column("search_parts", LongText),
    Column("concept_count", Integer, nullable=False, default=0),
    Column("pairs", Integer, nullable=False, default=1),  # 0 when over max_concepts_per_file
    Column("warning", Str),
    UniqueConstraint("source_id", "path"),
    Index("ix_files_hash", "hash"),
    # What a sync compares with its scan, readable without the rows' texts (0007).
    Index("ix_files_source_id_state", "source_id", "path", "kind", "size", "mtime_ns", "hash"),
)

# Each file's source and decay reference time (graph.decay.reference_sql), what search tests
# on every match, in a narrow table: ``files`` rows hold the whole text, so reading them walks a
# page per row or two. Triggers are its only writers (migration 0005): one row per file whose
# source exists, equal to it.
T_SEARCH_DATES = Table(
    "search_dates",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # files.id
    Column("source_id", Integer, nullable=False),
    Column("reference", Float, nullable=False),
)

# A node of the one graph: a concept, a code file, a code symbol or an external package.
T_ENTITIES = Table(
    "entities",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", Str, nullable=False),  # concept | file | symbol | package
    Column("key", Str, nullable=False),
    Column("name", Str, nullable=False),
    Column("name_lower", Str, nullable=False),
    Column("file_id", Integer, ForeignKey("files.id", ondelete=CASCADE)),
    Column("path", Str),  # source-relative path of code entities
    Column("community_id", Integer),
    UniqueConstraint("kind", "key"),
    Index("ix_entities_name_lower", "name_lower"),
    Index("ix_entities_file_id", "file_id"),
    Index("ix_entities_community_id", "community_id"),
)

# How often one note links one concept.
T_MENTIONS = Table(
    "mentions",
    metadata,
    Column("file_id", Integer, ForeignKey("files.id", ondelete=CASCADE), primary_key=True),
    Column("concept_id", Integer, ForeignKey("entities.id", ondelete=CASCADE), primary_key=True),
    Column("count", Integer, nullable=False),
    Index("ix_mentions_concept_id_file_id", "concept_id", "file_id"),
    sqlite_with_rowid=False,
)

# An unordered co-occurrence edge, stored once with ``a_id < b_id``.
#
# Its source files (provenance) are the notes whose ``mentions`` hold both concepts, a join
# over two indexes (the view ``relation_files`` spells it out). Storing the pairs once more per
# file would roughly triple the rows a sync writes (394k extra at 10,000 notes) and no query
# needs them: BuildContext aggregates co-occurrence and decay straight from the mentions.
T_CREL = Table(
    "concept_relations",
    metadata,
    Column("a_id", Integer, ForeignKey("entities.id", ondelete=CASCADE), primary_key=True),
    Column("b_id", Integer, ForeignKey("entities.id", ondelete=CASCADE), primary_key=True),
    Column("count", Integer, nullable=False),
    CheckConstraint("a_id < b_id", name="ordered"),
    # count included: relations read by the larger end come from the index alone (0006)
    Index("ix_concept_relations_b_id_a_id_count", "b_id", "a_id", "count"),
    sqlite_with_rowid=False,
)

# A directed, typed, weighted code relation (imports, defines, inherits, references, ...).
T_REL = Table(
    "relations",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("src_id", Integer, ForeignKey("entities.id", ondelete=CASCADE), nullable=False),
    Column("dst_id", Integer, ForeignKey("entities.id", ondelete=CASCADE), nullable=False),
    Column("type", Str, nullable=False),
    Column("weight", Float, nullable=False),
    Column("file_id", Integer, ForeignKey("files.id", ondelete=CASCADE), nullable=False),
    UniqueConstraint("src_id", "dst_id", "type"),
    Index("ix_relations_dst_id", "dst_id"),
    Index("ix_relations_file_id", "file_id"),
)

# One community detection run, as recorded for ``contextgraph communities``.
T_RUNS = Table(
    "community_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("algorithm", Str, nullable=False),
    Column("resolution", Float, nullable=False),
    Column("seed", Integer, nullable=False),
    Column("modularity", Float, nullable=False),
    Column("node_count", Integer, nullable=False),
    Column("edge_count", Integer, nullable=False),
    Column("community_count", Integer, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("created_at", Float, nullable=False),
)

# A community of the latest run; its id is kept stable across runs.
T_COMMUNITIES = Table(
    "communities",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("size", Integer, nullable=False),
)

# Small key/value facts about the store (e.g. whether communities are stale). Only
# contextgraph.store.meta reads or writes it.
T_META = Table(
    "meta",
    metadata,
    Column("key", Str, primary_key=True),
    Column("value", Str, nullable=False),
)

# Precomputed: one concept's neighbours in BuildContext's rank order, with their weight sums.
#
# Derived from ``mentions`` and the decay weights at one instant (contextgraph.graph.weights);
# valid only for the graph version and settings recorded in ``meta`` and, per concept, within
# its ``relation_weight_windows`` row. Readers that find it stale compute on the fly.
T_RW = Table(
    "relation_weights",
    metadata,
    Column("concept_id", Integer, primary_key=True, autoincrement=False),
    Column("rank", Integer, primary_key=True, autoincrement=False),
    Column("other_id", Integer, nullable=False),
    Column("count", Integer, nullable=False),
    Column("total", Float, nullable=False),
    Column("name", String, nullable=False),
    Column("community_id", Integer),
    sqlite_with_rowid=False,
)

# The instants between which no note of the concept changes its decay weight.
T_WINDOWS = Table(
    "relation_weight_windows",
    metadata,
    Column("concept_id", Integer, primary_key=True, autoincrement=False),
    Column("valid_from", Float, nullable=False),
    Column("valid_until", Float, nullable=False),
)

# Precomputed with the relation weights: a concept's weighted degree (sum of its counts).
T_STRENGTHS = Table(
    "concept_strengths",
    metadata,
    Column("concept_id", Integer, primary_key=True, autoincrement=False),
    Column("strength", Integer, nullable=False),
)
