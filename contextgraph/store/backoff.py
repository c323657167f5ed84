"""Retry with exponential backoff: the one loop behind every wait for a busy database."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def with_backoff(
    attempt: Callable[[], T],
    errors: tuple[type[BaseException], ...],
    retry: Callable[[BaseException], bool],
    seconds: float,
    *,
    first: float = 0.01,
    cap: float = 0.25,
    before_sleep: Callable[[BaseException], None] | None = None,
    gave_up: Callable[[BaseException], BaseException] | None = None,
) -> T:
    """Return ``attempt()``, called again while it raises one of ``errors`` that ``retry``
    accepts, for up to ``seconds``; the waits between are ``first`` seconds, doubling up to
    ``cap``.

    Then the last error is raised, or ``gave_up(error)`` raised from it; an error ``retry``
    refuses is raised at once. ``before_sleep(error)`` runs before each wait.
    """
    start = time.monotonic()
    delay = first
    while True:
        try:
            return attempt()
        except errors as exc:
            if not retry(exc):
                raise
            if time.monotonic() - start > seconds:
                if gave_up is None:
                    raise
                raise gave_up(exc) from exc
            if before_sleep is not None:
                before_sleep(exc)
            time.sleep(delay)
            delay = min(delay * 2, cap)
