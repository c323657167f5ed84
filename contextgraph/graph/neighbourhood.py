"""Per-process cache of concept neighbourhoods for BuildContext.

Each entry is filled by one indexed SQL query (never the whole graph) and is valid for one
*graph version*: a counter that every writer changing concepts, relations, reference times or
communities bumps in the same transaction. A reader checks the version with a primary-key lookup
before using the cache, so it never serves data another process has changed.

Decay weights depend on *now* through whole days of age, so a scored neighbourhood also records
the next instant at which any of its notes' ages (past the grace period) ticks over, and is only
reused for a *now* between the one it was computed for and that instant. Every answer is exact.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal

from sqlalchemy import Connection, Engine

from contextgraph.graph.relationsql import (
    COUNTS,
    OVERLAPS,
    REACHES_PAST,
    RELATION_COUNT,
    RELATION_ROWS,
    RELATIONS_OF,
    STRENGTHS,
    WALK,
    adjacency_statement,
    entity_names,
    members_statement,
    scored_statement,
    unseen_statement,
)
from contextgraph.settings import Settings
from contextgraph.store.dialect import engine_key
from contextgraph.store.meta import graph_version
from contextgraph.store.sqlcore import chunked, compiled_tuples

MAX_EDGES = 2_000_000  # cached neighbour entries per database before the cache starts over


FIRST_RANKS = 32  # ranks of a precomputed list read by the first look (then doubling)
# Neighbours of a computed list fetched at first: a longer list is kept as a prefix, and read
# whole only when a reader goes past it (see Scored). BuildContext reads a few dozen ranks of a
# hub's thousands; fetching every row into Python cost a third of computing such a list.
PREFIX_ROWS = 1024


@dataclass
class Scored:
    """The neighbours of one concept: id -> (co-occurrence count, sum of note weights).

    ``ranked`` lists them by weightedScore desc, count desc, name, as far as :meth:`at` has been
    asked. A complete list (``more`` is None) holds every neighbour in ``edges``:
    - computed here, it keeps ``order``, every neighbour by weightedScore and count, and ranks
      on demand: :meth:`at` takes the next stretch of ``order`` (ending where a tie ends), reads
      the names of those neighbours through ``names`` and orders the ties by name. BuildContext
      reads a few dozen ranks of a hub's thousands, so the rest is never named nor ordered;
    - read from the precomputed lists, it is ranked already.
    A list may be a prefix, and then ``edges`` holds only the neighbours read so far:
    - computed here (``prefix``), ``order`` holds the first :data:`PREFIX_ROWS` + 1 neighbours
      or more; once a reader needs a rank, or a tie, past them, :meth:`at` reads the whole list
      through ``whole`` (in the reader's own read transaction: a cached list is valid for the
      graph version and every *now* before ``valid_until``, so that read gives the same rows);
    - read from the precomputed lists, :meth:`at` reads further ranks on demand through
      ``more`` (inside the read transaction that made the list).
    """

    edges: dict[int, tuple[int, float]]
    ranked: list[int]
    computed_at: float = 0.0
    valid_until: float = math.inf
    more: Callable[[int, int], list[tuple[int, int, float]]] | None = None
    order: list[int] = field(default_factory=list)
    names: Callable[[list[int]], dict[int, tuple[str, int | None]]] | None = None
    prefix: bool = False
    whole: Callable[[], Scored] | None = None

    @property
    def complete(self) -> bool:
        return self.more is None and not self.prefix

    def at(self, rank: int) -> int | None:
        """The neighbour at ``rank`` (0-based), or None past the end of the list."""
        while rank >= len(self.ranked) and (len(self.ranked) < len(self.order) or self.prefix):
            start = len(self.ranked)
            self._rank(start + max(FIRST_RANKS, start, rank + 1 - start))
        while rank >= len(self.ranked) and self.more is not None:
            start = len(self.ranked)
            want = max(FIRST_RANKS, start, rank + 1 - start)
            rows = self.more(start, start + want)
            for n, co, total in rows:
                self.edges[n] = (co, total)
                self.ranked.append(n)
            if len(rows) < want:
                self.more = None
        return self.ranked[rank] if rank < len(self.ranked) else None

    def view(
        self,
        names: Callable[[list[int]], dict[int, tuple[str, int | None]]],
        whole: Callable[[], Scored],
    ) -> Scored:
        """This list for one caller: a computed list's ranks are its own (cached lists are
        shared by the threads of a process), its names read through ``names`` and, past a
        prefix, the whole list through ``whole``."""
        if not self.order:
            return self
        return Scored(
            self.edges,
            [],
            self.computed_at,
            self.valid_until,
            None,
            self.order,
            names,
            self.prefix,
            whole if self.prefix else None,
        )

    def _read_whole(self) -> None:
        """Swap a computed prefix for the whole list (the prefix's ranks stay: same order)."""
        assert self.whole is not None, "a computed prefix is read through a view"
        full = self.whole()
        self.edges, self.order, self.prefix, self.whole = full.edges, full.order, False, None

    def _rank(self, stop: int) -> None:
        """Rank ``order`` up to ``stop`` at least, and on to the end of the tie there."""
        if self.prefix and stop >= len(self.order):
            self._read_whole()
        start = len(self.ranked)
        stop = min(stop, len(self.order))
        last = rank_key(self.edges[self.order[stop - 1]])
        while True:
            order, edges = self.order, self.edges
            while stop < len(order) and rank_key(edges[order[stop]]) == last:
                stop += 1
            if stop < len(order) or not self.prefix:
                break
            self._read_whole()  # the tie may go on past the prefix
        stretch = order[start:stop]
        assert self.names is not None, "a computed list is ranked through a view"
        names = self.names(stretch)
        # ``order`` is sorted by rank_key without the name (the statement's ORDER BY): sorting a
        # stretch that ends at a tie's end by the whole key ranks it exactly as sorting the
        # whole list would.
        stretch.sort(key=lambda n: (*rank_key(edges[n]), names[n][0]))
        self.ranked.extend(stretch)


# Community siblings: counting the relation rows of either way stops at this many (see
# Neighbourhoods.walk_is_cheaper); past it both ways read that much, and either may be chosen.
SIBLING_COUNT_CAP = 200_000


@dataclass
class _State:
    key: tuple[str, str, float, float] | None = None
    names: dict[int, tuple[str, int | None]] = field(default_factory=dict)
    adjacency: dict[int, dict[int, int]] = field(default_factory=dict)
    scored: dict[int, Scored] = field(default_factory=dict)
    strengths: dict[int, int] = field(default_factory=dict)
    members: dict[int, frozenset[int]] = field(default_factory=dict)
    # (query, min_shared, min_overlap, candidates) -> what overlaps() found; counts only, so
    # no decay in it
    overlaps: dict[tuple[int, int, float, tuple[int, ...]], dict[int, tuple[int, int, int]]] = (
        field(default_factory=dict)
    )
    # (concept, others) -> what counts() read: a candidate's counts with the frontier lists
    # that are prefixes, asked again by every later call that expands through them
    counts: dict[tuple[int, tuple[int, ...]], dict[int, int]] = field(default_factory=dict)
    edges: int = 0
    asked: bool = False  # whether a question was asked of this state (see reaching_past)


class Neighbourhoods:
    """Cached neighbourhood lookups bound to one read transaction (see the module docstring).

    The cache is process-wide, one state per database URL, rather than owned by a
    ``ContextGraph``: every use checks the graph version inside the caller's read transaction,
    so a state can be shared safely by every facade, engine and thread of the process on that
    database, and short-lived facades (the library used one call at a time, scripts, tests) still
    find it warm. A state is dropped when the version or the decay settings change or it holds
    more than :data:`MAX_EDGES` entries.
    """

    _states: ClassVar[dict[str, _State]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, engine: Engine, conn: Connection, settings: Settings, now: float) -> None:
        self.conn = conn
        self.settings = settings
        self.now = now
        version = graph_version(conn)
        key = (version, settings.decay_model, settings.grace_days, settings.half_life_days)
        url = engine_key(engine)
        with self._lock:
            state = self._states.get(url)
            if state is None or state.key != key or state.edges > MAX_EDGES:
                state = _State(key=key)
                self._states[url] = state
        self.state, self.first = state, not state.asked
        state.asked = True
        self.version = key[0]
        self._precomputed: bool | None = None  # whether contextgraph.graph.weights may be read

    def _weights_valid(self) -> bool:
        if self._precomputed is None:
            from contextgraph.graph import weights

            stored = weights.stored_state(self.conn)
            self._precomputed = stored is not None and stored == weights.state_for(
                self.version, self.settings
            )
        return self._precomputed

    def names(self, ids: Iterable[int]) -> dict[int, tuple[str, int | None]]:
        """id -> (name, community id) for concept ids."""
        known = self.state.names
        known.update(entity_names(self.conn, [i for i in ids if i not in known]))
        return known

    def adjacency(self, cid: int) -> dict[int, int]:
        """neighbour id -> co-occurrence count, from the stored relations."""
        cached = self.state.adjacency.get(cid)
        if cached is not None:
            return cached
        out: dict[int, int] = dict(
            compiled_tuples(self.conn, ("adjacency",), adjacency_statement, {"c": cid})
        )
        self.state.adjacency[cid] = out
        self.state.edges += len(out)
        return out

    def unread_adjacencies(self, ids: Iterable[int]) -> list[int]:
        """Those of ``ids`` whose :meth:`adjacency` is not cached yet."""
        cache = self.state.adjacency
        return [i for i in ids if i not in cache]

    def adjacencies(self, ids: Iterable[int]) -> dict[int, dict[int, int]]:
        """:meth:`adjacency` of many concepts, the missing ones read in batches."""
        ids = list(ids)
        cache = self.state.adjacency
        for chunk in chunked(self.unread_adjacencies(ids)):
            found: dict[int, dict[int, int]] = {c: {} for c in chunk}
            for side in RELATIONS_OF:
                for c, n, w in side.rows(self.conn, chunk):
                    found[int(c)][int(n)] = int(w)
            for c, around in found.items():
                cache[c] = around
                self.state.edges += len(around)
        return {i: cache[i] for i in ids}

    def can_prune_siblings(self) -> bool:
        """Whether precomputed strengths are there to bound the sibling candidates."""
        return self._weights_valid()

    def strengths(self, ids: list[int]) -> dict[int, int]:
        """Sum of co-occurrence counts per concept (its weighted degree), summed in SQL from the
        concept's notes (:data:`~contextgraph.graph.relationsql.STRENGTHS`)."""
        known = self.state.strengths
        missing = [i for i in ids if i not in known]
        if missing and self._weights_valid():
            from contextgraph.graph import weights

            known.update(weights.strengths(self.conn, missing))
            missing = []
        known.update(dict.fromkeys(missing, 0))
        for cid, total in STRENGTHS.rows(self.conn, missing):
            known[int(cid)] = int(total)
        return {i: known[i] for i in ids}

    def overlaps(
        self,
        qid: int,
        adjacent: dict[int, int],
        candidates: list[int],
        min_shared: int,
        min_overlap: float,
    ) -> dict[int, tuple[int, int, int]]:
        """c -> (shared neighbours with ``qid``, Σ min of the two counts, strength of c).

        ``adjacent`` is ``qid``'s :meth:`adjacency`, the ``candidates`` members of its
        community. Left out: candidates sharing fewer than ``min_shared`` neighbours (and
        at least one), and some whose ``overlap / strength`` is proven below ``min_overlap``;
        the strength is c's weighted degree. Three exact ways, chosen by what they would read:
        - walk the neighbours' adjacency lists in Python when they are cached, or in a process
          that has asked before and would read fewer rows so (:meth:`sibling_way`);
        - else, whichever reads fewer rows (:meth:`walk_is_cheaper`), aggregating in C: walk
          the neighbours' relations to the candidates in SQL (which sees the part of
          each member's strength the walk crossed, a lower bound of it: a member whose overlap
          is already below ``min_overlap`` of that part is dropped before its strength is
          read), or match every relation (c, n) of the candidates with (q, n) by its key.
        The answer depends on co-occurrence counts only, so it is cached with the state (which
        the graph version keys): a warm call reads nothing."""
        key = (qid, min_shared, min_overlap, tuple(candidates))
        cached = self.state.overlaps.get(key)
        if cached is not None:
            return cached
        params = {"q": qid, "k": max(1, min_shared)}
        out: dict[int, tuple[int, int, int]] = {}
        way = self.sibling_way(adjacent, candidates)
        if way == "python":
            out = self._overlaps_by_walking(adjacent, frozenset(candidates), min_shared)
        elif way == "walk":
            found: dict[int, tuple[int, int]] = {}
            for c, shared, overlap, crossed in WALK.rows(self.conn, candidates, params):
                # strength ≥ crossed, so overlap / strength ≤ overlap / crossed (also once
                # rounded: division rounds monotonically), the ratio the caller keeps.
                if overlap / crossed >= min_overlap:
                    found[int(c)] = (int(shared), int(overlap))
            strength = self.strengths(sorted(found))
            out = {c: (shared, overlap, strength[c]) for c, (shared, overlap) in found.items()}
        else:
            ends: dict[int, tuple[int, int, int]] = {}  # the sums of a candidate's two ends
            for c, shared, overlap, total in OVERLAPS.rows(self.conn, candidates, {"q": qid}):
                known = ends.get(int(c), (0, 0, 0))
                ends[int(c)] = (
                    known[0] + int(shared),
                    known[1] + int(overlap),
                    known[2] + int(total),
                )
            least = params["k"]
            out = {c: ends[c] for c in sorted(ends) if ends[c][0] >= least}
        self.state.overlaps[key] = out
        self.state.edges += len(out) + 1
        return out

    def sibling_way(
        self, adjacent: dict[int, int], candidates: list[int]
    ) -> Literal["python", "walk", "match"]:
        """How :meth:`overlaps` finds the siblings: ``python``, ``walk`` (SQL) or ``match``.

        ``python`` walks the neighbours' adjacency lists, reading the unread ones: always when
        every one is cached (nothing to read). Reading a list into Python costs several times
        what SQL spends walking a row, and pays back only when later questions find it cached:
        so a process's first sibling question (or the first since the graph changed: a CLI run
        asks one) reads no list, and a process that has asked before (a server, a library loop)
        reads them when that reads no more rows than matching the candidates would, filling the
        cache for the questions to come. Otherwise :meth:`walk_is_cheaper` decides.
        """
        unread = self.unread_adjacencies(adjacent)
        if not unread:
            return "python"
        if not self.state.overlaps:
            return "walk" if self.walk_is_cheaper(list(adjacent), candidates) else "match"
        matched = self.relation_rows(candidates, SIBLING_COUNT_CAP)
        if self.relation_rows(unread, matched + 1) <= matched:
            return "python"
        return "walk" if self.walk_is_cheaper(list(adjacent), candidates, matched) else "match"

    def _overlaps_by_walking(
        self, adjacent: dict[int, int], members: frozenset[int], min_shared: int
    ) -> dict[int, tuple[int, int, int]]:
        shared: dict[int, int] = {}
        overlap: dict[int, int] = {}
        for n, around in self.adjacencies(adjacent).items():
            w_qn = adjacent[n]
            if len(members) < len(around):
                common = [c for c in members if c in around]
            else:
                common = [c for c in around if c in members]
            for c in common:
                shared[c] = shared.get(c, 0) + 1
                overlap[c] = overlap.get(c, 0) + min(w_qn, around[c])
        candidates = sorted(c for c, k in shared.items() if k >= max(1, min_shared))
        strength = self.strengths(candidates)
        return {c: (shared[c], overlap[c], strength[c]) for c in candidates}

    def walk_is_cheaper(
        self, neighbours: list[int], candidates: list[int], matched: int | None = None
    ) -> bool:
        """Whether walking the ``neighbours``' relations reads no more rows than matching every
        relation of the ``candidates``.

        Both are counted in SQL (index entries only), the side of fewer concepts first and the
        other only as far as the first count, which costs a small fraction of either: a cold
        call at a hub whose community is mostly its neighbours matches a handful of candidates
        instead of walking a hundred thousand relations, and a concept of few neighbours in a
        large community walks them. ``matched``, when the caller has counted it already, is the
        candidates' count (up to :data:`SIBLING_COUNT_CAP`).

        The second count is skipped when the first settles it: each neighbour has a relation
        (with the query), so walking reads at least one row per neighbour; and each member of a
        community has one (a concept without relations is a community of its own), so matching
        reads at least one row per candidate. A stale community may hold a member that has
        lost its relations since; then this may choose the walk where matching was cheaper,
        never another answer (both ways are exact).
        """
        if matched is None and len(candidates) < len(neighbours):
            matched = self.relation_rows(candidates, SIBLING_COUNT_CAP)
        if matched is not None:
            if matched < len(neighbours):
                return False
            return self.relation_rows(neighbours, matched + 1) <= matched
        walked = self.relation_rows(neighbours, SIBLING_COUNT_CAP)
        if walked <= len(candidates):
            return True
        return self.relation_rows(candidates, walked) >= walked

    def relation_rows(self, ids: list[int], cap: int) -> int:
        """The relations of the concepts ``ids`` (one per end), counted up to ``cap``.

        Up to the other way's rows, the count stops at them (:data:`~contextgraph.graph.
        relationsql.RELATION_ROWS`); up to :data:`SIBLING_COUNT_CAP` only (a first count, which
        a real vault's concepts stay far below), whole index ranges are counted chunk by chunk,
        at half the cost an entry (:data:`~contextgraph.graph.relationsql.RELATION_COUNT`), the
        cap checked between chunks. Either way the same value: ``min(relations, cap)``."""
        found = 0
        for chunk in chunked(ids):
            if found >= cap:
                break
            if cap >= SIBLING_COUNT_CAP:
                rows = RELATION_COUNT.rows(self.conn, chunk)
            else:
                rows = RELATION_ROWS.rows(self.conn, chunk, {"cap": cap - found})
            for (counted,) in rows:
                found += int(counted)
        return min(found, cap)

    def members(self, community_id: int) -> frozenset[int]:
        """The concept ids of one community."""
        cached = self.state.members.get(community_id)
        if cached is None:
            rows = compiled_tuples(self.conn, ("members",), members_statement, {"cm": community_id})
            cached = frozenset(int(r[0]) for r in rows)
            self.state.members[community_id] = cached
        return cached

    def ranked(self, cid: int, *, skipping: Collection[int] = ()) -> Scored:
        """Every neighbour with its exact weightedScore (sum of its shared notes' weights),
        ranked as far as :meth:`Scored.at` asks.

        A precomputed list is read only that far; such a prefix is not kept in the process
        cache (further ranks must come from the same read transaction); a complete list read or
        computed here is. For a reader that skips the neighbours in ``skipping``, when they
        could fill a computed prefix, the list is computed without them: :meth:`_unseen`.
        """
        cached = self._cached(cid)
        if cached is not None:
            return cached
        if self._weights_valid():
            from contextgraph.graph import weights

            found = weights.load(self.conn, cid, self.now, limit=FIRST_RANKS)
            if found is not None:
                rows, valid_until = found
                if len(rows) < FIRST_RANKS:  # that was all of it
                    return self._remember(cid, rows, valid_until)
                edges = self._edges_of(rows)
                return Scored(edges, list(edges), self.now, valid_until, self._reader(cid))
        if len(skipping) >= PREFIX_ROWS:
            return self._unseen(cid, list(skipping))
        return self._compute(cid)

    def _unseen(self, cid: int, seen: list[int], *, prefix: bool = True) -> Scored:
        """``cid``'s list without the neighbours ``seen``, a prefix first (as :meth:`_compute`),
        never cached: a hop at a hub skips them all, past the whole list's prefixes."""
        values = {"cid": cid, "now": self.now, **({"rows": PREFIX_ROWS + 1} if prefix else {})}
        rows = unseen_statement(self.settings, prefix).rows(self.conn, seen, values)
        edges = {row[0]: (row[1], float(row[2])) for row in rows}
        more = prefix and len(rows) > PREFIX_ROWS
        whole = partial(self._unseen, cid, seen, prefix=False) if more else None
        return Scored(
            edges, [], self.now, order=list(edges), names=self.names, prefix=more, whole=whole
        )

    def _reader(self, cid: int) -> Callable[[int, int], list[tuple[int, int, float]]]:
        from contextgraph.graph import weights

        known = self.state.names

        def more(start: int, stop: int) -> list[tuple[int, int, float]]:
            out = []
            for n, co, total, name, community in weights.ranks(self.conn, cid, start, stop):
                known[n] = (name, community)
                out.append((n, co, total))
            return out

        return more

    def counts(self, cid: int, others: Iterable[int]) -> dict[int, int]:
        """other -> co-occurrence count with ``cid``, for the ``others`` related to it.

        Read from the stored relations, whose counts are those of the co-occurrence join (both
        count the notes within the concept limit that mention the two)."""
        adjacent = self.state.adjacency.get(cid)
        ids = tuple(others)
        if adjacent is not None:
            return {o: adjacent[o] for o in ids if o in adjacent}
        cached = self.state.counts.get((cid, ids))
        if cached is None:
            rows = COUNTS.rows(self.conn, ids, {"c": cid})
            cached = self.state.counts[(cid, ids)] = {int(o): int(count) for o, count in rows}
            self.state.edges += len(cached) + 1
        return cached

    def reaching_past(self, frontier: Iterable[int], seen: Collection[int]) -> list[int]:
        """The ``frontier`` concepts, in order, but those whose every neighbour is in ``seen``
        (:data:`~contextgraph.graph.relationsql.REACHES_PAST`). Only a state's first question
        asks: a process that asks again computes the lists (a later question finds them)."""
        if not self.first:
            return list(frontier)
        listed, reach = list(seen), partial(REACHES_PAST.rows, self.conn)
        held = self.state.scored  # a list held already costs nothing to read
        return [v for v in frontier if v in held or reach(listed, {"cid": v})[0][0]]

    def _cached(self, cid: int) -> Scored | None:
        cached = self.state.scored.get(cid)
        if cached is not None and cached.computed_at <= self.now < cached.valid_until:
            return cached.view(self.names, partial(self._whole, cid))
        return None

    def _compute(self, cid: int) -> Scored:
        """A concept's list, up to :data:`PREFIX_ROWS` + 1 neighbours: a prefix if there are
        more, valid until the first tick of any of the concept's notes."""
        s = self.settings
        rows = compiled_tuples(
            self.conn,
            ("scored-prefix", s.decay_model, s.grace_days, s.half_life_days),
            lambda: scored_statement(s, prefix=True),
            {"cid": cid, "now": self.now, "rows": PREFIX_ROWS + 1},
        )
        result = self._scored(cid, rows, prefix=len(rows) > PREFIX_ROWS)
        return result.view(self.names, partial(self._whole, cid))

    def _whole(self, cid: int) -> Scored:
        """A concept's whole list, cached in place of its prefix."""
        s = self.settings
        rows = compiled_tuples(
            self.conn,
            ("scored", s.decay_model, s.grace_days, s.half_life_days),
            lambda: scored_statement(s),
            {"cid": cid, "now": self.now},
        )
        return self._scored(cid, rows)

    def _scored(self, cid: int, rows: Sequence[tuple[Any, ...]], *, prefix: bool = False) -> Scored:
        """Cache the list of ``rows`` (n, count, weight sum, first tick of the concept's notes),
        in rank order: the whole list or (``prefix``) its first rows, valid until that tick."""
        edges = {row[0]: (row[1], float(row[2])) for row in rows}
        first_tick = rows[0][3] if rows else None
        valid_until = math.inf if first_tick is None else float(first_tick)
        result = Scored(edges, [], self.now, valid_until, order=list(edges), prefix=prefix)
        self.state.scored[cid] = result
        self.state.edges += len(edges)
        return result

    def _remember(
        self, cid: int, rows: list[tuple[int, int, float, str, int | None]], valid_until: float
    ) -> Scored:
        """Cache a precomputed list (already in rank order, names and communities included)."""
        edges = self._edges_of(rows)
        result = Scored(edges, list(edges), self.now, valid_until)
        self.state.scored[cid] = result
        self.state.edges += len(edges)
        return result

    def _edges_of(
        self, rows: list[tuple[int, int, float, str, int | None]]
    ) -> dict[int, tuple[int, float]]:
        """The edges of precomputed rows (in rank order); their names join the known ones."""
        known = self.state.names
        edges: dict[int, tuple[int, float]] = {}
        for n, co, total, name, community in rows:
            edges[n] = (co, total)
            known[n] = (name, community)
        return edges


def weighted_score(edge: tuple[int, float]) -> float:
    """weightedScore = count × (mean weight), computed as the spec states it."""
    co, total = edge
    return co * (total / co)


def rank_key(edge: tuple[int, float]) -> tuple[float, int]:
    """A neighbour's place in its list before the name: weightedScore desc, then count desc."""
    return (-weighted_score(edge), -edge[0])


__all__ = ["Neighbourhoods", "Scored", "weighted_score"]
