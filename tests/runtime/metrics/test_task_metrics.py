"""A task's metrics, event by event: records and bytes through a two-operator chain,
watermarks per operator, user metrics, and the mailbox loop's busy, idle and backpressured
time under a ManualClock (no sockets, no Spark)."""

from __future__ import annotations

import queue

import pytest

from barrierflow._clock import ManualClock
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.deployment import (
    InputChannelDescriptor,
    OperatorDescriptor,
    OutputEdgeDescriptor,
    SubtaskId,
    TaskDescriptor,
    TaskSettings,
)
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.mails import ChannelConnected, CreditReceived, InputReceived
from barrierflow.runtime.metrics import MailboxTime
from barrierflow.runtime.network import codec, task_channels
from barrierflow.runtime.operators.base import StreamOperator
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.runtime.partitioners import ForwardPartitioner
from barrierflow.runtime.task import StreamTask
from barrierflow.runtime.task_messages import DeployTask, TaskMetricsReport

ME, DOWNSTREAM, UPSTREAM = SubtaskId(1, 0), SubtaskId(2, 0), SubtaskId(0, 0)


class _Wire:
    """Both ends of a fake connection: records what is sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, frame: bytes) -> None:
        self.sent.append(frame)

    def close(self) -> None:
        pass


class PassThrough(StreamOperator):
    def process_batch(self, batch: RecordBatch) -> None:
        self.output.collect(batch)


class KeepsFirst(StreamOperator):
    """Emits the first record of each batch; counts what it saw in a user counter, as a user
    function registers one in `open`."""

    def open(self) -> None:
        group = TaskRuntimeContext(self.context, None, self.metric_group).get_metrics_group()
        self.seen = group.counter("seen")
        group.gauge("constant", lambda: 7)
        self.sizes = group.add_group("batches").distribution("size")

    def process_batch(self, batch: RecordBatch) -> None:
        self.seen.inc(len(batch))
        self.sizes.update(len(batch))
        self.output.collect(RecordBatch(batch.values[:1]))


class _Factory:
    def __init__(self, kind: type) -> None:
        self.kind = kind

    def make_operator(self, uid: str) -> StreamOperator:
        return self.kind(uid, self.kind.__name__)


class _ScriptedMailbox:
    """A mailbox whose blocking `get` lets the clock run `waits_ms` first (nothing arrives)."""

    def __init__(self, clock: ManualClock, waits_ms: list[int]) -> None:
        self._clock = clock
        self._waits = waits_ms

    def get(self, timeout: float) -> None:
        self._clock.advance(self._waits.pop(0))
        raise queue.Empty


def deployed(monkeypatch, credit: int = 10) -> tuple[StreamTask, _Wire, ManualClock]:
    """A task `PassThrough -> KeepsFirst` with one input channel and one output channel."""
    wire = _Wire()
    monkeypatch.setattr(task_channels, "connect_output", lambda *args: wire)
    descriptor = TaskDescriptor(
        subtask=ME,
        vertex_name="PassThrough -> KeepsFirst",
        parallelism=1,
        max_parallelism=128,
        operators=(
            OperatorDescriptor("pass", "PassThrough", _Factory(PassThrough)),
            OperatorDescriptor("keep", "KeepsFirst", _Factory(KeepsFirst)),
        ),
        outputs=(OutputEdgeDescriptor(0, ForwardPartitioner(), (DOWNSTREAM,), 1),),
        inputs=(InputChannelDescriptor(9, UPSTREAM),),
    )
    settings = TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d",
        secret=b"s",
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir="file:///nowhere",
        partitions=(UPSTREAM, ME, DOWNSTREAM),
    )
    clock = ManualClock(epoch_ms=50_000)
    task = StreamTask(descriptor, settings, 1, lambda message: None, queue.SimpleQueue(), clock)
    task.deploy_and_restore(DeployTask(0, {2: ("127.0.0.1", 1)}, [], None, {}))
    task.handle(ChannelConnected(0, 0, _Wire()))  # type: ignore[arg-type]
    if credit:
        task.handle(CreditReceived(0, 0, credit))
    return task, wire, clock


def arrive(task: StreamTask, element: object) -> int:
    """`element` arrives on the input channel and the task takes it; its frame's size."""
    frame = (
        codec.encode_batch(element.values, element.timestamps)
        if isinstance(element, RecordBatch)
        else codec.encode_event(element)
    )
    task.handle(InputReceived(0, 0, element, frame))
    task._step_input()
    return len(frame)


