"""Render a concept neighbourhood as a Mermaid ``flowchart``.

The output is meant to be pasted into a ```` ```mermaid ```` block, so it must parse whatever the
concept names are. Hence:

* node ids are synthetic (``n1`` is the centre, then ``n2``, ``n3``, ... in input order) and
  subgraph ids are ``c<community id>`` (``cneg<n>`` for a negative id), so no name ever
  appears where Mermaid expects an identifier or keyword (``end``, ``subgraph``, ``-->``);
* names only appear as quoted labels (``n2["..."]``), escaped by :func:`escape_label`;
* edges are undirected (``---``), labelled with their co-occurrence count, strongest first,
  and never more than :data:`MAX_EDGES` (Mermaid's default ``maxEdges``).

Layout of the text, in order: the header ``flowchart LR``, the ``classDef`` of the centre
style, the nodes without a community, one ``subgraph`` block per community (ascending id), the
edges, and ``class n1 center``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CENTER_CLASS",
    "MAX_EDGES",
    "MermaidEdge",
    "MermaidNode",
    "escape_label",
    "render_flowchart",
]

MAX_EDGES = 500
"""Mermaid refuses to render a diagram with more edges than this (its default ``maxEdges``)."""

CENTER_CLASS = "center"
_CENTER_STYLE = "fill:#ffe08a,stroke:#b8860b,stroke-width:3px"
_INDENT = "    "

# Characters with a meaning inside or around a quoted Mermaid label, as Mermaid entity codes
# (``#name;`` or decimal ``#NN;``, decoded by Mermaid to the HTML entity ``&name;``/``&#NN;``):
#   "          ends the label;
#   #          starts an entity code itself;
#   < > &      HTML (labels are rendered as HTML);
#   `          a leading "` starts a markdown string;
#   [ ] { } |  node-shape and edge-label delimiters;
#   :          Mermaid's pre-parse rewrites lines matching ``style.*:\S*#.*;`` and
#              ``classDef.*:\S*#.*;``, which a label with a colon and an entity could hit;
#   %          ``%%`` starts a comment;
#   ° ¶        Mermaid encodes entity codes as the placeholders ``ﬂ°``/``ﬂ°°`` and ``¶ß``
#              before parsing and decodes them afterwards; breaking these characters up keeps
#              a literal placeholder in a name from decoding into an entity.
_ENTITIES: dict[str, str] = {
    '"': "#quot;",
    "#": "#35;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "`": "#96;",
    "[": "#91;",
    "]": "#93;",
    "{": "#123;",
    "}": "#125;",
    "|": "#124;",
    ":": "#58;",
    "%": "#37;",
    "°": "#176;",
    "¶": "#182;",
    # Bidirectional controls: printed as they are, they reorder what a terminal shows.
    **{chr(c): f"#{c};" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F))},
    **{chr(c): f"#{c};" for c in range(0x2066, 0x206A)},
}

# Characters that end or break a line for Mermaid's (JavaScript) lexer, or cannot be
# represented at all, are replaced: control characters (Cc: \n, \r, \t, \x85, ...) and the
# line/paragraph separators U+2028/U+2029 by a space, lone surrogates by U+FFFD.
_SPACE_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
_REPLACEMENT = "\ufffd"


@dataclass(frozen=True)
class MermaidNode:
    """A concept in the neighbourhood; ``community_id`` None puts it outside any subgraph."""

    name: str
    community_id: int | None


@dataclass(frozen=True)
class MermaidEdge:
    """An undirected co-occurrence edge between the concepts named ``a`` and ``b``."""

    a: str
    b: str
    weight: int


def escape_label(name: str) -> str:
    """Return ``name`` as text that is safe between the quotes of ``["..."]`` in Mermaid.

    Control characters and line separators become spaces, lone surrogates become U+FFFD, and
    the characters Mermaid could interpret (see ``_ENTITIES``) become entity codes, so the
    result contains no ``"``, and every ``#`` in it starts a complete entity code.
    """
    out: list[str] = []
    for ch in name:
        entity = _ENTITIES.get(ch)
        if entity is not None:
            out.append(entity)
            continue
        category = unicodedata.category(ch)
        if category in _SPACE_CATEGORIES:
            out.append(" ")
        elif category == "Cs":
            out.append(_REPLACEMENT)
        else:
            out.append(ch)
    return "".join(out)


def _label(name: str) -> str:
    # Mermaid rejects an empty quoted label (``n2[""]``); show an empty name as a blank box.
    return escape_label(name) or " "


def _subgraph_id(community_id: int) -> str:
    return f"c{community_id}" if community_id >= 0 else f"cneg{-community_id}"


def render_flowchart(
    center: str,
    nodes: Sequence[MermaidNode],
    edges: Sequence[MermaidEdge],
    *,
    max_edges: int = MAX_EDGES,
) -> str:
    """Render the neighbourhood of ``center`` as Mermaid ``flowchart`` text (ends with a newline).

    ``center`` gets id ``n1`` and the centre style; ``nodes`` get ``n2``, ``n3``, ... in the
    given order. A node whose name was already seen (including the centre's) is skipped; the
    first entry for a name decides its community, so the centre is placed in the community of
    its own entry in ``nodes`` if it has one. Edges are sorted by weight (descending), then by
    their two names; edges naming an unknown node, self-loops and repeats of an already kept
    pair (either orientation) are dropped, and at most ``min(max_edges, MAX_EDGES)`` are kept.

    Raises ``ValueError`` if ``max_edges`` is negative.
    """
    if max_edges < 0:
        raise ValueError(f"max_edges must be >= 0, got {max_edges}")
    limit = min(max_edges, MAX_EDGES)

    ids: dict[str, str] = {center: "n1"}
    communities: dict[str, int | None] = {center: None}
    order: list[str] = [center]
    center_listed = False
    for node in nodes:
        if node.name == center and not center_listed:
            center_listed = True
            communities[center] = node.community_id
        if node.name in ids:
            continue
        ids[node.name] = f"n{len(ids) + 1}"
        communities[node.name] = node.community_id
        order.append(node.name)

    lines = ["flowchart LR", f"{_INDENT}classDef {CENTER_CLASS} {_CENTER_STYLE}"]

    grouped: dict[int, list[str]] = {}
    for name in order:
        community = communities[name]
        if community is None:
            lines.append(f'{_INDENT}{ids[name]}["{_label(name)}"]')
        else:
            grouped.setdefault(community, []).append(name)
    for community in sorted(grouped):
        lines.append(f'{_INDENT}subgraph {_subgraph_id(community)}["Community {community}"]')
        for name in grouped[community]:
            lines.append(f'{_INDENT * 2}{ids[name]}["{_label(name)}"]')
        lines.append(f"{_INDENT}end")

    ranked = sorted(
        (edge for edge in edges if edge.a in ids and edge.b in ids and edge.a != edge.b),
        key=lambda edge: (-edge.weight, min(edge.a, edge.b), max(edge.a, edge.b)),
    )
    kept: set[frozenset[str]] = set()
    for edge in ranked:
        if len(kept) >= limit:
            break
        pair = frozenset((edge.a, edge.b))
        if pair in kept:
            continue
        kept.add(pair)
        lines.append(f'{_INDENT}{ids[edge.a]} ---|"{int(edge.weight)}"| {ids[edge.b]}')

    lines.append(f"{_INDENT}class n1 {CENTER_CLASS}")
    return "\n".join(lines) + "\n"
