"""The ``contextgraph`` command line: parse options, call the library, format the result.

Exit codes: 0 ok, 1 error (one line on stderr, never a traceback), 2 usage.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from sqlalchemy.exc import DBAPIError

from contextgraph import limits
from contextgraph.api import ContextGraph, default_database
from contextgraph.errors import ContextGraphError
from contextgraph.limits import (
    CONTEXT_DEPTH,
    CONTEXT_MAX_ENTITIES,
    EXPAND_MAX_DEPTH,
    EXPAND_MAX_NODES,
    SEARCH_LIMIT,
    SEARCH_PAGE,
    VISUALIZE_DEPTH,
    VISUALIZE_MAX_NODES,
    Bound,
)
from contextgraph.settings import Settings
from contextgraph.sources import check_root
from contextgraph.sync import SyncReport

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C


def _set_database(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    if not value.strip():
        raise click.BadParameter("the database path is empty", ctx=ctx, param_hint="'--db'")
    ctx.find_root().ensure_object(dict)["database"] = value


_DB_HELP = "Database file (default: $CONTEXTGRAPH_DB, else ~/.contextgraph/graph.db)."


def _db_option() -> click.Option:
    return click.Option(
        ["--db"],
        metavar="PATH",
        expose_value=False,
        callback=_set_database,
        help=_DB_HELP,
    )


class _Command(click.Command):
    """A command that also takes the global ``--db`` after its name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(_db_option())


def _quiet_closed_stdout() -> None:
    # The reader went away (`| head`): point stdout at /dev/null so the final flush at exit
    # cannot raise again, and end quietly.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # no real stdout to redirect (a test runner's buffer): nothing will flush it


class _Group(click.Group):
    """A group that turns library errors (and anything unexpected) into one-line messages."""

    command_class = _Command
    group_class = type  # subgroups are _Groups too

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not any(p.name == "db" for p in self.params):
            self.params.append(_db_option())

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ContextGraphError as exc:
            raise click.ClickException(str(exc)) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            _quiet_closed_stdout()
            raise click.exceptions.Exit(0) from None
        except DBAPIError as exc:  # the driver's message only: never the SQL statement
            raise click.ClickException(f"database error: {exc.orig}") from None
        except Exception as exc:  # no traceback reaches a CLI user
            raise click.ClickException(f"unexpected error: {type(exc).__name__}: {exc}") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="contextgraph")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """A local knowledge graph of markdown notes and code, for LLM context.

    The global option --db may also follow the command: `contextgraph context X --db my.db`.
    """
    ctx.ensure_object(dict).setdefault("database", None)


def _database(ctx: click.Context) -> str:
    chosen: str | None = ctx.find_root().ensure_object(dict).get("database")
    return chosen or default_database()


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except ContextGraphError as exc:
        raise click.ClickException(str(exc)) from None


@contextmanager
def _graph(ctx: click.Context, *, create: bool = False) -> Iterator[ContextGraph]:
    """Open the database; only commands that build it (``init``, ``sync``) may create it."""
    graph = ContextGraph.open(_database(ctx), settings=_settings(), create=create)
    try:
        yield graph
    finally:
        graph.close()


def _range(bound: Bound) -> click.IntRange:
    return click.IntRange(bound.low, bound.high)


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
    if name is not None and len(paths) != 1:
        raise click.UsageError("--name needs exactly one PATH")
    for path in paths:
        check_root(path)  # refuse a bad folder before a database is created for it
    with _graph(ctx, create=True) as graph:
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
    for path in paths:
        check_root(path)  # refuse a bad folder before a database is created for it
    with _graph(ctx, create=True) as graph:
        with _progress() as progress:
            report = graph.sync(paths, name=name, wait=not no_wait, progress=progress)
        roots = {s.name: s.root for s in graph.sources()}
    if as_json:
        _emit(report.as_dict())
    else:
        _print_sync(report)
    for missing in report.missing:
        click.echo(
            f"error: the folder of source {missing!r} ({roots.get(missing)}) is gone: restore it, "
            f"or forget the source with `contextgraph sources remove {missing}`",
            err=True,
        )
    if report.missing:
        ctx.exit(1)


