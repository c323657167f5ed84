"""Runs that may read but must not write, stopped where a write would begin.

A resident server answers ``contextgraph sync`` only when the sync changes nothing (the common
case of a hook or a script that syncs after every edit): it runs the sync inside
:func:`refusing`, and the sync stops, with :class:`WouldWrite`, where it would begin to write
or to do work that ends in a write (read changed files, detect communities, take a sync lock
another process holds). The server then hands the command back and its client runs it itself,
so a sync that has work to do runs exactly as without a server.

The state is a :class:`contextvars.ContextVar`: only the code inside :func:`refusing`, on its own
thread, is affected.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from contextgraph.errors import ContextGraphError


class WouldWrite(ContextGraphError):
    """Raised inside :func:`refusing` where the run would begin to write."""


@dataclass
class Refusal:
    """What :func:`refusing` yields: whether the run was stopped, and where."""

    stopped: str | None = None


_current: ContextVar[Refusal | None] = ContextVar("contextgraph_refusing_writes", default=None)


@contextmanager
def refusing() -> Iterator[Refusal]:
    """Run the block with every write refused; the yielded :class:`Refusal` says if one was."""
    refusal = Refusal()
    token = _current.set(refusal)
    try:
        yield refusal
    finally:
        _current.reset(token)


def active() -> bool:
    """True inside :func:`refusing`."""
    return _current.get() is not None


def check(what: str) -> None:
    """Call where ``what`` (work that writes, or ends in a write) begins: inside
    :func:`refusing` this stops the run there; elsewhere it does nothing."""
    refusal = _current.get()
    if refusal is not None:
        refusal.stopped = what
        raise WouldWrite(f"stopped before it would {what}")
