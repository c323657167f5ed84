"""The ``contextgraph`` command line: parse options, call the library, format the result.

Exit codes: 0 ok, 1 error (one line on stderr, never a traceback), 2 usage.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from contextgraph.api import ContextGraph, default_database
from contextgraph.errors import ContextGraphError
from contextgraph.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    """A group that turns library errors (and anything unexpected) into one-line messages."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ContextGraphError as exc:
            raise click.ClickException(str(exc)) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            raise click.Abort() from None
        except Exception as exc:  # no traceback reaches a CLI user
            raise click.ClickException(f"unexpected error: {type(exc).__name__}: {exc}") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    "database",
    metavar="PATH",
    help="Database file (default: $CONTEXTGRAPH_DB, else ~/.contextgraph/graph.db).",
)
@click.version_option(package_name="contextgraph")
@click.pass_context
def cli(ctx: click.Context, database: str | None) -> None:
    """A local knowledge graph of markdown notes and code, for LLM context."""
    ctx.ensure_object(dict)
    ctx.obj["database"] = database or default_database()


@contextmanager
def _graph(ctx: click.Context) -> Iterator[ContextGraph]:
    try:
        settings = Settings.from_env()
    except ContextGraphError as exc:
        raise click.ClickException(str(exc)) from None
    graph = ContextGraph.open(ctx.obj["database"], settings=settings)
    try:
        yield graph
    finally:
        graph.close()


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def _json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(fn)


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option("--name", help="Source name for a single PATH (default: the folder's name).")
@click.pass_context
def init(ctx: click.Context, paths: tuple[str, ...], name: str | None) -> None:
    """Create or upgrade the database and register PATHs as sources (without syncing)."""
    with _graph(ctx) as graph:
        if name is not None and len(paths) != 1:
            raise click.UsageError("--name needs exactly one PATH")
        for path in paths:
            source = graph.add_source(path, name=name)
            click.echo(f"source {source.name}: {source.root}")
        click.echo(f"database ready: {graph.database_path or graph.engine.url}")


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option("--name", help="Source name for a single new PATH (default: the folder's name).")
@click.option("--no-wait", is_flag=True, help="Exit 1 at once if another sync is running.")
@_json_option
@click.pass_context
def sync(
    ctx: click.Context, paths: tuple[str, ...], name: str | None, no_wait: bool, as_json: bool
) -> None:
    """Sync PATHs (registering new ones), or every registered source when none is given."""
    if name is not None and len(paths) != 1:
        raise click.UsageError("--name needs exactly one PATH")
    with _graph(ctx) as graph:
        if not paths and not graph.sources():
            raise click.ClickException("no sources registered: give a PATH to sync")
        with _progress() as progress:
            report = graph.sync(paths, name=name, wait=not no_wait, progress=progress)
    if as_json:
        _emit(report.as_dict())
        return
    data = report.as_dict()
    files = data["files"]
    click.echo(
        f"synced {', '.join(report.sources) or '(nothing)'}: {files['scanned']} files scanned, "
        f"{files['added']} added, {files['updated']} updated, {files['unchanged']} unchanged, "
        f"{files['deleted']} deleted, {files['renamed']} renamed, {files['failed']} failed"
    )
    click.echo(
        f"{report.concepts} concepts, {report.relations} relations, {report.entities} entities, "
        f"{report.code_relations} code relations"
    )
    if report.communities is not None:
        click.echo(f"{report.communities} communities, modularity {report.modularity:.3f}")
    for problem in report.failed:
        click.echo(f"failed: {problem.source}/{problem.path}: {problem.reason}", err=True)
    for problem in report.warnings:
        click.echo(f"warning: {problem.source}/{problem.path}: {problem.reason}", err=True)
    seconds = ", ".join(f"{k} {v:.2f}s" for k, v in data["seconds"].items())
    click.echo(f"time: {seconds}")


@contextmanager
def _progress() -> Iterator[Callable[[int, int], None] | None]:
    if not sys.stderr.isatty():
        yield None
        return
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = click.progressbar(length=total, label="reading files", file=sys.stderr)
            bar.__enter__()
            state["bar"] = bar
        bar.update(done - state.get("done", 0))
        state["done"] = done

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].__exit__(None, None, None)


