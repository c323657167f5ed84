"""Commands that ask the graph: ``context``, ``expand``, ``search``, ``read``, ``retrieve``,
``visualize``, ``communities``."""

from __future__ import annotations

from typing import Any

import click

from contextgraph.cli.base import (
    Command,
    TextUpTo,
    emit_json,
    int_range,
    json_option,
    open_graph,
)
from contextgraph.limits import (
    CONTEXT_DEPTH,
    CONTEXT_MAX_ENTITIES,
    EXPAND_DIRECTIONS,
    EXPAND_MAX_DEPTH,
    EXPAND_MAX_NODES,
    EXPAND_MAX_SEEDS,
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    NAME,
    RETRIEVE_BUDGET_TOKENS,
    RETRIEVE_K,
    SEARCH_LIMIT,
    SEARCH_PAGE,
    SOURCE_NAME,
    VISUALIZE_DEPTH,
    VISUALIZE_MAX_NODES,
)
from contextgraph.terminal import shown


@click.command(cls=Command)
@click.argument("concept", type=TextUpTo(NAME.high, blank=False))
@click.option("--depth", type=int_range(CONTEXT_DEPTH), default=None, help="Hops (0-5, default 2).")
@click.option(
    "--max-entities",
    type=int_range(CONTEXT_MAX_ENTITIES),
    default=None,
    help="Most relations per list (1-100, default 20).",
)
@click.option("--include-content", is_flag=True, help="Add a content preview per source file.")
@json_option
@click.pass_context
def context(
    ctx: click.Context,
    concept: str,
    depth: int | None,
    max_entities: int | None,
    include_content: bool,
    as_json: bool,
) -> None:
    """Show what belongs with CONCEPT: direct, expanded and community-sibling relations."""
    with open_graph(ctx) as graph:
        result = graph.build_context(
            concept, depth=depth, max_entities=max_entities, include_content=include_content
        )
    if as_json:
        emit_json(result.as_dict())
        return
    community = "" if result.community_id is None else f" (community {result.community_id})"
    click.echo(f"{shown(result.concept_name)}{community}")
    if not result.direct_relations:
        click.echo("  no relations (unknown concept or empty graph)")
    for r in result.direct_relations:
        click.echo(
            f"  {shown(r.name)}: score {r.weighted_score:.3f} "
            f"(co-occurs {r.co_occurrence_count}x, decay {r.decay_weight:.3f})"
        )
        for uri in r.files:
            click.echo(f"      {shown(uri)}")
            if r.content_preview and uri in r.content_preview:
                click.echo(f"        {shown(r.content_preview[uri])}")
    if result.expanded_relations:
        click.echo("expanded:")
        for e in result.expanded_relations:
            click.echo(
                f"  {shown(e.name)} (depth {e.depth} via {shown(e.via)}): "
                f"score {e.weighted_score:.3f}"
            )
    if result.community_siblings:
        click.echo("community siblings:")
        for s in result.community_siblings:
            click.echo(
                f"  {shown(s.name)}: {s.shared_neighbor_count} shared neighbours, "
                f"overlap {s.normalized_overlap:.2f}"
            )


def _seed_count(_ctx: click.Context, _param: click.Parameter, seeds: tuple[str, ...]) -> Any:
    """More seeds than expand takes is an argument out of its range: a usage error (exit 2)."""
    if len(seeds) > EXPAND_MAX_SEEDS:
        raise click.BadParameter(f"at most {EXPAND_MAX_SEEDS} seeds (got {len(seeds)})")
    return seeds


@click.command(cls=Command)
@click.argument(
    "seeds", nargs=-1, required=True, type=TextUpTo(NAME.high, blank=False), callback=_seed_count
)
@click.option(
    "--max-depth",
    type=int_range(EXPAND_MAX_DEPTH),
    default=None,
    help="BFS depth (1-5, default 2).",
)
@click.option(
    "--max-nodes",
    type=int_range(EXPAND_MAX_NODES),
    default=None,
    help="Most results (1-500, default 20).",
)
@click.option(
    "--direction",
    type=click.Choice(EXPAND_DIRECTIONS),
    default="both",
    show_default=True,
    help="out: what the seeds use; in: what uses them; both.",
)
@json_option
@click.pass_context
def expand(
    ctx: click.Context,
    seeds: tuple[str, ...],
    max_depth: int | None,
    max_nodes: int | None,
    direction: str,
    as_json: bool,
) -> None:
    """Expand SEED entities (symbols, files, concepts) into what they use or what uses them."""
    with open_graph(ctx) as graph:
        result = graph.expand(
            list(seeds), max_depth=max_depth, max_nodes=max_nodes, direction=direction
        )
    if as_json:
        emit_json(result.as_dict())
        return
    if not result.matched:
        click.echo("no entity matches the seeds")
        return
    click.echo(f"seeds matched: {shown(', '.join(result.matched))}")
    for r in result.results:
        where = f" ({shown(r.path)})" if r.path and r.path != r.entity else ""
        click.echo(
            f"  d{r.depth} {shown(r.entity)} [{r.kind}]{where} {r.relationship_type} "
            f"via {r.via if r.via is None else shown(r.via)}"
            f" score {r.score:.3f}"
        )


