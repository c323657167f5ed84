"""Every tunable default, read from the call, then the CLI, then the environment, then the default.

An environment variable is ``CONTEXTGRAPH_<FIELD NAME IN UPPER CASE>``. The three community
sibling thresholds are also read from the names the reference design used
(``MAENIFOLD_COMMUNITY_MIN_SHARED``, ``..._MIN_OVERLAP``, ``..._MAX_SIBLINGS``); the
``CONTEXTGRAPH_`` name wins when both are set.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from contextgraph import limits
from contextgraph.errors import InvalidArgument

# Raised whenever extracting a file gives other facts for the same bytes (contextgraph.sync.ingest,
# contextgraph.notes, contextgraph.graph.searchterms, contextgraph.code): stored files are then
# read again (Settings.extraction_key). 2: search words without fenced headings (6031991) or
# number-unit spellings (5891f4a), concept names bounded by max_concept_length.
EXTRACTION_VERSION = 2

DECAY_MODELS = ("power-law", "exponential")
COMMUNITY_ALGORITHMS = ("louvain", "leiden")

_LEGACY_NAMES = {
    "community_min_shared": "MAENIFOLD_COMMUNITY_MIN_SHARED",
    "community_min_overlap": "MAENIFOLD_COMMUNITY_MIN_OVERLAP",
    "community_max_siblings": "MAENIFOLD_COMMUNITY_MAX_SIBLINGS",
}


@dataclass(frozen=True)
class Settings:
    """Effective configuration; build with :meth:`from_env` and adjust with :meth:`replace`."""

    # Extraction and sync (SPEC §2, §3).
    max_concept_length: int = 200
    max_concepts_per_file: int = 1000
    max_file_bytes: int = 10 * 1024 * 1024
    # Files per write transaction. Each batch rewrites the pages of concept_relations it touches
    # and writes a segment of the full-text index (a cold load leaves them unmerged: coldload),
    # so a cold load of bench.py's 13,415 notes cost ~1 s less CPU in 500-file batches than in
    # 200-file ones, and one of the long vault's 13,415 notes 0.19 s less wall time in 1,000-file
    # batches than in 500-file ones (2,000: 0.24 s more, the first batch waits for its files;
    # +0.02 s once a batch wrote one segment, not two), while a batch still holds the write lock
    # for ~0.2-0.5 s of CPU.
    batch_files: int = 1000
    # 0 = a worker per core but one (max 4) + a helper (extraction.pool_size); 1 = none
    workers: int = 0
    # Recency decay (SPEC §4).
    decay_model: str = "power-law"
    grace_days: float = 28.0
    half_life_days: float = 30.0
    # BuildContext (SPEC §5).
    depth: int = 2
    max_entities: int = 20
    expansion_frontier: int = 5
    preview_chars: int = 200
    community_min_shared: int = 3
    community_min_overlap: float = 0.4
    community_max_siblings: int = 10
    # Concepts in at least this many notes get their neighbours' weight sums precomputed by
    # the sync that changes the graph (contextgraph.graph.weights); 0 (the default) turns it off: it
    # halves a cold BuildContext but adds seconds to every graph-changing sync (see CHANGELOG).
    weights_min_notes: int = 0
    # Search, retrieval and pictures (SPEC §9, §13): what a call that names none asks for.
    search_limit: int = 10
    retrieve_k: int = 10
    retrieve_budget_tokens: int = 6000
    visualize_depth: int = 2
    visualize_max_nodes: int = 30
    # Communities (SPEC §6).
    community_algorithm: str = "louvain"
    # With the default algorithm, graphs of at least this many edges use Leiden instead: at
    # 1,000,000 edges it runs ~2.5x faster with a higher modularity (scripts/bench.py --edges),
    # at bench.py's 348,000 (13,415 notes) ~2.5x faster with a 2.7-4.3 % higher modularity over
    # six seeds; small graphs (and their golden partitions) stay Louvain. 0 = always Louvain.
    community_leiden_min_edges: int = 200_000
    community_resolution: float = 1.0
    community_seed: int = 42
    # Expansion (SPEC §8).
    expand_max_depth: int = 2
    expand_max_nodes: int = 20
    expand_min_weight: float = 0.9
    expand_hub_degree: int = 30
    expand_min_length: int = 3
    expand_stopwords: tuple[str, ...] = ()
    # Retrieval (SPEC §13): chosen with scripts/bench_retrieval.py; see contextgraph/retrieve.py.
    retrieve_candidates: int = 100  # lexical matches considered
    retrieve_seeds: int = 15  # best lexical matches whose neighbourhoods are searched
    retrieve_graph_weight: float = 0.45  # graph proximity against lexical relevance
    retrieve_import_weight: float = 1.0  # an import (either way) or inheritance between files
    retrieve_reference_weight: float = 0.5  # symbol references between files, no import
    retrieve_concept_weight: float = 1.0  # notes sharing linked concepts
    retrieve_concept_fanout: int = 100  # a concept in more notes is a hub, not followed
    retrieve_hub_damping: float = 1.0  # exponent of the hub specificity (0 = hubs not damped)
    retrieve_prior_weight: float = 0.45  # a file's size prior (log bytes over the largest)
    # Concurrency (SPEC §12).
    busy_timeout_ms: int = 5000
    lock_retry_seconds: float = 120.0
    # Clock: None means the wall clock.
    now: datetime | None = field(default=None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read ``CONTEXTGRAPH_*`` (and the legacy community names), then apply ``overrides``."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        origin: dict[str, str] = {}  # field -> the variable it was read from
        for f in fields(cls):
            variable = f"CONTEXTGRAPH_{f.name.upper()}"
            raw = env.get(variable)
            if (raw is None or not raw.strip()) and f.name in _LEGACY_NAMES:
                variable = _LEGACY_NAMES[f.name]  # an empty variable is an unset one
                raw = env.get(variable)
            if raw is not None and raw.strip() != "":
                values[f.name] = _parse(variable, f.name, f.type, raw.strip())
                origin[f.name] = variable
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        for name in given:
            origin.pop(name, None)
        return cls(**values).validated(origin)

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with the non-None ``changes`` applied."""
        given = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **given).validated() if given else self

    def validated(self, origin: Mapping[str, str] | None = None) -> Settings:
        """Raise InvalidArgument for a value out of its range (:data:`RANGES`) or unknown.

        ``origin``: field -> the environment variable it was read from, named in the message.
        """
        for f in fields(self):
            value = getattr(self, f.name)
            label = _label(f.name, origin)
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidArgument(f"{label} must be a finite number, not {value}")
            span = RANGES.get(f.name)
            if span is None or value is None:
                continue
            low, high = span
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidArgument(f"{label} must be a number, not {value!r}")
            if not low <= value <= high:
                raise InvalidArgument(f"{label} must be between {low} and {high}, not {value}")
        if self.decay_model not in DECAY_MODELS:
            raise InvalidArgument(f"decay_model must be one of {', '.join(DECAY_MODELS)}")
        if self.community_algorithm not in COMMUNITY_ALGORITHMS:
            raise InvalidArgument(
                f"community_algorithm must be one of {', '.join(COMMUNITY_ALGORITHMS)}"
            )
        for name in ("half_life_days", "community_resolution"):
            if getattr(self, name) <= 0:
                raise InvalidArgument(f"{_label(name, origin)} must be > 0")
        return self

    def extraction_key(self) -> str:
        """What the facts stored of a file depend on besides its bytes: the extraction code's
        version and the settings it reads. A source whose files were stored under another key
        is read again in full by its next sync (:mod:`contextgraph.sync.run`), so the store
        stays what a fresh sync would make (SPEC §3) after an upgrade or a changed limit."""
        limits_used = (self.max_file_bytes, self.max_concepts_per_file, self.max_concept_length)
        return ":".join(str(part) for part in (EXTRACTION_VERSION, *limits_used))

    def current_time(self) -> datetime:
        """Return the injected *now* or the wall clock, timezone-aware in UTC."""
        return self.now if self.now is not None else datetime.now(UTC)

    def as_dict(self) -> dict[str, Any]:
        """Return the settings as JSON-ready values."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


def _label(name: str, origin: Mapping[str, str] | None) -> str:
    """How an error names the setting ``name``: with the variable it was read from, if any."""
    where = (origin or {}).get(name)
    return f"{where} ({name})" if where else name


_DAY_MS = 86_400_000
_FOREVER_DAYS = 365_250.0  # a thousand years: past it no decay figure differs
# Each number's inclusive range: what every code path can use (a negative count, a timeout past
# a day, an integer SQLite cannot store, a weight that overflows a score to inf are refused).
# Where the API and the CLI bound an argument too (limits.py), the setting takes that range.
RANGES: dict[str, tuple[float, float]] = {
    "max_concept_length": (1, limits.MAX_CONCEPT_LENGTH),
    "max_concepts_per_file": (1, 1_000_000),
    "max_file_bytes": (1, 1 << 32),
    "batch_files": (1, 100_000),
    "workers": (0, 1024),
    "grace_days": (0.0, _FOREVER_DAYS),
    "half_life_days": (0.0, _FOREVER_DAYS),
    "depth": (limits.CONTEXT_DEPTH.low, limits.CONTEXT_DEPTH.high),
    "max_entities": (limits.CONTEXT_MAX_ENTITIES.low, limits.CONTEXT_MAX_ENTITIES.high),
    "expansion_frontier": (0, 1000),
    **{
        name: (bound.low, bound.high)
        for name, bound in (
            ("search_limit", limits.SEARCH_LIMIT),
            ("retrieve_k", limits.RETRIEVE_K),
            ("retrieve_budget_tokens", limits.RETRIEVE_BUDGET_TOKENS),
            ("visualize_depth", limits.VISUALIZE_DEPTH),
            ("visualize_max_nodes", limits.VISUALIZE_MAX_NODES),
        )
    },
    "preview_chars": (0, 100_000),
    "community_min_shared": (0, 1_000_000),
    "community_min_overlap": (0.0, 1.0),
    "community_max_siblings": (0, 1000),
    "weights_min_notes": (0, 1 << 31),
    "community_leiden_min_edges": (0, 1 << 62),
    "community_resolution": (0.0, 1000.0),
    "community_seed": (0, (1 << 63) - 1),
    "expand_max_depth": (limits.EXPAND_MAX_DEPTH.low, limits.EXPAND_MAX_DEPTH.high),
    "expand_max_nodes": (limits.EXPAND_MAX_NODES.low, limits.EXPAND_MAX_NODES.high),
    "expand_min_weight": (0.0, 1000.0),
    "expand_hub_degree": (1, 1_000_000),
    "expand_min_length": (0, 1000),
    "retrieve_candidates": (1, 10_000),
    "retrieve_seeds": (1, 1000),
    "retrieve_graph_weight": (0.0, 1000.0),
    "retrieve_import_weight": (0.0, 1000.0),
    "retrieve_reference_weight": (0.0, 1000.0),
    "retrieve_concept_weight": (0.0, 1000.0),
    "retrieve_concept_fanout": (1, 1 << 31),
    "retrieve_hub_damping": (0.0, 1000.0),
    "retrieve_prior_weight": (0.0, 1000.0),
    "busy_timeout_ms": (0, _DAY_MS),
    "lock_retry_seconds": (0.0, _DAY_MS / 1000),
}


def parse_datetime(raw: str) -> datetime:
    """Parse ISO 8601 (a date, or a datetime; naive means UTC) into an aware UTC datetime."""
    text = raw.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidArgument(f"not an ISO 8601 date or datetime: {raw!r}") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:  # 9999-12-31T23:59:59-12:00 is past year 9999
        raise InvalidArgument(f"the date or datetime {raw!r} is out of range in UTC") from exc


def _parse(variable: str, name: str, type_name: Any, raw: str) -> Any:
    """The value of setting ``name`` that ``raw``, read from ``variable``, spells."""
    kind = str(type_name)
    try:
        if name == "now":
            return parse_datetime(raw)
        if kind.startswith("tuple"):
            return tuple(w.strip().lower() for w in raw.split(",") if w.strip())
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except InvalidArgument as exc:  # parsed, but out of range
        raise InvalidArgument(f"{variable}: {exc}") from exc
    except ValueError as exc:
        raise InvalidArgument(f"{variable}: cannot parse {raw!r}") from exc
    return raw