@cli.command()
@click.argument("concept")
@click.option("--depth", type=int, default=None, help="Hops to expand (default 2).")
@click.option(
    "--max-entities", type=int, default=None, help="Most relations per list (default 20)."
)
@click.option("--include-content", is_flag=True, help="Add a content preview per source file.")
@_json_option
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
    with _graph(ctx) as graph:
        result = graph.build_context(
            concept, depth=depth, max_entities=max_entities, include_content=include_content
        )
    if as_json:
        _emit(result.as_dict())
        return
    community = "" if result.community_id is None else f" (community {result.community_id})"
    click.echo(f"{result.concept_name}{community}")
    if not result.direct_relations:
        click.echo("  no relations (unknown concept or empty graph)")
    for r in result.direct_relations:
        click.echo(
            f"  {r.name}: score {r.weighted_score:.3f} "
            f"(co-occurs {r.co_occurrence_count}x, decay {r.decay_weight:.3f})"
        )
        for uri in r.files:
            click.echo(f"      {uri}")
            if r.content_preview and uri in r.content_preview:
                click.echo(f"        {r.content_preview[uri]}")
    if result.expanded_relations:
        click.echo("expanded:")
        for e in result.expanded_relations:
            click.echo(f"  {e.name} (depth {e.depth} via {e.via}): score {e.weighted_score:.3f}")
    if result.community_siblings:
        click.echo("community siblings:")
        for s in result.community_siblings:
            click.echo(
                f"  {s.name}: {s.shared_neighbor_count} shared neighbours, "
                f"overlap {s.normalized_overlap:.2f}"
            )


@cli.command()
@click.argument("seeds", nargs=-1, required=True)
@click.option("--max-depth", type=int, default=None, help="BFS depth (1-5, default 2).")
@click.option("--max-nodes", type=int, default=None, help="Most results (1-500, default 20).")
@_json_option
@click.pass_context
def expand(
    ctx: click.Context,
    seeds: tuple[str, ...],
    max_depth: int | None,
    max_nodes: int | None,
    as_json: bool,
) -> None:
    """Expand SEED entities (symbols, files, concepts) into what they depend on."""
    with _graph(ctx) as graph:
        result = graph.expand(list(seeds), max_depth=max_depth, max_nodes=max_nodes)
    if as_json:
        _emit(result.as_dict())
        return
    if not result.matched:
        click.echo("no entity matches the seeds")
    for r in result.results:
        where = f" ({r.path})" if r.path and r.path != r.entity else ""
        click.echo(
            f"  d{r.depth} {r.entity} [{r.kind}]{where} {r.relationship_type} via {r.via}"
            f" score {r.score:.3f}"
        )


@cli.command()
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True, help="Hits per page (1-100).")
@click.option("--page", type=int, default=1, show_default=True, help="Page number.")
@click.option("--source", default=None, help="Only this source.")
@click.option("--folder", default=None, help="Only files under this source-relative folder.")
@click.option("--all", "all_words", is_flag=True, help="Require every word (default: any).")
@_json_option
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    limit: int,
    page: int,
    source: str | None,
    folder: str | None,
    all_words: bool,
    as_json: bool,
) -> None:
    """Full-text search of notes and code: any of the words, best first ("quoted phrases")."""
    with _graph(ctx) as graph:
        result = graph.search(
            query, limit=limit, page=page, source=source, folder=folder, all_words=all_words
        )
    if as_json:
        _emit(result.as_dict())
        return
    click.echo(f"{result.total} matches (page {result.page})")
    for hit in result.hits:
        click.echo(f"  {hit.uri}  score {hit.score:.3f}")
        click.echo(f"      {hit.snippet}")


@cli.command()
@click.argument("identifier", metavar="ID")
@_json_option
@click.pass_context
def read(ctx: click.Context, identifier: str, as_json: bool) -> None:
    """Print a note by memory:// URI, source-relative path or title (records the read)."""
    with _graph(ctx) as graph:
        note = graph.read(identifier)
    if as_json:
        _emit(note.as_dict())
        return
    click.echo(note.content, nl=not note.content.endswith("\n"))


