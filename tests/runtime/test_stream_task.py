"""StreamTask without Spark or sockets: typed mails, operators that wait, ending normally."""

from __future__ import annotations

import queue

import pytest

from barrierflow._clock import ManualClock
from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.deployment import (
    InputChannelDescriptor,
    OperatorDescriptor,
    OutputEdgeDescriptor,
    SubtaskId,
    TaskDescriptor,
    TaskSettings,
)
from barrierflow.runtime.elements import EndOfPartition
from barrierflow.runtime.mails import CreditReceived, InputChannelLost, InputReceived, RunAction
from barrierflow.runtime.network import codec, task_channels
from barrierflow.runtime.operators.base import StreamOperator
from barrierflow.runtime.partitioners import ForwardPartitioner
from barrierflow.runtime.task import StreamTask
from barrierflow.runtime.task_messages import DeployTask, TaskFinished, TaskMetricsReport
from barrierflow.runtime.task_phase import TaskPhase
from barrierflow.runtime.task_reports import FIRST_RATE_MS


class _Wire:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, frame: bytes) -> None:
        self.sent.append(frame)

    def close(self) -> None:
        pass


class EmitsOnClose(StreamOperator):
    """Emits one last batch while closing (a flushing buffer, a final aggregate)."""

    accepting = True

    def process_batch(self, batch: RecordBatch) -> None:
        self.output.collect(batch)

    def accepts_input(self) -> bool:
        return self.accepting

    def close(self) -> None:
        self.closed = True
        self.output.collect(RecordBatch(["last words"]))


class _Factory:
    def make_operator(self, uid: str) -> StreamOperator:
        return EmitsOnClose(uid, "EmitsOnClose")


ME, DOWNSTREAM = SubtaskId(0, 0), SubtaskId(1, 0)


def deployed_task(
    monkeypatch, attempt: int = 0, inputs: int = 0
) -> tuple[StreamTask, _Wire, queue.SimpleQueue]:
    """A one-operator task with one output channel to a wire (and `inputs` input channels
    from upstream subtasks), deployed and opened."""
    wire = _Wire()
    monkeypatch.setattr(task_channels, "connect_output", lambda *args: wire)
    descriptor = TaskDescriptor(
        subtask=ME,
        vertex_name="EmitsOnClose",
        parallelism=1,
        max_parallelism=128,
        operators=(OperatorDescriptor("emit", "EmitsOnClose", _Factory()),),
        outputs=(OutputEdgeDescriptor(0, ForwardPartitioner(), (DOWNSTREAM,), 0),),
        inputs=tuple(InputChannelDescriptor(9, SubtaskId(2, i)) for i in range(inputs)),
    )
    settings = TaskSettings(
        job_id="job",
        attempt=attempt,
        deployment_id="d",
        secret=b"s",
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir="file:///nowhere",
        partitions=(ME, DOWNSTREAM),
    )
    sent: queue.SimpleQueue = queue.SimpleQueue()
    task = StreamTask(descriptor, settings, 0, sent.put, queue.SimpleQueue(), ManualClock())
    task.deploy_and_restore(DeployTask(attempt, {1: ("127.0.0.1", 1)}, [], None, {}))
    task.handle(CreditReceived(attempt, 0, 10))
    return task, wire, sent


def test_output_emitted_in_close_goes_out_before_the_end_of_partition(monkeypatch):
    # issue 9, defect 7: the end of partition was broadcast before the chain closed, so what
    # an operator emitted in close() came after it (and was lost downstream).
    task, wire, sent = deployed_task(monkeypatch)
    task._phase = TaskPhase.FINISHING  # the final checkpoint completed
    task._finish()
    assert [codec.decode(frame) for frame in wire.sent] == [
        RecordBatch(["last words"]),
        EndOfPartition(),
    ]
    final_report = sent.get_nowait()  # the last metrics heartbeat counts the close's output
    assert isinstance(final_report, TaskMetricsReport)
    assert final_report.values["records_out"] == 1
    assert isinstance(sent.get_nowait(), TaskFinished)


