"""Commands that follow folders: ``init``, ``sync``, ``sources``, ``watch``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from contextgraph.cli.base import (
    Command,
    Group,
    Stop,
    TextUpTo,
    emit_json,
    json_option,
    open_graph,
)
from contextgraph.limits import SOURCE_NAME, SYNC_MAX_PATHS
from contextgraph.terminal import shown

if TYPE_CHECKING:
    from contextgraph.sync.report import SyncReport


@click.command(cls=Command)
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option(
    "--name",
    type=TextUpTo(SOURCE_NAME.high),
    help="Source name for a single PATH (default: the folder's name).",
)
@click.pass_context
def init(ctx: click.Context, paths: tuple[str, ...], name: str | None) -> None:
    """Create or upgrade the database and register PATHs as sources (without syncing)."""
    if name is not None and len(paths) != 1:
        raise click.UsageError("--name needs exactly one PATH")
    if len(paths) > SYNC_MAX_PATHS:
        raise click.UsageError(f"at most {SYNC_MAX_PATHS} PATHs (got {len(paths)})")
    from contextgraph.store.sources import check_root

    for path in paths:
        check_root(path)  # refuse a bad folder before a database is created for it
    with open_graph(ctx, create=True) as graph:
        for path in paths:
            source = graph.add_source(path, name=name)
            click.echo(f"source {shown(source.name)}: {shown(str(source.root))}")
        click.echo(f"database ready: {shown(str(graph.database_path or graph.engine.url))}")


@click.command(cls=Command)
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option(
    "--name",
    type=TextUpTo(SOURCE_NAME.high),
    help="Source name for a single new PATH (default: the folder's name).",
)
@click.option("--no-wait", is_flag=True, help="Exit 1 at once if another sync is running.")
@json_option
@click.pass_context
def sync(
    ctx: click.Context, paths: tuple[str, ...], name: str | None, no_wait: bool, as_json: bool
) -> None:
    """Sync PATHs (registering new ones), or every registered source when none is given."""
    if name is not None and len(paths) != 1:
        raise click.UsageError("--name needs exactly one PATH")
    if len(paths) > SYNC_MAX_PATHS:
        raise click.UsageError(f"at most {SYNC_MAX_PATHS} PATHs (got {len(paths)})")
    from contextgraph.store.sources import check_root

    for path in paths:
        check_root(path)  # refuse a bad folder before a database is created for it
    with open_graph(ctx, create=True) as graph:
        with _progress() as progress:
            report = graph.sync(paths, name=name, wait=not no_wait, progress=progress)
        roots = {s.name: s.root for s in graph.sources()}
    if as_json:
        emit_json(report.as_dict())
    else:
        _print_sync(report)
    for missing in report.missing:
        click.echo(
            f"error: the folder of source {shown(repr(missing))} "
            f"({shown(str(roots.get(missing)))}) is gone: restore it, "
            f"or forget the source with `contextgraph sources remove {shown(missing)}`",
            err=True,
        )
    if report.missing:
        ctx.exit(1)


def _print_sync(report: SyncReport) -> None:
    from contextgraph.sync.report import report_lines

    for line, to_stderr in report_lines(report):
        click.echo(line, err=to_stderr)


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


@click.group(name="sources", cls=Group, invoke_without_command=True)
@json_option
@click.pass_context
def sources_group(ctx: click.Context, as_json: bool) -> None:
    """List the registered sources (name, folder); `sources remove NAME` forgets one."""
    if ctx.invoked_subcommand is not None:
        return
    with open_graph(ctx) as graph:
        listed = [s.as_dict() for s in graph.sources()]
    if as_json:
        emit_json({"sources": listed})
        return
    if not listed:
        click.echo("no sources registered: `contextgraph sync PATH` adds one")
    for source in listed:
        gone = "" if source["exists"] else "  (folder missing)"
        click.echo(f"{shown(source['name'])}: {shown(source['root'])}{gone}")


@sources_group.command(name="remove")
@click.argument("name")
@json_option
@click.pass_context
def sources_remove(ctx: click.Context, name: str, as_json: bool) -> None:
    """Forget source NAME and everything derived from it (its files stay on disk)."""
    with open_graph(ctx) as graph:
        report = graph.remove_source(name)
    if as_json:
        emit_json(report.as_dict())
        return
    click.echo(
        f"removed source {name}: {report.deleted} files forgotten; {report.concepts} concepts, "
        f"{report.relations} relations left"
    )


@click.command(cls=Command)
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option(
    "--name",
    type=TextUpTo(SOURCE_NAME.high),
    help="Source name for a single new PATH (default: the folder's name).",
)
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
    from contextgraph.sync.report import problem_lines
    from contextgraph.watch import Batch, Watcher

    if name is not None and len(paths) != 1:
        raise click.UsageError("--name needs exactly one PATH")

    def on_batch(batch: Batch) -> None:
        files = batch.report.as_dict()["files"]
        changed = ", ".join(
            f"{files[k]} {k}"
            for k in ("added", "updated", "deleted", "renamed", "failed")
            if files[k]
        )
        seconds = batch.report.phases.get("total", 0.0)
        click.echo(f"synced {shown(batch.source)}: {changed or 'nothing changed'} ({seconds:.2f}s)")
        for line in problem_lines(batch.report):  # why, as sync says it
            click.echo(line, err=True)

    stop = Stop()
    with open_graph(ctx, create=bool(paths)) as graph:
        for path in paths:
            graph.add_source(path, name=name)
        if not graph.sources():
            raise click.ClickException("no sources registered: give a PATH to watch")
        with stop.on_signals() as stopped:
            watcher = Watcher(
                graph,
                debounce_ms=debounce_ms,
                on_batch=on_batch,
                on_state=lambda message: click.echo(shown(message), err=True),
            )
            watcher.run(stopped)
    if watcher.gone is not None:  # said already, as it happened
        raise click.exceptions.Exit(1)
    click.echo("stopped", err=True)
    stop.exit_status(ctx)


COMMANDS = [init, sync, sources_group, watch]
