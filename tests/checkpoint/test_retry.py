"""Retrying a storage call: transient faults tried again on a growing schedule, event by
event with a fake clock; a missing file and other errors never retried."""

from __future__ import annotations

import errno

import pytest

from barrierflow.checkpoint.retry import Backoff, is_transient, retry_transient


class FakeClock:
    """A clock that moves only when the retry sleeps; records each wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


class Storage:
    """Answers with the given outcomes in order (an exception is raised), noting when."""

    def __init__(self, clock: FakeClock, *outcomes: object) -> None:
        self.clock = clock
        self.outcomes = list(outcomes)
        self.calls: list[float] = []

    def __call__(self) -> object:
        self.calls.append(self.clock.now)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


SLOW_DOWN = OSError("AWS Error SLOW_DOWN during GetObject operation: Please reduce your rate")


def test_the_schedule_grows_to_its_cap():
    assert Backoff(attempts=6, first_delay_s=0.1, multiplier=3, max_delay_s=1).delays() == [
        0.1, 0.30000000000000004, 0.9000000000000001, 1, 1,
    ]  # fmt: skip
    assert Backoff(attempts=1).delays() == []
    with pytest.raises(ValueError, match="at least one attempt"):
        Backoff(attempts=0)


def test_a_fault_then_an_answer_returns_the_answer_after_one_wait():
    clock = FakeClock()
    storage = Storage(clock, SLOW_DOWN, b"metadata")

    assert retry_transient(storage, "reading x", Backoff(attempts=5), clock.sleep) == b"metadata"
    assert storage.calls == [0.0, 0.2]
    assert clock.waits == [0.2]


def test_each_fault_waits_longer_and_the_last_fault_propagates():
    clock = FakeClock()
    reset = ConnectionResetError(errno.ECONNRESET, "reset by peer")
    eio = OSError(errno.EIO, "Input/output error")
    storage = Storage(clock, SLOW_DOWN, reset, TimeoutError("timed out"), eio)

    with pytest.raises(OSError) as raised:
        retry_transient(storage, "reading x", Backoff(4, 0.5, max_delay_s=5), clock.sleep)

    assert raised.value is eio
    assert storage.calls == [0.0, 0.5, 1.5, 3.5]
    assert clock.waits == [0.5, 1.0, 2.0]


def test_a_missing_file_is_never_retried():
    clock = FakeClock()
    missing = FileNotFoundError(errno.ENOENT, "no such file")
    storage = Storage(clock, missing)

    with pytest.raises(FileNotFoundError):
        retry_transient(storage, "reading x", Backoff(attempts=5), clock.sleep)

    assert storage.calls == [0.0] and clock.waits == []


def test_a_missing_file_after_a_fault_ends_the_retries_at_once():
    clock = FakeClock()
    storage = Storage(clock, SLOW_DOWN, FileNotFoundError("gone"), b"never")

    with pytest.raises(FileNotFoundError):
        retry_transient(storage, "reading x", Backoff(attempts=5), clock.sleep)

    assert storage.calls == [0.0, 0.2]


def test_an_error_that_is_no_os_error_is_never_retried():
    clock = FakeClock()
    storage = Storage(clock, ValueError("unrecognized filesystem type in URI"))

    with pytest.raises(ValueError):
        retry_transient(storage, "reading x", Backoff(attempts=5), clock.sleep)

    assert storage.calls == [0.0]


def test_which_errors_are_transient():
    assert is_transient(SLOW_DOWN)
    assert is_transient(PermissionError(errno.EACCES, "denied"))
    assert is_transient(TimeoutError())
    assert not is_transient(FileNotFoundError())
    assert not is_transient(ValueError())