def test_records_and_bytes_are_counted_per_operator_and_per_task(monkeypatch):
    task, wire, _ = deployed(monkeypatch)
    frame_bytes = arrive(task, RecordBatch([1, 2, 3]))
    frame_bytes += arrive(task, RecordBatch([4, 5]))
    task.writer.flush()

    values = task.metrics_report().values
    assert values["records_in"] == 5
    assert values["records_out"] == 2  # the first record of each batch left the task
    assert values["bytes_in"] == frame_bytes
    assert values["bytes_out"] == sum(len(frame) for frame in wire.sent) > 0
    head, tail = values["operators"]
    assert (head["uid"], head["records_in"], head["records_out"]) == ("pass", 5, 5)
    assert (tail["uid"], tail["records_in"], tail["records_out"]) == ("keep", 5, 2)


def test_each_operator_reports_its_input_watermark_and_none_before_the_first(monkeypatch):
    task, _, _ = deployed(monkeypatch)
    assert [op["watermark"] for op in task.metrics_report().values["operators"]] == [None, None]
    arrive(task, Watermark(1_000))
    assert [op["watermark"] for op in task.metrics_report().values["operators"]] == [1_000, 1_000]
    arrive(task, Watermark(1_500))
    assert [op["watermark"] for op in task.metrics_report().values["operators"]] == [1_500, 1_500]


def test_user_metrics_registered_in_open_are_reported_with_their_operator(monkeypatch):
    task, _, _ = deployed(monkeypatch)
    arrive(task, RecordBatch([1, 2, 3]))
    arrive(task, RecordBatch([4]))
    head, tail = task.metrics_report().values["operators"]
    assert head["user"] == []
    assert sorted(tail["user"]) == [
        ["batches.size", "distribution", [2, 4.0, 1.0, 3.0, 1.0, 3.0, 3.0]],
        ["constant", "gauge", 7.0],
        ["seen", "counter", 4],
    ]


def test_the_report_carries_attempt_partition_and_the_task_clock(monkeypatch):
    task, _, clock = deployed(monkeypatch)
    clock.advance(250)
    report = task.metrics_report()
    assert isinstance(report, TaskMetricsReport)
    assert (report.attempt, report.partition, report.time_ms) == (0, 1, 50_250)


def test_waiting_for_input_is_idle_and_waiting_for_credit_is_backpressured(monkeypatch):
    task, _, clock = deployed(monkeypatch, credit=0)
    task.metrics.time.start()
    clock.advance(10)  # busy: processing
    task.mailbox = _ScriptedMailbox(clock, [40, 25])  # type: ignore[assignment]
    with pytest.raises(queue.Empty):
        task._wait_for_mail(0.05)  # nothing to do: idle 40 ms
    for _ in range(3):  # no credit: three buffers queue up, more than the writer's backlog
        task.writer.channels[0].send_buffer(codec.encode_batch([1], None))
    assert task.writer.is_backpressured()
    with pytest.raises(queue.Empty):
        task._wait_for_mail(0.05)  # blocked on credit: backpressured 25 ms
    clock.advance(5)  # busy again
    values = task.metrics_report().values
    assert (values["busy_ms"], values["idle_ms"], values["backpressured_ms"]) == (15.0, 40.0, 25.0)


def test_a_wait_in_progress_counts_up_to_now():
    clock = ManualClock()
    time = MailboxTime(clock)
    assert time.totals_ms() == (0.0, 0.0, 0.0)  # before the loop started
    time.start()
    time.wait(backpressured=True)
    clock.advance(30)
    assert time.totals_ms() == (0.0, 0.0, 30.0)
    time.resume()
    time.resume()  # a second resume changes nothing
    clock.advance(10)
    assert time.totals_ms() == (10.0, 0.0, 30.0)
