"""``python -m contextgraph`` and the ``contextgraph`` script: forward a query, else answer a
sync that changes nothing, else run the CLI here."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself costs a light CLI run 20 ms; mypy honours the name
if TYPE_CHECKING:
    from typing import TextIO


def main() -> None:
    """Have a resident server answer (:mod:`contextgraph.launch`), else a sync that changes
    nothing (:func:`unchanged_sync`), else run the CLI here.

    Every import is inside the ``try``: Ctrl-C during one (the first 10 ms of a run) says
    "interrupted", not a traceback."""
    argv = sys.argv[1:]
    prestarted = False
    try:
        from contextgraph import launch

        code = launch.forward(argv)
        if code is None:
            code = unchanged_sync(argv, hand_over=True)
        if code is None:
            prestarted = prestart_cold_load(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        _drop_prestarted()  # its workers would otherwise extract what they were given first
        from contextgraph.launch import EXIT_INTERRUPTED  # again, if that import was cut short

        sys.exit(EXIT_INTERRUPTED)
    if code is not None:
        sys.exit(code)
    try:
        from contextgraph.cli import main as run_here  # Ctrl-C may come while it imports

        run_here()
    except KeyboardInterrupt:  # before the CLI took Ctrl-C over (it says "interrupted" itself)
        print("interrupted", file=sys.stderr)
        sys.exit(launch.EXIT_INTERRUPTED)
    finally:
        if prestarted:
            _drop_prestarted()  # the sync did not take it (an error, too few files to read)


def _drop_prestarted() -> None:
    """Shut down a pool that :func:`prestart_cold_load` started and no sync took over, its
    chunks not yet begun cancelled."""
    extraction = sys.modules.get("contextgraph.sync.extraction")
    if extraction is not None:
        extraction.drop_prestarted()


def prestart_cold_load(argv: list[str]) -> bool:
    """For a ``sync`` of folders into a database yet to be created, whose folders hold enough
    files for a worker pool, start the pool now (:func:`contextgraph.sync.extraction.prestart`):
    its workers start, and extract every file the folders hold, while this process imports the
    library (0.2 s), not once the sync has begun its scan. True if one was started."""
    asked = _file_sync(argv)
    if asked is None:
        return False
    key, paths, _ = asked
    if not paths:
        return False
    import os

    if os.path.lexists(key):
        return False  # an existing store: its sync starts a pool, if any, as it goes
    from pathlib import Path

    from contextgraph.errors import ContextGraphError
    from contextgraph.settings import Settings
    from contextgraph.sync.extraction import POOL_THRESHOLD, prestart
    from contextgraph.sync.lock import database_files
    from contextgraph.sync.scan import holds_at_least

    try:
        settings = Settings.from_env()
    except ContextGraphError:
        return False  # the CLI reports the bad setting
    try:
        roots = [Path(p).expanduser() for p in paths]
        if not all(root.is_dir() for root in roots):
            return False  # the CLI reports a folder that is not one
        folders = [Path(real) for real in dict.fromkeys(os.path.realpath(root) for root in roots)]
        if not holds_at_least(folders, POOL_THRESHOLD):  # a folder named twice counts once
            return False
    except (OSError, RuntimeError):  # a name too long, ``~nobody``: the CLI says which
        return False
    return prestart(settings, folders, database_files(Path(key)))


def unchanged_sync(argv: list[str], *, hand_over: bool = False) -> int | None:
    """Print what ``contextgraph sync`` would for ``argv`` when that sync would change nothing
    (:mod:`contextgraph.sync.unchanged`, no SQLAlchemy or click loaded); its exit status, or
    None to run the CLI. ``hand_over``: the CLI's sync runs next, in this process, and takes
    over the lock and the scans of a check that found work to do."""
    asked = _file_sync(argv)
    if asked is None:
        return None
    key, paths, as_json = asked
    from contextgraph.limits import SYNC_MAX_PATHS

    if len(paths) > SYNC_MAX_PATHS:
        return None  # the CLI refuses them, with its message
    from pathlib import Path

    from contextgraph.sync.unchanged import unchanged_report

    report = unchanged_report(Path(key), paths, hand_over_to_sync=hand_over)
    if report is None:
        return None
    from contextgraph import launch
    from contextgraph.sync.report import report_lines
    from contextgraph.terminal import json_text

    try:
        if as_json:
            _put(sys.stdout, json_text(report.as_dict()) + "\n")
        else:
            for line, to_stderr in report_lines(report):
                _put(sys.stderr if to_stderr else sys.stdout, line + "\n")
    except BrokenPipeError:  # the reader went away (`| head`): end quietly, as the CLI does
        launch.quiet_closed_stdout()
    except OSError as exc:  # a full disk, say
        return launch.unwritten(exc)
    return 0


def _put(stream: TextIO | None, text: str) -> None:
    if stream is not None:  # None: that descriptor was closed (``>&-``), as the CLI skips it
        stream.write(text)
        stream.flush()


def _file_sync(argv: list[str]) -> tuple[str, list[str], bool] | None:
    """(database file's real path, folder paths, ``--json``) of a plain ``sync`` line
    (:func:`contextgraph.launch.plain_sync`) on a database file; None for anything else."""
    from contextgraph import launch

    asked = launch.plain_sync(argv)
    if asked is None:
        return None
    database, paths, as_json = asked
    key = launch.database_key(database or launch.default_database())
    if key is None or "://" in key:
        return None
    return key, paths, as_json


if __name__ == "__main__":
    main()
