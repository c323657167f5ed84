"""Threads a long-running process runs beside its work: :func:`on_thread` starts one (the MCP
server's folder watcher runs on it too), :func:`start_refresher` the weights refresher.

The MCP server (``contextgraph mcp``) and the resident server (``contextgraph resident``) keep
BuildContext's precomputed lists (:mod:`contextgraph.graph.weights`) fresh while they run: a
sync computes them for its instant, and once the UTC day turns a reader finds them out of its
window and computes on the fly; :func:`start_refresher` recomputes them when that happens (or
the graph changed under a writer that did not compute them). Nothing starts when the
precompute is off (``weights_min_notes`` 0, the default), nor on a read-only database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from contextgraph.api import ContextGraph
from contextgraph.settings import Settings

log = logging.getLogger(__name__)

REFRESH_CHECK_SECONDS = 60.0


def on_thread(
    target: Callable[[], None], name: str, stop: threading.Event, graph: ContextGraph
) -> Callable[[], None]:
    """Start ``target`` on a daemon thread; return what stops it (``stop``) and closes ``graph``."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=30)
        graph.close()

    return halt


def start_refresher(
    database: str, every: float = REFRESH_CHECK_SECONDS, settings: Settings | None = None
) -> Callable[[], None]:
    """Refresh the precomputed lists when they are due, checking every ``every`` seconds on a
    thread (the first check at once); return its stop.

    ``settings`` default to the environment's. Nothing starts when the precompute is off or the
    database is read-only (the returned stop then does nothing)."""
    settings = settings if settings is not None else Settings.from_env()
    if settings.weights_min_notes <= 0:
        return lambda: None
    from contextgraph.graph import weights

    graph = ContextGraph.open(database, settings=settings)  # an MCP server opens it lazily
    if graph.read_only:
        graph.close()
        return lambda: None
    stop = threading.Event()

    def loop() -> None:
        while True:
            try:
                weights.refresh_when_due(graph.engine, graph.settings)
            except Exception:  # the next check tries again
                log.exception("refreshing the precomputed relation weights failed")
            if stop.wait(every):
                return

    return on_thread(loop, "contextgraph-weights", stop, graph)
