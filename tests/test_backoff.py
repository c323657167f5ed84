"""The one retry loop (store/backoff.py) that db.read, db.write, db.run_write and the WAL
switch share."""

from __future__ import annotations

import pytest

from contextgraph.store import backoff


class Busy(Exception):
    pass


class Broken(Exception):
    pass


class Flaky:
    """Raises the given errors one call at a time, then returns "done"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def always(exc: BaseException) -> bool:
    return True


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []
    monkeypatch.setattr(backoff.time, "sleep", waited.append)
    return waited


def test_retries_with_doubling_waits_up_to_the_cap(sleeps: list[float]) -> None:
    attempt = Flaky(*[Busy() for _ in range(6)])
    seen: list[str] = []
    result = backoff.with_backoff(
        attempt,
        (Busy,),
        always,
        60.0,
        first=0.01,
        cap=0.05,
        before_sleep=lambda exc: seen.append(type(exc).__name__),
    )
    assert result == "done" and attempt.calls == 7
    assert sleeps == [0.01, 0.02, 0.04, 0.05, 0.05, 0.05]
    assert seen == ["Busy"] * 6


def test_an_error_retry_refuses_is_raised_at_once(sleeps: list[float]) -> None:
    attempt = Flaky(Busy("locked"), Busy("other"))
    with pytest.raises(Busy, match="other"):
        backoff.with_backoff(attempt, (Busy,), lambda exc: str(exc) == "locked", 60.0)
    assert attempt.calls == 2 and sleeps == [0.01]


def test_errors_not_listed_are_not_caught(sleeps: list[float]) -> None:
    with pytest.raises(Broken):
        backoff.with_backoff(Flaky(Broken()), (Busy,), always, 60.0)
    assert sleeps == []


def test_after_the_deadline_the_last_error_or_gave_up_is_raised(sleeps: list[float]) -> None:
    with pytest.raises(Busy, match="last"):
        backoff.with_backoff(Flaky(Busy("last")), (Busy,), always, -1.0)
    with pytest.raises(Broken, match="gave up after last") as raised:
        backoff.with_backoff(
            Flaky(Busy("last")),
            (Busy,),
            always,
            -1.0,
            gave_up=lambda exc: Broken(f"gave up after {exc}"),
        )
    assert isinstance(raised.value.__cause__, Busy)
    assert sleeps == []