@cli.command()
@click.argument("concept")
@click.option("--depth", type=int, default=2, show_default=True, help="Hops (1-5).")
@click.option("--max-nodes", type=int, default=30, show_default=True, help="Nodes (5-100).")
@click.pass_context
def visualize(ctx: click.Context, concept: str, depth: int, max_nodes: int) -> None:
    """Print a Mermaid flowchart of CONCEPT's neighbourhood."""
    with _graph(ctx) as graph:
        click.echo(graph.visualize(concept, depth=depth, max_nodes=max_nodes), nl=False)


@cli.command()
@click.option("--rebuild", is_flag=True, help="Recompute the communities now.")
@_json_option
@click.pass_context
def communities(ctx: click.Context, rebuild: bool, as_json: bool) -> None:
    """List the latest community run and every community with its members."""
    with _graph(ctx) as graph:
        data = graph.communities(rebuild=rebuild)
    if as_json:
        _emit(data)
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
        members = ", ".join(c["members"][:12]) + (" …" if c["size"] > 12 else "")
        click.echo(f"  {c['id']} ({c['size']}): {members}")


@cli.command()
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Run the MCP server on stdio (for LLM clients)."""
    from contextgraph.mcp_server import serve

    serve(ctx.obj["database"])


@cli.command()
@_json_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Show counts, communities, database size and the effective settings."""
    with _graph(ctx) as graph:
        data = graph.stats()
    if as_json:
        _emit(data)
        return
    click.echo(f"database: {data['database']} ({data['databaseBytes']} bytes)")
    for source in data["sources"]:
        click.echo(f"source {source['name']}: {source['root']}")
    click.echo(f"files: {json.dumps(data['files'])}")
    click.echo(f"concepts: {data['concepts']}, relations: {data['relations']}")
    click.echo(f"entities: {json.dumps(data['entities'])}")
    click.echo(f"code relations: {json.dumps(data['codeRelations'])}")
    if data["communities"] is not None:
        click.echo(f"communities: {data['communities']}, modularity {data['modularity']:.3f}")


@cli.command()
@_json_option
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Check integrity and recount co-occurrence from the mentions; exit 1 on any problem."""
    with _graph(ctx) as graph:
        report = graph.doctor()
    if as_json:
        _emit(report.as_dict())
    else:
        click.echo(f"integrity_check: {report.integrity}")
        for problem in report.problems:
            click.echo(f"problem: {problem}")
        if report.ok:
            click.echo("ok: co-occurrence agrees with the mentions")
    if not report.ok:
        ctx.exit(1)


@cli.group(name="db", cls=_Group)
def db_group() -> None:
    """Schema migrations (Alembic)."""


@db_group.command(name="upgrade")
@click.argument("revision", default="head")
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Upgrade the database schema to REVISION (default: head)."""
    from contextgraph import db

    graph = ContextGraph.open(ctx.obj["database"], migrate=False)
    try:
        db.upgrade(graph.engine, revision)
        click.echo(f"at revision {db.current_revision(graph.engine)}")
    finally:
        graph.close()


@db_group.command(name="current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the database's schema revision."""
    from contextgraph import db

    graph = ContextGraph.open(ctx.obj["database"], migrate=False)
    try:
        revision = db.current_revision(graph.engine)
        click.echo(revision or "(blank database)")
        if revision != db.SCHEMA_HEAD:
            click.echo(f"head is {db.SCHEMA_HEAD}: run `contextgraph db upgrade`", err=True)
    finally:
        graph.close()


@db_group.command(name="history")
def db_history() -> None:
    """List the schema revisions, oldest first."""
    from alembic.script import ScriptDirectory

    from contextgraph.db import migrations_dir

    script = ScriptDirectory(str(migrations_dir()))
    for rev in reversed(list(script.walk_revisions())):
        click.echo(f"{rev.revision}: {rev.doc}")


def main() -> None:
    """Entry point for ``python -m contextgraph``."""
    cli(prog_name="contextgraph")
