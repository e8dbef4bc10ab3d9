"""SparkAttemptRunner around Spark: an attempt waits for slots before its stage is submitted,
and one cancelled during that wait is never submitted."""

from __future__ import annotations

import queue
import threading
from types import SimpleNamespace

from barrierflow.cluster.mails import SparkJobEnded
from barrierflow.cluster.spark import runner as spark_runner
from barrierflow.cluster.spark.runner import SparkAttemptRunner

FAKE_CONTEXT = SimpleNamespace(
    master="spark://127.0.0.1:7077",
    statusTracker=lambda: SimpleNamespace(getJobIdsForGroup=lambda group: []),
    getConf=lambda: SimpleNamespace(get={"spark.driver.host": "127.0.0.1"}.get),
)


def runner_waiting_for_slots(monkeypatch):
    """A runner whose slot check blocks until released; the stages it submits are recorded."""
    waiting, release, submitted = threading.Event(), threading.Event(), []
    monkeypatch.setattr(
        spark_runner, "check_slots", lambda sc, n: (waiting.set(), release.wait(10))
    )
    monkeypatch.setattr(spark_runner, "run_attempt", lambda *args: submitted.append(args[3]))
    monkeypatch.setattr(spark_runner, "cancel_attempt", lambda sc, group: None)
    mails: queue.SimpleQueue = queue.SimpleQueue()
    runner = SparkAttemptRunner(FAKE_CONTEXT, 4, "job", mails.put)
    return runner, waiting, release, submitted, mails


def test_an_attempt_is_submitted_once_the_slots_are_there(monkeypatch):
    runner, waiting, release, submitted, mails = runner_waiting_for_slots(monkeypatch)
    runner.submit(b"payload", "group-0", 0)
    assert waiting.wait(10)
    assert submitted == []
    release.set()
    assert mails.get(timeout=10) == SparkJobEnded(0, None)
    assert submitted == ["group-0"]


def test_an_attempt_cancelled_while_waiting_for_slots_is_never_submitted(monkeypatch):
    runner, waiting, release, submitted, mails = runner_waiting_for_slots(monkeypatch)
    runner.submit(b"payload", "group-1", 1)
    assert waiting.wait(10)
    runner.cancel("group-1")
    release.set()
    ended = mails.get(timeout=10)
    assert ended.attempt == 1 and "cancelled before it started" in ended.error
    assert submitted == []