def _print_sync(report: SyncReport) -> None:
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
@click.option("--depth", type=_range(CONTEXT_DEPTH), default=None, help="Hops (0-5, default 2).")
@click.option(
    "--max-entities",
    type=_range(CONTEXT_MAX_ENTITIES),
    default=None,
    help="Most relations per list (1-100, default 20).",
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
@click.option(
    "--max-depth", type=_range(EXPAND_MAX_DEPTH), default=None, help="BFS depth (1-5, default 2)."
)
@click.option(
    "--max-nodes",
    type=_range(EXPAND_MAX_NODES),
    default=None,
    help="Most results (1-500, default 20).",
)
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
@click.option(
    "--limit", type=_range(SEARCH_LIMIT), default=10, show_default=True, help="Hits per page."
)
@click.option("--page", type=_range(SEARCH_PAGE), default=1, show_default=True, help="Page number.")
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
@click.option("--depth", type=_range(VISUALIZE_DEPTH), default=2, show_default=True, help="Hops.")
@click.option(
    "--max-nodes", type=_range(VISUALIZE_MAX_NODES), default=30, show_default=True, help="Nodes."
)
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
        data = graph.communities(rebuild=rebuild).as_dict()
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
@click.option("--read-only", is_flag=True, help="Offer no write tool; sync registers nothing.")
@click.option(
    "--allow",
    "allow",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A folder sync may register sources in (repeatable; default: any).",
)
@click.option("--watch", is_flag=True, help="Also keep every source in step as files change.")
@click.pass_context
def mcp(ctx: click.Context, read_only: bool, allow: tuple[str, ...], watch: bool) -> None:
    """Run the MCP server on stdio (for LLM clients)."""
    from contextgraph.mcp_server import serve

    serve(_database(ctx), read_only=read_only, allow=allow or None, watch=watch)


@cli.command()
@_json_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Show counts, communities, database size and the effective settings."""
    with _graph(ctx) as graph:
        data = graph.stats().as_dict()
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
    report = ContextGraph.diagnose(_database(ctx), settings=_settings())
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
    with ContextGraph.open(_database(ctx), settings=_settings(), migrate=False) as graph:
        click.echo(f"at revision {graph.upgrade(revision)}")


@db_group.command(name="current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the database's schema revision."""
    with ContextGraph.open(
        _database(ctx), settings=_settings(), migrate=False, create=False
    ) as graph:
        revision = graph.revision()
    click.echo(revision or "(blank database)")
    if revision != ContextGraph.head():
        click.echo(f"head is {ContextGraph.head()}: run `contextgraph db upgrade`", err=True)


@db_group.command(name="history")
def db_history() -> None:
    """List the schema revisions, oldest first."""
    for rev in ContextGraph.history():
        click.echo(f"{rev.revision}: {rev.doc}")


@cli.group(name="sources", cls=_Group, invoke_without_command=True)
@_json_option
@click.pass_context
def sources_group(ctx: click.Context, as_json: bool) -> None:
    """List the registered sources (name, folder); `sources remove NAME` forgets one."""
    if ctx.invoked_subcommand is not None:
        return
    with _graph(ctx) as graph:
        listed = [s.as_dict() for s in graph.sources()]
    if as_json:
        _emit({"sources": listed})
        return
    if not listed:
        click.echo("no sources registered: `contextgraph sync PATH` adds one")
    for source in listed:
        gone = "" if source["exists"] else "  (folder missing)"
        click.echo(f"{source['name']}: {source['root']}{gone}")


@sources_group.command(name="remove")
@click.argument("name")
@_json_option
@click.pass_context
def sources_remove(ctx: click.Context, name: str, as_json: bool) -> None:
    """Forget source NAME and everything derived from it (its files stay on disk)."""
    with _graph(ctx) as graph:
        report = graph.remove_source(name)
    if as_json:
        _emit(report.as_dict())
        return
    click.echo(
        f"removed source {name}: {report.deleted} files forgotten; {report.concepts} concepts, "
        f"{report.relations} relations left"
    )


# -- writing and watching (SPEC §14) ---------------------------------------------------------

_expected_hash_option = click.option(
    "--expected-hash",
    metavar="HASH",
    default=None,
    help="Refuse if the note's hash (from `read --json`) is no longer HASH.",
)


def _emit_written(written: Any, as_json: bool) -> None:
    if as_json:
        _emit(written.as_dict())
        return
    concepts = ", ".join(written.concepts) or "none"
    moved = f" (was {written.previous_uri})" if written.previous_uri else ""
    click.echo(f"{written.action} {written.uri}{moved}: hash {written.hash}, concepts: {concepts}")
    for warning in written.warnings:
        click.echo(f"warning: {warning}", err=True)


@cli.command()
@click.argument("path_or_title")
@click.argument("stdin", required=False, metavar="[-]")
@click.option("--content", default=None, help="The note's text.")
@click.option(
    "--file",
    "from_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Read the note's text from this file.",
)
@click.option("--source", default=None, help="The source to write into (needed if several).")
@click.option("--overwrite", is_flag=True, help="Replace the note if it exists.")
@_expected_hash_option
@_json_option
@click.pass_context
def write(
    ctx: click.Context,
    path_or_title: str,
    stdin: str | None,
    content: str | None,
    from_file: str | None,
    source: str | None,
    overwrite: bool,
    expected_hash: str | None,
    as_json: bool,
) -> None:
    """Write a note (PATH ending in .md, memory:// URI or title) from --content, --file or -."""
    given = [x is not None for x in (content, from_file, stdin)]
    if stdin is not None and stdin != "-":
        raise click.UsageError(f"unexpected argument {stdin!r}: use - to read stdin")
    if sum(given) != 1:
        raise click.UsageError("give exactly one of --content TEXT, --file F or - (stdin)")
    if from_file is not None:
        with open(from_file, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
    elif stdin is not None:
        text = sys.stdin.read()
    else:
        text = content or ""
    with _graph(ctx) as graph:
        written = graph.write_note(
            path_or_title, text, source=source, overwrite=overwrite, expected_hash=expected_hash
        )
    _emit_written(written, as_json)


@cli.command()
@click.argument("identifier", metavar="ID")
@click.option("--append", default=None, metavar="TEXT", help="Add TEXT at the end.")
@click.option("--prepend", default=None, metavar="TEXT", help="Add TEXT after the frontmatter.")
@click.option("--find", default=None, metavar="X", help="Replace X (with --replace).")
@click.option("--replace", default=None, metavar="Y", help="The text replacing --find.")
@click.option(
    "--count",
    type=click.IntRange(limits.EDIT_COUNT.low, limits.EDIT_COUNT.high),
    default=1,
    show_default=True,
    help="How many times --find must occur.",
)
@click.option("--section", default=None, metavar="HEADING", help="Replace this section's body.")
@click.option("--content", default=None, metavar="TEXT", help="The new body for --section.")
@_expected_hash_option
@_json_option
@click.pass_context
def edit(
    ctx: click.Context,
    identifier: str,
    append: str | None,
    prepend: str | None,
    find: str | None,
    replace: str | None,
    count: int,
    section: str | None,
    content: str | None,
    expected_hash: str | None,
    as_json: bool,
) -> None:
    """Edit note ID: --append, --prepend, --find/--replace or --section/--content."""
    chosen = [
        name
        for name, value in (
            ("--append", append),
            ("--prepend", prepend),
            ("--find", find),
            ("--section", section),
        )
        if value is not None
    ]
    if len(chosen) != 1:
        raise click.UsageError("give one of --append, --prepend, --find/--replace, --section")
    if (find is None) != (replace is None):
        raise click.UsageError("--find and --replace go together")
    if (section is None) != (content is None):
        raise click.UsageError("--section and --content go together")
    operation, text = {
        "--append": ("append", append),
        "--prepend": ("prepend", prepend),
        "--find": ("replace_text", None),
        "--section": ("replace_section", content),
    }[chosen[0]]
    with _graph(ctx) as graph:
        written = graph.edit_note(
            identifier,
            operation,
            content=text,
            find=find,
            replace=replace,
            count=count,
            heading=section,
            expected_hash=expected_hash,
        )
    _emit_written(written, as_json)


@cli.command()
@click.argument("identifier", metavar="ID")
@click.argument("new_path")
@_expected_hash_option
@_json_option
@click.pass_context
def move(
    ctx: click.Context, identifier: str, new_path: str, expected_hash: str | None, as_json: bool
) -> None:
    """Move note ID to NEW_PATH within its source (never over an existing file)."""
    with _graph(ctx) as graph:
        written = graph.move_note(identifier, new_path, expected_hash=expected_hash)
    _emit_written(written, as_json)


@cli.command()
@click.argument("identifier", metavar="ID")
@_expected_hash_option
@_json_option
@click.pass_context
def delete(ctx: click.Context, identifier: str, expected_hash: str | None, as_json: bool) -> None:
    """Delete note ID's file and retract it from the graph."""
    with _graph(ctx) as graph:
        written = graph.delete_note(identifier, expected_hash=expected_hash)
    _emit_written(written, as_json)


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option("--name", help="Source name for a single new PATH (default: the folder's name).")
@click.option(
    "--debounce-ms",
    type=click.IntRange(100, 60_000),
    default=1600,
    show_default=True,
    help="Longest wait to gather a burst of changes into one batch.",
)
@click.pass_context
def watch(ctx: click.Context, paths: tuple[str, ...], name: str | None, debounce_ms: int) -> None:
    """Keep every registered source (and new PATHs) in step as files change, until stopped."""
    import signal
    import threading

    from contextgraph.watch import Batch, Watcher

    if name is not None and len(paths) != 1:
        raise click.UsageError("--name needs exactly one PATH")

    def on_batch(batch: Batch) -> None:
        files = batch.report.as_dict()["files"]
        changed = ", ".join(
            f"{files[k]} {k}" for k in ("added", "updated", "deleted", "renamed") if files[k]
        )
        seconds = batch.report.phases.get("total", 0.0)
        click.echo(f"synced {batch.source}: {changed or 'nothing changed'} ({seconds:.2f}s)")

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    with _graph(ctx, create=bool(paths)) as graph:
        for path in paths:
            graph.add_source(path, name=name)
        if not graph.sources():
            raise click.ClickException("no sources registered: give a PATH to watch")
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            Watcher(
                graph,
                debounce_ms=debounce_ms,
                on_batch=on_batch,
                on_state=lambda message: click.echo(message, err=True),
            ).run(stop)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    click.echo("stopped", err=True)
    if signal.SIGINT in received:
        ctx.exit(130)


def main() -> None:
    """Entry point for ``python -m contextgraph``."""
    cli(prog_name="contextgraph")
