"""The pure partition (SPEC §6): igraph's Louvain or Leiden under a seed, and stable ids.

No database here: :mod:`contextgraph.graph.communities` reads the concept graph, calls
:func:`partition` and :func:`assign_stable_ids`, and stores what they return.

Determinism: the same vertices, edges and arguments give the same partition in any process. The
seed is an argument (as in networkx's ``louvain_communities``). igraph's random number generator is
global; :func:`partition` installs ``random.Random(seed)`` for the call only and puts igraph's
default (the :mod:`random` module) back afterwards — python-igraph has no getter, so the previous
generator cannot be read back; nothing in contextgraph installs another.

Stable ids: each new community takes the id of the previous community it overlaps most
(Jaccard), greedily from the best-overlapping pair down; the rest get fresh ids from a high-water
mark the caller keeps, so an id is never given to two different communities over time.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from contextgraph.errors import InvalidArgument
from contextgraph.settings import COMMUNITY_ALGORITHMS

LEIDEN_ITERATIONS = 2  # igraph's default; each further pass costs about a Louvain run more

_rng_lock = threading.Lock()


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Give igraph a generator seeded with ``seed`` for the duration of the block."""
    import igraph

    with _rng_lock:
        igraph.set_random_number_generator(random.Random(seed))
        try:
            yield
        finally:
            igraph.set_random_number_generator(random)


def check_arguments(algorithm: str, resolution: float) -> None:
    if algorithm not in COMMUNITY_ALGORITHMS:
        raise InvalidArgument(f"algorithm must be one of {', '.join(COMMUNITY_ALGORITHMS)}")
    if not resolution > 0:
        raise InvalidArgument("resolution must be positive")


def partition(
    n: int,
    pairs: list[tuple[int, int]],
    weights: list[float],
    *,
    algorithm: str,
    resolution: float,
    seed: int,
) -> tuple[list[int], float]:
    """Partition vertices ``0..n-1``; ``pairs``/``weights`` hold only positive, non-loop edges.

    igraph is imported here, not with the module (20-30 ms): a sync checks its arguments through
    this module before it claims the run, and loads igraph only once the caller's work beside
    the run has started (:func:`contextgraph.graph.communities.recompute`).
    """
    check_arguments(algorithm, resolution)
    if not pairs:
        return list(range(n)), 0.0
    import igraph

    graph = igraph.Graph(n=n, edges=pairs, directed=False)
    graph.es["weight"] = weights
    with _seeded(seed):
        if algorithm == "louvain":
            clustering = graph.community_multilevel(weights="weight", resolution=resolution)
        else:
            clustering = graph.community_leiden(
                objective_function="modularity",
                weights="weight",
                resolution=resolution,
                n_iterations=LEIDEN_ITERATIONS,
            )
    raw: list[int] = clustering.membership
    degree: list[int] = graph.degree()
    # Renumber by first appearance in vertex (name) order; an isolated vertex is always alone.
    labels: dict[int, int] = {}
    membership = [0] * n
    for v in range(n):
        if degree[v] == 0:
            membership[v] = len(labels)
            labels[-1 - v] = membership[v]
            continue
        label = labels.get(raw[v])
        if label is None:
            label = labels[raw[v]] = len(labels)
        membership[v] = label
    modularity = float(graph.modularity(membership, weights="weight", resolution=1))
    return membership, (modularity if math.isfinite(modularity) else 0.0)


def detect(
    names: Sequence[str],
    edges: Sequence[tuple[int, int, float]],
    *,
    algorithm: str,
    resolution: float,
    seed: int,
) -> tuple[list[int], float]:
    """Partition a weighted graph; return ``(membership, modularity)``.

    Vertex ``i`` is ``names[i]`` (callers pass names sorted, which makes the result depend only on
    the graph); ``edges`` are ``(i, j, weight)``. Edges with a non-positive weight and self-loops
    are ignored. ``membership[i]`` is the community of vertex ``i``, numbered ``0, 1, ...`` by first
    appearance; every vertex without an edge is alone in its community. The modularity is igraph's
    standard (resolution 1) weighted modularity of that membership, ``0.0`` for an edgeless graph.
    """
    n = len(names)
    pairs: list[tuple[int, int]] = []
    weights: list[float] = []
    for i, j, w in edges:
        if not (0 <= i < n and 0 <= j < n):
            raise InvalidArgument(f"edge ({i}, {j}) names a vertex outside 0..{n - 1}")
        if i != j and w > 0:
            pairs.append((i, j))
            weights.append(w)
    return partition(n, pairs, weights, algorithm=algorithm, resolution=resolution, seed=seed)


def assign_stable_ids(
    previous: Mapping[int, frozenset[str]],
    new: Sequence[frozenset[str]],
    next_id: int,
) -> dict[int, frozenset[str]]:
    """Give each new community an id, reusing the previous ids of the communities it continues.

    All (new, previous) pairs that share a member are ranked by Jaccard similarity desc, then the
    new community's size desc, then the previous id asc, then the new community's smallest member;
    going down that list a pair is matched when neither side is matched yet. Unmatched new
    communities get fresh ids ``next_id, next_id + 1, ...`` (raised above every previous id if
    needed) in order of size desc, then smallest member. Empty new communities are dropped.
    """
    communities = [c for c in new if c]
    owner: dict[str, int] = {}
    for cid, members in previous.items():
        for name in members:
            owner[name] = cid
    old_size = Counter(owner.values())
    smallest = [min(c) for c in communities]
    ranked: list[tuple[float, int, int, str, int]] = []
    for k, members in enumerate(communities):
        overlap = Counter(owner[name] for name in members if name in owner)
        for cid, inter in overlap.items():
            jaccard = inter / (len(members) + old_size[cid] - inter)
            ranked.append((-jaccard, -len(members), cid, smallest[k], k))
    ranked.sort()
    result: dict[int, frozenset[str]] = {}
    matched: set[int] = set()
    for _, _, cid, _, k in ranked:
        if k in matched or cid in result:
            continue
        result[cid] = communities[k]
        matched.add(k)
    fresh = max([next_id, *(cid + 1 for cid in previous)])
    rest = sorted(
        (k for k in range(len(communities)) if k not in matched),
        key=lambda k: (-len(communities[k]), smallest[k], k),
    )
    for k in rest:
        result[fresh] = communities[k]
        fresh += 1
    return result


__all__ = ["LEIDEN_ITERATIONS", "assign_stable_ids", "check_arguments", "detect", "partition"]
