"""Mermaid picture of a concept's neighbourhood (SPEC §9), strongest edges first."""

from __future__ import annotations

from sqlalchemy import Connection, select, union_all

from contextgraph.graph.context import find_concept
from contextgraph.graph.mermaid import MAX_EDGES, MermaidEdge, MermaidNode, render_flowchart
from contextgraph.graph.relationsql import entity_names
from contextgraph.limits import VISUALIZE_DEPTH, VISUALIZE_MAX_NODES
from contextgraph.store.models import T_CREL


def visualize(conn: Connection, concept: str, *, depth: int = 2, max_nodes: int = 30) -> str:
    """Render up to ``max_nodes`` concepts within ``depth`` hops as a Mermaid flowchart."""
    VISUALIZE_DEPTH.check(depth)
    VISUALIZE_MAX_NODES.check(max_nodes)
    key, found = find_concept(conn, concept)
    if found is None:
        return render_flowchart(key, [], [])
    cr = T_CREL
    kept: dict[int, None] = {found[0]: None}
    frontier = [found[0]]
    for _ in range(depth):
        if not frontier or len(kept) >= max_nodes:
            break
        edges = union_all(
            select(cr.c.b_id.label("n"), cr.c.count).where(cr.c.a_id.in_(frontier)),
            select(cr.c.a_id.label("n"), cr.c.count).where(cr.c.b_id.in_(frontier)),
        ).subquery()
        strongest: dict[int, int] = {}
        for n, count in conn.execute(select(edges.c.n, edges.c.count)):
            if n not in kept and count > strongest.get(n, 0):
                strongest[n] = count
        names = entity_names(conn, list(strongest))
        ranked = sorted(strongest, key=lambda n: (-strongest[n], names[n][0]))
        frontier = ranked[: max_nodes - len(kept)]
        for n in frontier:
            kept[n] = None
    ids = list(kept)
    info = entity_names(conn, ids)
    rows = conn.execute(
        select(cr.c.a_id, cr.c.b_id, cr.c.count)
        .where(cr.c.a_id.in_(ids), cr.c.b_id.in_(ids))
        .order_by(cr.c.count.desc())
        .limit(MAX_EDGES * 4)
    )
    edges_out = [MermaidEdge(info[a][0], info[b][0], int(c)) for a, b, c in rows]
    nodes = [MermaidNode(info[n][0], info[n][1]) for n in ids]
    return render_flowchart(key, nodes, edges_out)
