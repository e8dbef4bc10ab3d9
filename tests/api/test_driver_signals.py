"""SIGTERM/SIGINT on the driver (api/driver_signals.py), with real signals sent to this
process: the first asks for a cancel, a second exits at once, the old handlers come back."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from barrierflow.api.driver_signals import StopOnSignals


class Calls:
    def __init__(self) -> None:
        self.cancels: list[str] = []
        self.exits: list[int] = []
        self.lines: list[str] = []


def stop_on_signals(calls: Calls) -> StopOnSignals:
    return StopOnSignals(
        "job-x", calls.cancels.append, write=calls.lines.append, exit_now=calls.exits.append
    )


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_first_signal_cancels_and_a_second_exits_at_once(signum, status):
    calls = Calls()
    with stop_on_signals(calls) as signals:
        os.kill(os.getpid(), signum)
        assert signals.received == signum and calls.exits == []
        name = signal.Signals(signum).name
        assert calls.cancels == [f"stopped by {name}"]
        os.kill(os.getpid(), signum)
        assert calls.exits == [status] and calls.cancels == [f"stopped by {name}"]
    assert "cleanup of job 'job-x' was cut short" in calls.lines[1]
    assert "barrierflow cleanup" in calls.lines[1]
    assert all(line.count("\n") == 1 for line in calls.lines)
    assert signals.stopped_line("done") == f"barrierflow: job 'job-x' stopped by {name}: done\n"


def test_the_previous_handlers_are_restored():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with stop_on_signals(Calls()):
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before


def test_off_the_main_thread_nothing_is_installed():
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def block() -> None:
        with stop_on_signals(Calls()):
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=block)
    thread.start()
    thread.join()
    assert seen == [before]
