"""The ``contextgraph`` command line: parse options, call the library, format the result.

One group (:mod:`.base`: ``--db``, ``--json``, one-line errors) and its commands by what they do:
:mod:`.folders` (init, sync, sources, watch), :mod:`.query` (context, expand, search, read,
retrieve, visualize, communities), :mod:`.write` (write, edit, move, delete) and :mod:`.admin`
(mcp, stats, doctor, db). Exit codes: 0 ok, 1 error (one line on stderr), 2 usage.
"""

from __future__ import annotations

from contextgraph.cli import admin, folders, query, write
from contextgraph.cli.base import cli, main

for _module in (folders, query, write, admin):
    for _command in _module.COMMANDS:
        cli.add_command(_command)

__all__ = ["cli", "main"]
