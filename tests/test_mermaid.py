"""Tests for contextgraph.graph.mermaid.

``parse_flowchart`` below is a strict parser for exactly the Mermaid subset that
``render_flowchart`` emits; it raises ``DiagramError`` on anything else, so the property tests
check both that arbitrary concept names cannot break the diagram's structure and that the
labels decode back to the names.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextgraph.graph.mermaid import (
    MAX_EDGES,
    MermaidEdge,
    MermaidNode,
    escape_label,
    render_flowchart,
)

# --------------------------------------------------------------------------------------------
# A strict parser for the emitted subset
# --------------------------------------------------------------------------------------------

_ID = r"n[1-9][0-9]*"
# Label text: any character except the ones escape_label must encode, or a complete entity.
_LABEL = r'(?:[^"#<>&`\[\]{}|:%°¶]|#(?:quot|lt|gt|amp|[0-9]+);)+'
_NODE_RE = re.compile(rf'({_ID})\["({_LABEL})"\]')
_EDGE_RE = re.compile(rf'({_ID}) ---\|"(-?[0-9]+)"\| ({_ID})')
_SUBGRAPH_RE = re.compile(r'subgraph (c(?:neg)?[0-9]+)\["Community (-?[0-9]+)"\]')
_STYLE = r"[a-z-]+:[#0-9a-z]+"
_CLASSDEF_RE = re.compile(rf"classDef ([a-z]+) ({_STYLE}(?:,{_STYLE})*)")
_CLASS_RE = re.compile(rf"class ({_ID}) ([a-z]+)")
_INDENT = "    "


class DiagramError(ValueError):
    pass


@dataclass
class Diagram:
    labels: dict[str, str] = field(default_factory=dict)  # node id -> raw label, in order
    subgraph_of: dict[str, str | None] = field(default_factory=dict)  # node id -> subgraph id
    subgraphs: dict[str, int] = field(default_factory=dict)  # subgraph id -> community id
    edges: list[tuple[str, str, int]] = field(default_factory=list)
    classdefs: dict[str, str] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)  # node id -> class name


def _check_label(label: str) -> None:
    for ch in label:
        if unicodedata.category(ch) in {"Cc", "Cs", "Zl", "Zp"}:
            raise DiagramError(f"raw control/surrogate character {ch!r} in label {label!r}")


def parse_flowchart(text: str) -> Diagram:
    if not text.endswith("\n") or text.endswith("\n\n"):
        raise DiagramError("text must end with exactly one newline")
    lines = text[:-1].split("\n")
    if lines[0] != "flowchart LR":
        raise DiagramError(f"bad header {lines[0]!r}")
    diagram = Diagram()
    current: str | None = None  # open subgraph
    section = 0  # 0: classDef, 1: nodes/subgraphs, 2: edges, 3: class lines
    for number, line in enumerate(lines[1:], start=2):
        depth = 2 if current is not None and line != f"{_INDENT}end" else 1
        if not line.startswith(_INDENT * depth) or line[len(_INDENT) * depth] == " ":
            raise DiagramError(f"line {number}: bad indentation {line!r}")
        body = line[len(_INDENT) * depth :]
        if m := _CLASSDEF_RE.fullmatch(body):
            if section > 0 or current is not None or m[1] in diagram.classdefs:
                raise DiagramError(f"line {number}: misplaced classDef")
            diagram.classdefs[m[1]] = m[2]
        elif m := _NODE_RE.fullmatch(body):
            if section > 1 or m[1] in diagram.labels:
                raise DiagramError(f"line {number}: misplaced or duplicate node {m[1]}")
            section = 1
            _check_label(m[2])
            diagram.labels[m[1]] = m[2]
            diagram.subgraph_of[m[1]] = current
        elif m := _SUBGRAPH_RE.fullmatch(body):
            if section > 1 or current is not None or m[1] in diagram.subgraphs:
                raise DiagramError(f"line {number}: nested, misplaced or duplicate subgraph")
            section = 1
            current = m[1]
            diagram.subgraphs[current] = int(m[2])
        elif body == "end":
            if current is None:
                raise DiagramError(f"line {number}: 'end' outside a subgraph")
            if current not in diagram.subgraph_of.values():
                raise DiagramError(f"line {number}: empty subgraph {current}")
            current = None
        elif m := _EDGE_RE.fullmatch(body):
            if section > 2 or current is not None:
                raise DiagramError(f"line {number}: misplaced edge")
            section = 2
            if m[1] not in diagram.labels or m[3] not in diagram.labels:
                raise DiagramError(f"line {number}: edge to an undeclared node")
            diagram.edges.append((m[1], m[3], int(m[2])))
        elif m := _CLASS_RE.fullmatch(body):
            if current is not None or m[1] not in diagram.labels:
                raise DiagramError(f"line {number}: misplaced class line")
            if m[2] not in diagram.classdefs:
                raise DiagramError(f"line {number}: undefined class {m[2]}")
            section = 3
            diagram.classes[m[1]] = m[2]
        else:
            raise DiagramError(f"line {number}: unexpected {line!r}")
    if current is not None:
        raise DiagramError(f"unclosed subgraph {current}")
    if set(diagram.subgraphs) & set(diagram.labels):
        raise DiagramError("subgraph id collides with a node id")
    return diagram


_ENTITY_RE = re.compile(r"#(quot|lt|gt|amp|[0-9]+);")
_NAMED = {"quot": '"', "lt": "<", "gt": ">", "amp": "&"}


def unescape(label: str) -> str:
    return _ENTITY_RE.sub(lambda m: _NAMED.get(m[1]) or chr(int(m[1])), label)


def sanitize(name: str) -> str:
    """What a label may show of ``name``: line breaking/control characters become spaces,
    lone surrogates U+FFFD."""
    out = []
    for ch in name:
        category = unicodedata.category(ch)
        out.append(" " if category in {"Cc", "Zl", "Zp"} else "\ufffd" if category == "Cs" else ch)
    return "".join(out)


def expected_label(name: str) -> str:
    return sanitize(name) or " "  # an empty quoted label is a Mermaid syntax error


# --------------------------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------------------------

NASTY = [
    '"',
    "'",
    "#",
    ";",
    "#quot;",
    "#35;",
    "[",
    "]",
    '["',
    '"]',
    "(",
    ")",
    "{",
    "}",
    "|",
    '"|',
    "<",
    ">",
    "&",
    "`",
    "%%",
    ":",
    "\n",
    "\r\n",
    "\t",
    "\x00",
    "\x85",
    "\u2028",
    "\u2029",
    "-->",
    "---",
    "==>",
    "-.-",
    "end",
    "subgraph",
    "classDef",
    "class",
    "style",
    "click",
    "n1",
    "c1",
    "ﬂ°°35¶ß",
    "ﬂ°lt¶ß",
    "°",
    "¶",
    "é",
    "e\u0301",
    "😀",
    "\ud800",
    "\udfff",
    " ",
]

any_char = st.characters(exclude_categories=()) | st.characters(categories=["Cs"])
names = st.one_of(
    st.text(),
    st.text(alphabet=any_char, max_size=8),
    st.lists(st.sampled_from(NASTY) | st.text(alphabet=any_char, max_size=3), max_size=6).map(
        "".join
    ),
)
communities = st.none() | st.integers(min_value=-3, max_value=5)


@st.composite
def neighbourhoods(
    draw: st.DrawFn,
) -> tuple[str, list[MermaidNode], list[MermaidEdge], int]:
    center = draw(names)
    nodes = draw(st.lists(st.builds(MermaidNode, names, communities), max_size=12))
    pool = [center, *(node.name for node in nodes), *draw(st.lists(names, max_size=2))]
    endpoint = st.sampled_from(pool)
    edges = draw(
        st.lists(
            st.builds(MermaidEdge, endpoint, endpoint, st.integers(min_value=-5, max_value=99)),
            max_size=40,
        )
    )
    max_edges = draw(st.sampled_from([MAX_EDGES, 0, 1, 3, 10, 1000]))
    return center, nodes, edges, max_edges


@settings(max_examples=300, deadline=None)
@given(neighbourhoods())
def test_any_names_give_a_well_formed_diagram(
    case: tuple[str, list[MermaidNode], list[MermaidEdge], int],
) -> None:
    center, nodes, edges, max_edges = case
    diagram = parse_flowchart(render_flowchart(center, nodes, edges, max_edges=max_edges))

    # One node per distinct name, ids synthetic and numbered in input order, centre first
    # (declarations are grouped by community, so the text order may differ).
    distinct = list(dict.fromkeys([center, *(node.name for node in nodes)]))
    ids = {name: f"n{i}" for i, name in enumerate(distinct, start=1)}
    assert set(diagram.labels) == set(ids.values())
    for name, node_id in ids.items():
        assert unescape(diagram.labels[node_id]) == expected_label(name)

    # Communities: first entry for a name wins (the centre's only from its own entry).
    community: dict[str, int | None] = {center: None}
    for node in reversed(nodes):
        community[node.name] = node.community_id
    for name, node_id in ids.items():
        subgraph = diagram.subgraph_of[node_id]
        want = community[name]
        assert (None if subgraph is None else diagram.subgraphs[subgraph]) == want

    # Edges: within the limit, strongest first, only known, distinct, non-self pairs.
    limit = min(max_edges, MAX_EDGES)
    valid_pairs = {frozenset((e.a, e.b)) for e in edges if e.a in ids and e.b in ids and e.a != e.b}
    assert len(diagram.edges) == min(limit, len(valid_pairs))
    weights = [w for _, _, w in diagram.edges]
    assert weights == sorted(weights, reverse=True)
    emitted_pairs = [frozenset((a, b)) for a, b, _ in diagram.edges]
    assert len(set(emitted_pairs)) == len(emitted_pairs)
    assert all(len(pair) == 2 for pair in emitted_pairs)
    if diagram.edges:
        strongest = max(e.weight for e in edges if frozenset((e.a, e.b)) in valid_pairs)
        assert weights[0] == strongest

    assert diagram.classes == {"n1": "center"}


@settings(max_examples=500, deadline=None)
@given(names)
def test_escape_label_round_trips(name: str) -> None:
    label = escape_label(name)
    assert re.fullmatch(_LABEL, label) or label == ""
    _check_label(label)
    assert unescape(label) == sanitize(name)


# --------------------------------------------------------------------------------------------
# Unit tests
# --------------------------------------------------------------------------------------------


def test_empty_input_is_just_the_center() -> None:
    text = render_flowchart("python", [], [])
    diagram = parse_flowchart(text)
    assert diagram.labels == {"n1": "python"}
    assert diagram.edges == []
    assert diagram.subgraphs == {}
    assert diagram.subgraph_of == {"n1": None}
    assert text.splitlines()[0] == "flowchart LR"


def test_exact_output() -> None:
    text = render_flowchart(
        "python",
        [MermaidNode("java", 1), MermaidNode("rust", None), MermaidNode("go", 1)],
        [MermaidEdge("python", "java", 2), MermaidEdge("go", "python", 7)],
    )
    assert text == (
        "flowchart LR\n"
        "    classDef center fill:#ffe08a,stroke:#b8860b,stroke-width:3px\n"
        '    n1["python"]\n'
        '    n3["rust"]\n'
        '    subgraph c1["Community 1"]\n'
        '        n2["java"]\n'
        '        n4["go"]\n'
        "    end\n"
        '    n4 ---|"7"| n1\n'
        '    n1 ---|"2"| n2\n'
        "    class n1 center\n"
    )


def test_600_edges_are_cut_to_the_500_strongest() -> None:
    nodes = [MermaidNode(f"concept {i}", None) for i in range(600)]
    edges = [MermaidEdge("hub", f"concept {i}", i + 1) for i in range(600)]
    diagram = parse_flowchart(render_flowchart("hub", nodes, edges))
    assert len(diagram.edges) == MAX_EDGES == 500
    assert [w for _, _, w in diagram.edges] == list(range(600, 100, -1))
    assert len(diagram.labels) == 601  # every node is still shown


def test_max_edges_never_exceeds_mermaid_limit() -> None:
    nodes = [MermaidNode(f"c{i}", None) for i in range(40)]
    edges = [MermaidEdge(f"c{i}", f"c{j}", i * j) for i in range(40) for j in range(i + 1, 40)]
    assert len(edges) == 780
    diagram = parse_flowchart(render_flowchart("x", nodes, edges, max_edges=10_000))
    assert len(diagram.edges) == MAX_EDGES
    assert len(parse_flowchart(render_flowchart("x", nodes, edges, max_edges=7)).edges) == 7
    assert parse_flowchart(render_flowchart("x", nodes, edges, max_edges=0)).edges == []
    with pytest.raises(ValueError):
        render_flowchart("x", nodes, edges, max_edges=-1)


def test_edge_order_ties_broken_by_names() -> None:
    nodes = [MermaidNode(name, None) for name in ["b", "a", "c"]]
    edges = [MermaidEdge("c", "b", 1), MermaidEdge("b", "a", 1), MermaidEdge("x", "c", 5)]
    diagram = parse_flowchart(render_flowchart("x", nodes, edges))
    # ids: x=n1, b=n2, a=n3, c=n4; x-c is strongest, then (a, b) before (b, c).
    assert diagram.edges == [("n1", "n4", 5), ("n2", "n3", 1), ("n4", "n2", 1)]


def test_unknown_self_and_duplicate_edges_are_skipped() -> None:
    nodes = [MermaidNode("a", None), MermaidNode("b", None)]
    edges = [
        MermaidEdge("a", "ghost", 100),
        MermaidEdge("a", "a", 50),
        MermaidEdge("a", "b", 3),
        MermaidEdge("b", "a", 9),
        MermaidEdge("center", "b", 1),
    ]
    diagram = parse_flowchart(render_flowchart("center", nodes, edges))
    assert diagram.edges == [("n3", "n2", 9), ("n1", "n3", 1)]


def test_community_subgraphs() -> None:
    nodes = [
        MermaidNode("a", 2),
        MermaidNode("b", 0),
        MermaidNode("c", None),
        MermaidNode("d", 2),
        MermaidNode("e", -1),
        MermaidNode("center", 0),
    ]
    text = render_flowchart("center", nodes, [MermaidEdge("a", "d", 1)])
    diagram = parse_flowchart(text)
    assert diagram.subgraphs == {"cneg1": -1, "c0": 0, "c2": 2}
    assert list(diagram.subgraphs) == ["cneg1", "c0", "c2"]  # ascending community id
    by_label = {unescape(label): node for node, label in diagram.labels.items()}
    membership = {name: diagram.subgraph_of[node] for name, node in by_label.items()}
    assert membership == {
        "center": "c0",  # the centre's own entry in ``nodes`` gives its community
        "a": "c2",
        "b": "c0",
        "c": None,
        "d": "c2",
        "e": "cneg1",
    }
    assert len(diagram.labels) == 6  # the centre's entry is not a second node
    assert text.count("\n    end\n") == 3


def test_first_entry_for_a_name_wins() -> None:
    nodes = [MermaidNode("a", 1), MermaidNode("a", 2), MermaidNode("x", 3), MermaidNode("x", 4)]
    diagram = parse_flowchart(render_flowchart("x", nodes, []))
    assert diagram.labels == {"n1": "x", "n2": "a"}
    assert diagram.subgraph_of == {"n1": "c3", "n2": "c1"}


def test_center_is_styled() -> None:
    text = render_flowchart("hub", [MermaidNode("leaf", None)], [MermaidEdge("hub", "leaf", 1)])
    diagram = parse_flowchart(text)
    assert "center" in diagram.classdefs
    assert diagram.classes == {"n1": "center"}
    assert unescape(diagram.labels["n1"]) == "hub"
    assert text.rstrip("\n").splitlines()[-1] == "    class n1 center"


@pytest.mark.parametrize(
    "name",
    ["end", "subgraph", "END", "flowchart LR", "a --> b", 'x"]', "n1", "c1", "class n1 center"],
)
def test_keyword_like_names_do_not_break_the_diagram(name: str) -> None:
    nodes = [MermaidNode(name, 1), MermaidNode("other", 1)]
    edges = [MermaidEdge(name, "other", 4), MermaidEdge("center", name, 2)]
    for center in (name, "center"):
        text = render_flowchart(center, nodes, edges)
        diagram = parse_flowchart(text)
        assert name in {unescape(label) for label in diagram.labels.values()}
        # ``end`` only ever appears as a line closing the one subgraph
        assert [line.strip() for line in text.splitlines()].count("end") == 1


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ('say "hi"', "say #quot;hi#quot;"),
        ("C# #1", "C#35; #35;1"),
        ("a<b>&c", "a#lt;b#gt;#amp;c"),
        ("`md`", "#96;md#96;"),
        ("[x]{y}|z", "#91;x#93;#123;y#125;#124;z"),
        ("k:v 50%", "k#58;v 50#37;"),
        ("line1\nline2\r\tx\x00", "line1 line2  x "),
        ("para\u2028graph\u2029end", "para graph end"),
        ("bad\ud800surrogate", "bad\ufffdsurrogate"),
        ("ﬂ°lt¶ß", "ﬂ#176;lt#182;ß"),
        ("naïve 😀 日本", "naïve 😀 日本"),
        ("a;b -- c --> d", "a;b -- c --#gt; d"),
        ("", ""),
    ],
)
def test_escape_label_examples(name: str, label: str) -> None:
    assert escape_label(name) == label


def test_empty_name_gets_a_blank_label() -> None:
    diagram = parse_flowchart(render_flowchart("", [MermaidNode("", 1)], []))
    assert diagram.labels == {"n1": " "}
    assert diagram.subgraph_of == {"n1": "c1"}


@pytest.mark.parametrize(
    "bad",
    [
        "flowchart TD\n",
        'flowchart LR\n    n1["a"b"]\n',
        'flowchart LR\n    n1["a"]\n    n1["b"]\n',
        'flowchart LR\n    n1["a#b"]\n',
        'flowchart LR\n    n1["a"]\n    end\n',
        'flowchart LR\n    subgraph c1["Community 1"]\n        n1["a"]\n',
        'flowchart LR\n    n1["a"]\n    n1 ---|"1"| n2\n',
        'flowchart LR\n    n1["a\nb"]\n',
        'flowchart LR\n    end["a"]\n',
    ],
)
def test_parser_rejects_malformed_text(bad: str) -> None:
    with pytest.raises(DiagramError):
        parse_flowchart(bad)
