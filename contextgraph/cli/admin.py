"""Serving and housekeeping: ``mcp``, ``stats``, ``doctor``, ``db``."""

from __future__ import annotations

import json

import click

from contextgraph.cli.base import (
    Command,
    Group,
    Stop,
    database_path,
    emit_json,
    json_option,
    open_graph,
    settings_from_env,
)
from contextgraph.terminal import shown


@click.command(cls=Command)
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

    serve(database_path(ctx), read_only=read_only, allow=allow or None, watch=watch)


@click.command(cls=Command)
@click.pass_context
def resident(ctx: click.Context) -> None:
    """Answer this database's queries from one warm process until stopped (CLI runs are faster).

    While it runs, `context`, `expand`, `search`, `read`, `retrieve`, `visualize`, `communities`
    and `stats` on this database are answered by it (the same answers, without a new process's
    imports), and so is a `sync` that changes nothing; everything else, and every query with
    CONTEXTGRAPH_NO_RESIDENT=1, runs as usual. With CONTEXTGRAPH_WEIGHTS_MIN_NOTES set, it also
    recomputes BuildContext's precomputed lists when the day turns, as `mcp` does.
    """
    from contextgraph.background import start_refresher
    from contextgraph.cli.resident import Resident

    database, settings = database_path(ctx), settings_from_env()
    server = Resident(database, settings=settings)
    halt = start_refresher(database, settings=settings)
    stop = Stop()
    try:
        with stop.on_signals() as stopped:
            server.serve(
                stopped,
                on_ready=lambda path: click.echo(
                    shown(f"serving {server.key} on {path}"), err=True
                ),
            )
    finally:
        halt()
        server.close()
    click.echo(f"stopped after {server.served} queries", err=True)
    stop.exit_status(ctx)


@click.command(cls=Command)
@json_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Show counts, communities, database size and the effective settings."""
    with open_graph(ctx) as graph:
        data = graph.stats().as_dict()
    if as_json:
        emit_json(data)
        return
    click.echo(f"database: {shown(data['database'])} ({data['databaseBytes']} bytes)")
    for source in data["sources"]:
        click.echo(f"source {shown(source['name'])}: {shown(source['root'])}")
    click.echo(f"files: {json.dumps(data['files'])}")
    click.echo(f"concepts: {data['concepts']}, relations: {data['relations']}")
    click.echo(f"entities: {json.dumps(data['entities'])}")
    click.echo(f"code relations: {json.dumps(data['codeRelations'])}")
    if data["communities"] is not None:
        click.echo(f"communities: {data['communities']}, modularity {data['modularity']:.3f}")


@click.command(cls=Command)
@json_option
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Check integrity and recount co-occurrence from the mentions; exit 1 on any problem."""
    from contextgraph.api import ContextGraph

    report = ContextGraph.diagnose(database_path(ctx), settings=settings_from_env())
    if as_json:
        emit_json(report.as_dict())
    else:
        click.echo(report.integrity_line)
        for problem in report.problems:
            if problem != report.integrity_line:  # a failed check's problem, just printed
                click.echo(f"problem: {shown(problem)}")
        if report.ok:
            click.echo("ok: co-occurrence agrees with the mentions")
    if not report.ok:
        ctx.exit(1)


@click.group(name="db", cls=Group)
def db_group() -> None:
    """Schema migrations (Alembic)."""


@db_group.command(name="upgrade")
@click.argument("revision", default="head")
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Upgrade the database schema to REVISION (default: head)."""
    from contextgraph.api import ContextGraph

    with ContextGraph.open(
        database_path(ctx), settings=settings_from_env(), migrate=False
    ) as graph:
        click.echo(f"at revision {graph.upgrade(revision)}")


@db_group.command(name="current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the database's schema revision."""
    from contextgraph.api import ContextGraph

    with ContextGraph.open(
        database_path(ctx), settings=settings_from_env(), migrate=False, create=False
    ) as graph:
        revision = graph.revision()
    click.echo(revision or "(blank database)")
    if revision != ContextGraph.head():
        click.echo(f"head is {ContextGraph.head()}: run `contextgraph db upgrade`", err=True)


@db_group.command(name="history")
def db_history() -> None:
    """List the schema revisions, oldest first."""
    from contextgraph.api import ContextGraph

    for rev in ContextGraph.history():
        click.echo(f"{rev.revision}: {rev.doc}")


COMMANDS = [mcp, resident, stats, doctor, db_group]
