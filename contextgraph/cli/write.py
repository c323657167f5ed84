"""Commands that write memory: ``write``, ``edit``, ``move``, ``delete`` (SPEC §14)."""

from __future__ import annotations

import sys
from typing import Any

import click

from contextgraph import limits
from contextgraph.cli.base import (
    Command,
    TextUpTo,
    emit_json,
    json_option,
    open_graph,
)
from contextgraph.terminal import shown

_expected_hash_option = click.option(
    "--expected-hash",
    metavar="HASH",
    type=TextUpTo(limits.EXPECTED_HASH.high),
    default=None,
    help="Refuse if the note's hash (from `read --json`) is no longer HASH.",
)


def _emit_written(written: Any, as_json: bool) -> None:
    if as_json:
        emit_json(written.as_dict())
        return
    concepts = ", ".join(written.concepts) or "none"
    moved = f" (was {shown(written.previous_uri)})" if written.previous_uri else ""
    click.echo(
        f"{written.action} {shown(written.uri)}{moved}: hash {written.hash}, "
        f"concepts: {shown(concepts)}"
    )
    for warning in written.warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command(cls=Command)
@click.argument("path_or_title", type=TextUpTo(limits.MAX_PATH_CHARS))
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
@json_option
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
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")  # as --file reads
    else:
        text = content or ""
    with open_graph(ctx) as graph:
        written = graph.write_note(
            path_or_title, text, source=source, overwrite=overwrite, expected_hash=expected_hash
        )
    _emit_written(written, as_json)


@click.command(cls=Command)
@click.argument("identifier", metavar="ID", type=TextUpTo(limits.MAX_PATH_CHARS))
@click.option("--append", default=None, metavar="TEXT", help="Add TEXT at the end.")
@click.option("--prepend", default=None, metavar="TEXT", help="Add TEXT after the frontmatter.")
@click.option(
    "--find",
    type=TextUpTo(limits.EDIT_FIND.high),
    default=None,
    metavar="X",
    help="Replace X (with --replace).",
)
@click.option("--replace", default=None, metavar="Y", help="The text replacing --find.")
@click.option(
    "--count",
    type=click.IntRange(limits.EDIT_COUNT.low, limits.EDIT_COUNT.high),
    default=1,
    show_default=True,
    help="How many times --find must occur.",
)
@click.option(
    "--section",
    type=TextUpTo(limits.EDIT_HEADING.high),
    default=None,
    metavar="HEADING",
    help="Replace this section's body.",
)
@click.option("--content", default=None, metavar="TEXT", help="The new body for --section.")
@_expected_hash_option
@json_option
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
    with open_graph(ctx) as graph:
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


@click.command(cls=Command)
@click.argument("identifier", metavar="ID", type=TextUpTo(limits.MAX_PATH_CHARS))
@click.argument("new_path", type=TextUpTo(limits.MAX_PATH_CHARS))
@_expected_hash_option
@json_option
@click.pass_context
def move(
    ctx: click.Context, identifier: str, new_path: str, expected_hash: str | None, as_json: bool
) -> None:
    """Move note ID to NEW_PATH within its source (never over an existing file)."""
    with open_graph(ctx) as graph:
        written = graph.move_note(identifier, new_path, expected_hash=expected_hash)
    _emit_written(written, as_json)


@click.command(cls=Command)
@click.argument("identifier", metavar="ID", type=TextUpTo(limits.MAX_PATH_CHARS))
@_expected_hash_option
@json_option
@click.pass_context
def delete(ctx: click.Context, identifier: str, expected_hash: str | None, as_json: bool) -> None:
    """Delete note ID's file and retract it from the graph."""
    with open_graph(ctx) as graph:
        written = graph.delete_note(identifier, expected_hash=expected_hash)
    _emit_written(written, as_json)


COMMANDS = [write, edit, move, delete]