def test_a_mail_of_another_attempt_is_refused_and_an_unknown_mail_is_an_error(monkeypatch):
    task, _, _ = deployed_task(monkeypatch, attempt=2)
    ran: list[str] = []
    task.handle(RunAction(1, lambda: ran.append("old"), "a zombie's action"))
    task.handle(RunAction(2, lambda: ran.append("mine"), "this attempt's action"))
    assert ran == ["mine"]
    with pytest.raises(StreamCorruptionError, match="unknown mail"):
        task.handle(("input", 0, RecordBatch([1]), None))


def test_the_operator_context_hands_actions_to_the_mailbox_thread(monkeypatch):
    task, _, _ = deployed_task(monkeypatch, attempt=3)
    operator = task.chain.operators[0]
    assert operator.context is not None
    ran: list[int] = []
    operator.context.mailbox.execute(lambda: ran.append(1), "completion")
    assert ran == []  # posted, not run on the caller's thread
    mail = task.mailbox.get_nowait()
    assert mail == RunAction(3, mail.action, "completion")
    task.handle(mail)
    assert ran == [1]


def test_a_task_does_no_work_and_does_not_finish_while_an_operator_refuses_input(monkeypatch):
    task, wire, _ = deployed_task(monkeypatch)
    operator = task.chain.operators[0]
    assert isinstance(operator, EmitsOnClose)
    operator.accepting = False
    assert not task._can_work()
    closed_when_accepting_again: list[bool] = []

    def accept_again() -> None:
        closed_when_accepting_again.append(hasattr(operator, "closed"))
        operator.accepting = True

    task._phase = TaskPhase.FINISHING  # the final checkpoint completed meanwhile
    task.mailbox.put(RunAction(0, accept_again, "the operator's last result arrived"))
    task._loop()  # returns only once the operator accepts input again
    assert closed_when_accepting_again == [False]
    task._finish()
    assert codec.decode(wire.sent[-1]) == EndOfPartition()


def test_a_task_ends_only_after_every_upstream_ended_its_partition(monkeypatch):
    # Regression (issue 10): a task that heard of the final checkpoint first closed its input
    # channels while an upstream had not yet heard it; the upstream lost its output channel
    # and the finished job failed over ("lost the output channel to subtask 1.1").
    task, _, _ = deployed_task(monkeypatch, inputs=2)
    task._phase = TaskPhase.FINISHING  # the final checkpoint completed
    assert not task._inputs_released()
    task.handle(InputReceived(0, 0, EndOfPartition(), codec.encode_event(EndOfPartition())))
    assert not task._inputs_released()
    task.handle(InputChannelLost(0, 1))  # an upstream gone after the final checkpoint
    assert task._inputs_released()
    task._loop()  # returns at once: nothing holds the task any more


def test_a_task_waits_for_its_inputs_ends_only_so_long(monkeypatch):
    task, _, _ = deployed_task(monkeypatch, inputs=1)
    task._phase = TaskPhase.FINISHING
    task._finished_at = task._clock.monotonic()
    assert not task._inputs_released()
    task._clock.advance(int(task.settings.connect_timeout_s * 1000) + 1)
    assert task._inputs_released()


def test_the_second_metrics_report_follows_the_first_within_a_moment_then_every_interval(
    monkeypatch,
):
    # issue 21: rates come from two reports of an attempt; with the second a whole interval
    # after the first, an attempt showed no rate for its first second ("RUNNING: in -").
    task, _, sent = deployed_task(monkeypatch)
    clock = task._clock
    task._report_metrics(first=True)
    times = [sent.get_nowait().time_ms]
    for _ in range(3):
        clock.advance(100)
        task.scheduler.run_due()
        while not sent.empty():
            times.append(sent.get_nowait().time_ms)
    clock.advance(1_000 - 300 + 200)
    task.scheduler.run_due()
    while not sent.empty():
        times.append(sent.get_nowait().time_ms)
    start = times[0]
    assert [t - start for t in times] == [0, FIRST_RATE_MS, FIRST_RATE_MS + 1_000]