@click.command(cls=Command)
@click.argument("query", type=TextUpTo(MAX_QUERY_CHARS))
@click.option(
    "--limit", type=int_range(SEARCH_LIMIT), default=None, help="Hits per page (1-100, default 10)."
)
@click.option(
    "--page", type=int_range(SEARCH_PAGE), default=1, show_default=True, help="Page number."
)
@click.option("--source", type=TextUpTo(SOURCE_NAME.high), default=None, help="Only this source.")
@click.option(
    "--folder",
    type=TextUpTo(MAX_PATH_CHARS),
    default=None,
    help="Only files under this source-relative folder.",
)
@click.option("--all", "all_words", is_flag=True, help="Require every word (default: any).")
@json_option
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    limit: int | None,
    page: int,
    source: str | None,
    folder: str | None,
    all_words: bool,
    as_json: bool,
) -> None:
    """Full-text search of notes and code: any of the words, best first ("quoted phrases")."""
    with open_graph(ctx) as graph:
        result = graph.search(
            query, limit=limit, page=page, source=source, folder=folder, all_words=all_words
        )
    if as_json:
        emit_json(result.as_dict())
        return
    click.echo(f"{result.total} matches (page {result.page})")
    for hit in result.hits:
        click.echo(f"  {shown(hit.uri)}  score {hit.score:.3f}")
        click.echo(f"      {shown(hit.snippet)}")


@click.command(cls=Command)
@click.argument("identifier", metavar="ID", type=TextUpTo(MAX_PATH_CHARS, blank=False))
@json_option
@click.pass_context
def read(ctx: click.Context, identifier: str, as_json: bool) -> None:
    """Print a note by memory:// URI, source-relative path or title (records the read)."""
    with open_graph(ctx) as graph:
        note = graph.read(identifier)
    if as_json:
        emit_json(note.as_dict())
        return
    # The note as stored, as ``cat`` would print it, to a terminal or not: no line end added to
    # a last line without one, escape sequences kept (click would strip them off a pipe), so
    # ``read ID > copy.md`` copies the note.
    click.echo(note.content, nl=False, color=True)


@click.command(cls=Command)
@click.argument("query", type=TextUpTo(MAX_QUERY_CHARS, blank=False))
@click.option(
    "--k",
    "k",
    type=int_range(RETRIEVE_K),
    default=None,
    help="Files and notes to return (1-50, default 10).",
)
@click.option(
    "--budget-tokens",
    type=int_range(RETRIEVE_BUDGET_TOKENS),
    default=None,
    help="Excerpts stop at this many tokens, characters / 4 (100-100000, default 6000).",
)
@click.option("--source", type=TextUpTo(SOURCE_NAME.high), default=None, help="Only this source.")
@json_option
@click.pass_context
def retrieve(
    ctx: click.Context,
    query: str,
    k: int | None,
    budget_tokens: int | None,
    source: str | None,
    as_json: bool,
) -> None:
    """The files and notes a question needs, ranked, with why and excerpts."""
    with open_graph(ctx) as graph:
        result = graph.retrieve(query, k=k, budget_tokens=budget_tokens, source=source)
    if as_json:
        emit_json(result.as_dict())
        return
    if not result.items:
        click.echo("nothing found")
    for item in result.items:
        click.echo(f"{item.rank}. {shown(item.uri)}  [{item.kind}] score {item.score:.3f}")
        for reason in item.why:
            click.echo(f"     - {shown(reason)}")
        if item.excerpt:
            for line in item.excerpt.splitlines():
                click.echo(f"       {shown(line)}")
    cut = ", truncated" if result.truncated else ""
    click.echo(f"~{result.tokens} tokens of excerpts (budget {result.budget_tokens}{cut})")


@click.command(cls=Command)
@click.argument("concept", type=TextUpTo(NAME.high, blank=False))
@click.option(
    "--depth", type=int_range(VISUALIZE_DEPTH), default=None, help="Hops (1-5, default 2)."
)
@click.option(
    "--max-nodes",
    type=int_range(VISUALIZE_MAX_NODES),
    default=None,
    help="Nodes (5-100, default 30).",
)
@click.pass_context
def visualize(ctx: click.Context, concept: str, depth: int | None, max_nodes: int | None) -> None:
    """Print a Mermaid flowchart of CONCEPT's neighbourhood."""
    with open_graph(ctx) as graph:
        click.echo(graph.visualize(concept, depth=depth, max_nodes=max_nodes), nl=False)


@click.command(cls=Command)
@click.option("--rebuild", is_flag=True, help="Recompute the communities now.")
@json_option
@click.pass_context
def communities(ctx: click.Context, rebuild: bool, as_json: bool) -> None:
    """List the latest community run and every community with its members."""
    with open_graph(ctx) as graph:
        data = graph.communities(rebuild=rebuild).as_dict()
    if as_json:
        emit_json(data)
        return
    run = data["run"]
    if run is None:
        click.echo("no communities yet: run `contextgraph sync` or `communities --rebuild`")
        return
    click.echo(
        f"{run['communityCount']} communities by {run['algorithm']} "
        f"(resolution {run['resolution']}, seed {run['seed']}), modularity {run['modularity']:.3f}"
    )
    for c in data["communities"]:
        members = shown(", ".join(c["members"][:12])) + (" …" if c["size"] > 12 else "")
        click.echo(f"  {c['id']} ({c['size']}): {members}")


COMMANDS = [context, expand, search, read, retrieve, visualize, communities]
