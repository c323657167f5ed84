"""The command group and what every command shares: ``--db``, ``--json``, errors, output.

Exit codes: 0 ok, 1 error (one line on stderr, never a traceback), 2 usage.

A command pays only for what it uses: this package imports click and the light top-level
modules; the library (SQLAlchemy, the models, sync, the query modules) loads inside the commands
(``tests/test_startup.py`` checks it).
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from contextgraph.errors import ContextGraphError
from contextgraph.launch import EXIT_INTERRUPTED, quiet_closed_stdout
from contextgraph.limits import Bound
from contextgraph.settings import Settings
from contextgraph.terminal import json_text, shown

if TYPE_CHECKING:
    import threading

    from contextgraph.api import ContextGraph

F = TypeVar("F", bound=Callable[..., Any])


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


class Command(click.Command):
    """A command that also takes the global ``--db`` after its name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(_db_option())


class Group(click.Group):
    """A group that turns library errors (and anything unexpected) into one-line messages."""

    command_class = Command
    group_class = type  # subgroups are _Groups too

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not any(p.name == "db" for p in self.params):
            self.params.append(_db_option())

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ContextGraphError as exc:
            raise click.ClickException(shown(str(exc))) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            quiet_closed_stdout()
            raise click.exceptions.Exit(0) from None
        except Exception as exc:  # no traceback reaches a CLI user
            if _interrupted(exc):  # Ctrl-C while a class was made (Python wraps it there)
                click.echo("interrupted", err=True)
                raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
            if _is_driver_error(exc):  # the driver's message only: never the SQL statement
                raise click.ClickException(shown(f"database error: {exc.orig}")) from None  # type: ignore[attr-defined]
            message = f"unexpected error: {type(exc).__name__}: {exc}"
            raise click.ClickException(shown(message)) from None


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by Ctrl-C: Python 3.11 turns a KeyboardInterrupt raised while
    a class is created (a dataclass's ``__set_name__``, during an import) into a RuntimeError."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _is_driver_error(exc: Exception) -> bool:
    """A DBAPIError; SQLAlchemy cannot have raised one unless a command loaded it."""
    exceptions = sys.modules.get("sqlalchemy.exc")
    return exceptions is not None and isinstance(exc, exceptions.DBAPIError)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="contextgraph")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """A local knowledge graph of markdown notes and code, for LLM context.

    The global option --db may also follow the command: `contextgraph context X --db my.db`.
    """
    ctx.ensure_object(dict).setdefault("database", None)


def database_path(ctx: click.Context) -> str:
    from contextgraph.launch import default_database

    _library_loaded()
    chosen: str | None = ctx.find_root().ensure_object(dict).get("database")
    return chosen or default_database()


def settings_from_env() -> Settings:
    try:
        return Settings.from_env()
    except ContextGraphError as exc:
        raise click.ClickException(str(exc)) from None


# Set by a resident server while it runs a command (contextgraph.cli.resident): the graph the
# command gets, open before and after it.
graph_provider: Callable[[str, Settings], AbstractContextManager[ContextGraph]] | None = None


@contextmanager
def open_graph(ctx: click.Context, *, create: bool = False) -> Iterator[ContextGraph]:
    """Open the database; only commands that build it (``init``, ``sync``) may create it."""
    from contextgraph.api import ContextGraph

    path, settings = database_path(ctx), settings_from_env()
    if graph_provider is not None and not create:
        with graph_provider(path, settings) as graph:
            yield graph
        return
    graph = ContextGraph.open(path, settings=settings, create=create)
    try:
        yield graph
    finally:
        graph.close()


class Stop:
    """Set by SIGTERM or Ctrl-C while a long-running command (``watch``, ``resident``) runs."""

    def __init__(self) -> None:
        import threading

        self.event = threading.Event()
        self.signals: list[int] = []

    @contextmanager
    def on_signals(self) -> Iterator[threading.Event]:
        """Let SIGTERM and SIGINT set :attr:`event` (instead of ending the process) inside."""
        import signal

        def on_signal(signum: int, _frame: Any) -> None:
            self.signals.append(signum)
            self.event.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self.event
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def exit_status(self, ctx: click.Context) -> None:
        """End as an interrupted process when Ctrl-C was what stopped it."""
        import signal

        if signal.SIGINT in self.signals:
            ctx.exit(EXIT_INTERRUPTED)


def int_range(bound: Bound) -> click.IntRange:
    return click.IntRange(bound.low, bound.high)


if TYPE_CHECKING:
    _TextType = click.ParamType[str, str]
else:  # click before 8.2 has no generic ParamType
    _TextType = click.ParamType


class TextUpTo(_TextType):
    """A text argument of at most ``high`` characters (a bound of :mod:`contextgraph.limits`):
    a longer one is a usage error (exit 2), as an out-of-range number is (SPEC §10). So is a
    blank one where ``blank`` is False: a name or question of nothing but white space."""

    name = "text"

    def __init__(self, high: int, *, blank: bool = True) -> None:
        self.high = high
        self.blank = blank

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if len(text) > self.high:
            self.fail(f"{len(text)} characters long; at most {self.high} are taken", param, ctx)
        if not self.blank and not text.strip():
            self.fail("it is blank", param, ctx)
        return text


def emit_json(data: Any) -> None:
    click.echo(json_text(data))


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(fn)


# Whether main() paused the cyclic garbage collector for the library's import (see main).
_collector_paused = False


def _library_loaded() -> None:
    """The library is imported: let the collector run again, past everything loaded so far.

    Every command that opens a database comes here (through :func:`database_path`) right after
    its heavy imports, so a long-running one (``mcp``, ``watch``, a large ``sync``) collects as
    usual from then on. ``gc.freeze`` moves the objects alive now (modules, classes, compiled
    statements: the long-lived) out of the collector's sight, so its later passes walk only
    what the command itself makes.
    """
    global _collector_paused
    if _collector_paused:
        _collector_paused = False
        gc.freeze()
        gc.enable()


def main() -> None:
    """Entry point of the ``contextgraph`` script and of ``python -m contextgraph``.

    A CLI run is one short process, and about a fifth of its time went to the cyclic garbage
    collector walking the library's objects to no effect: during the imports (SQLAlchemy alone
    leaves some 35,000 tracked objects, and a full collection after it frees about 1 %) and once
    more at exit, when the interpreter collects before it frees the modules. So the collector is
    paused from here until the library is loaded (:func:`_library_loaded`, at the latest when the
    command ends), and at the end everything is frozen, which leaves the exit nothing to walk;
    atexit handlers and finalizers still run. Only this entry point does so: the library, and
    ``cli`` invoked by other code (tests, a host program), keep the interpreter's collector as they
    found it.
    """
    global _collector_paused
    _collector_paused = gc.isenabled()
    gc.disable()
    # SQLAlchemy's pool logs what it meets while it resets or closes a connection, with its
    # traceback (Ctrl-C at that instant), and logging's last resort prints that on stderr. A
    # CLI user gets one line or nothing: what matters reaches the command as an exception.
    logging.getLogger("sqlalchemy").addHandler(logging.NullHandler())
    try:
        cli(prog_name="contextgraph")
    finally:
        _library_loaded()  # a command that opened nothing (--help) gets it back here
        gc.freeze()
