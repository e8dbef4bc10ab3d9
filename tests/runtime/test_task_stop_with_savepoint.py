"""A StreamTask stopping with a savepoint, without Spark or sockets: mails fed by hand.

A source told to stop ends its input with MAX_WATERMARK only when draining; a task that
took the final checkpoint's snapshot processes nothing more (an upstream's end of
partition counts as MAX_WATERMARK and would fire windows the savepoint still holds); the
savepoint's barrier names the folder its state file goes to. Results of async I/O calls
still in flight at the final snapshot are in that snapshot, so they wait: they come out
only if the final checkpoint aborts (the task goes on), never once it completed.
"""

from __future__ import annotations

import asyncio
import queue
import threading

import pytest

from barrierflow import (
    AsyncDataStream,
    Duration,
    StreamExecutionEnvironment,
    WatermarkStrategy,
    _fs,
)
from barrierflow._clock import ManualClock
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.functions import AsyncFunction
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, CheckpointBarrier, EndOfPartition, Watermark
from barrierflow.runtime.mails import CreditReceived, InputReceived, RpcReceived, RunAction
from barrierflow.runtime.network import codec, task_channels
from barrierflow.runtime.task import StreamTask, TaskSettings
from barrierflow.runtime.task_messages import (
    AcknowledgeCheckpoint,
    DeployTask,
    EndOfInput,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    StopSources,
    TriggerCheckpoint,
)
from barrierflow.window import TumblingEventTimeWindows

WORDS = [("a", i) for i in range(50)]


class _Wire:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, frame: bytes) -> None:
        self.sent.append(frame)

    def close(self) -> None:
        pass

    def decoded(self) -> list:
        return [codec.decode(frame) for frame in self.sent]


def windowed_job():
    """words (2 subtasks) -> key_by -> 1 s event-time window (1 subtask) -> rebalance -> map."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    (
        env.from_source(CollectionSource(WORDS), WatermarkStrategy.no_watermarks(), "src")
        .key_by(lambda pair: pair[0])
        .window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("window")
        .set_parallelism(1)
        .rebalance()
        .map(lambda x: x)
        .uid("map")
        .set_parallelism(1)
        .sink_to(PrintSink())
        .set_parallelism(1)
    )
    return env.get_job_graph("stop-test")


def task_of(
    tmp_path, monkeypatch, vertex: str, graph=None, changelog: bool = False
) -> tuple[StreamTask, _Wire, queue.SimpleQueue]:
    """The deployed task of the first subtask of `vertex`, its one output on a wire
    (`changelog`: changelog checkpoints of its heap state)."""
    graph = graph or windowed_job()
    partitions = tuple(graph.all_subtasks())
    descriptors = build_task_descriptors(graph)
    partition = next(
        i for i, s in enumerate(partitions) if descriptors[s].vertex_name.startswith(vertex)
    )
    wire = _Wire()
    monkeypatch.setattr(task_channels, "connect_output", lambda *args: wire)
    settings = TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d0",
        secret=b"secret",
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir=str(tmp_path / "checkpoints"),
        partitions=partitions,
        buffer_size=10,
        changelog_state_backend=changelog,
    )
    sent: queue.SimpleQueue = queue.SimpleQueue()
    task = StreamTask(
        descriptors[partitions[partition]], settings, partition, sent.put, queue.SimpleQueue(),
        ManualClock(epoch_ms=10_000),
    )  # fmt: skip
    splits = CollectionSource(WORDS).create_splits()[:1] if vertex == "src" else []
    peers = {p: ("127.0.0.1", 1) for p in range(len(partitions))}
    task.deploy_and_restore(DeployTask(0, peers, splits, None, {}))
    if task.gate is not None:
        for channel in range(task.gate.channel_count):
            task.gate.connected(channel, _Wire())  # type: ignore[arg-type]
    if task.writer.channels:
        task.handle(CreditReceived(0, 0, 100))
    return task, wire, sent


def sent_of(sent: queue.SimpleQueue, kind: type) -> list:
    found = []
    while True:
        try:
            message = sent.get(timeout=0 if kind is not AcknowledgeCheckpoint else 10)
        except queue.Empty:
            return found
        if isinstance(message, kind):
            found.append(message)
            if kind is AcknowledgeCheckpoint:
                return found


@pytest.mark.parametrize("drain", [True, False], ids=["drain", "no-drain"])
def test_a_stopped_source_ends_its_input_with_max_watermark_only_when_draining(
    tmp_path, monkeypatch, drain
):
    task, wire, sent = task_of(tmp_path, monkeypatch, "src")
    task._step_source()  # one batch goes out
    task.handle(RpcReceived(StopSources(0, drain)))
    assert not task._can_work()  # it reads nothing more
    task._report_end_of_input()
    task.writer.flush()

    assert sent_of(sent, EndOfInput) == [EndOfInput(0, task.partition)]
    out = wire.decoded()
    records = [v for e in out if isinstance(e, RecordBatch) for v in e.values]
    assert records == [("a", i) for i in range(10)]  # one batch, then nothing more
    watermarks = [e for e in out if isinstance(e, Watermark)]
    assert watermarks == ([Watermark(MAX_WATERMARK)] if drain else [])
    task.handle(RpcReceived(StopSources(0, drain)))  # a second stop changes nothing
    assert not task._can_work()


def arrive(task: StreamTask, channel: int, element) -> None:
    if isinstance(element, RecordBatch):
        frame = codec.encode_batch(element.values, element.timestamps)
    else:
        frame = codec.encode_event(element)
    task.handle(InputReceived(0, channel, element, frame))


def run_until_idle(task: StreamTask) -> None:
    """What the mailbox loop does between mails: work while it may."""
    while task._can_work():
        task._step_input()
    task.writer.flush()


@pytest.mark.parametrize("drain", [True, False], ids=["drain", "no-drain"])
def test_nothing_follows_the_final_savepoint_barrier_not_even_the_end_of_partition(
    tmp_path, monkeypatch, drain
):
    # Stop without drain: the upstream's end of partition, after the final barrier, counts as
    # MAX_WATERMARK and used to fire the open window; its result went out after the savepoint
    # and would come again after a restore from it.
    task, wire, sent = task_of(tmp_path, monkeypatch, "Window")
    target = _fs.location(tmp_path / "sp" / "savepoint-abcdef-0123456789ab").uri
    arrive(task, 0, RecordBatch([("a", 1)], [100]))
    arrive(task, 1, RecordBatch([("a", 2)], [200]))
    if drain:  # the stopped sources ended their input
        for channel in (0, 1):
            arrive(task, channel, Watermark(MAX_WATERMARK))
    barrier = CheckpointBarrier(7, 10_000, is_savepoint=True, is_final=True, target=target)
    for channel in (0, 1):
        arrive(task, channel, barrier)
    for channel in (0, 1):  # an upstream finished
        arrive(task, channel, EndOfPartition())
    run_until_idle(task)

    (ack,) = sent_of(sent, AcknowledgeCheckpoint)
    assert ack.checkpoint_id == 7 and ack.state_handle is not None
    assert _fs.exists(_fs.Location(target).child(ack.state_handle.file))  # the savepoint's folder
    assert not (tmp_path / "checkpoints" / "chk-7").exists()
    results = [v for e in wire.decoded() if isinstance(e, RecordBatch) for v in e.values]
    assert results == ([("a", 3)] if drain else [])
    assert not task._can_work()


def test_a_task_goes_on_once_its_final_checkpoint_was_aborted(tmp_path, monkeypatch):
    task, _, _ = task_of(tmp_path, monkeypatch, "Window")
    barrier = CheckpointBarrier(7, 10_000, is_final=True)
    for channel in (0, 1):
        arrive(task, channel, barrier)
    arrive(task, 0, Watermark(MAX_WATERMARK))
    run_until_idle(task)
    assert task.checkpoints.holds_final_snapshot and not task._can_work()
    task.handle(RpcReceived(NotifyCheckpointAborted(0, 7)))  # retried later
    assert not task.checkpoints.holds_final_snapshot
    assert task._can_work()


def heap_files_of_checkpoints(tmp_path, monkeypatch, final_at: int | None) -> list[str]:
    """The kind of keyed-state file each checkpoint of a window task uploads (changelog
    checkpoints) while its one value grows by a record per checkpoint, up to checkpoint
    `final_at`, which is the job's final one (None: ten plain checkpoints)."""
    task, _, sent = task_of(tmp_path, monkeypatch, "Window", changelog=True)
    kinds: list[str] = []
    for checkpoint_id in range(1, 11):
        is_final = checkpoint_id == final_at
        arrive(task, 0, RecordBatch([("a", "y" * 200)], [100]))  # the reduce concatenates
        for channel in (0, 1):
            arrive(task, channel, CheckpointBarrier(checkpoint_id, 10_000, is_final=is_final))
        run_until_idle(task)
        (ack,) = sent_of(sent, AcknowledgeCheckpoint)
        task.handle(RpcReceived(NotifyCheckpointComplete(0, checkpoint_id, is_final)))
        (new,) = [name for name, _, new in ack.shared_files if new and ".heap" in name]
        kinds.append(new.rsplit(".", 1)[1])
        if is_final:
            break
    return kinds


def test_the_final_checkpoint_extends_the_changelog_chain_where_a_base_was_due(
    tmp_path, monkeypatch
):
    """The same records and barriers twice: where plain checkpoints write a new base (the
    deltas, each the whole growing value, outgrew the state), a final one adds a delta."""
    plain = heap_files_of_checkpoints(tmp_path / "plain", monkeypatch, None)
    assert plain[0] == "heapbase"
    rebased = plain.index("heapbase", 1) + 1  # a checkpoint id
    final = heap_files_of_checkpoints(tmp_path / "final", monkeypatch, rebased)
    assert final == [*plain[: rebased - 1], "heapdelta"]


def test_a_savepoint_between_changelog_deltas_is_written_whole(tmp_path, monkeypatch):
    """After a base and a delta, a savepoint's barrier (snapshot held whole, not as the
    delta its checkpoint would have been) writes a canonical state file with no shared
    file; the next checkpoint adds a delta to the chain again."""
    task, _, sent = task_of(tmp_path, monkeypatch, "Window", changelog=True)
    target = _fs.location(tmp_path / "sp" / "savepoint-abcdef-0123456789ab").uri
    barriers = [CheckpointBarrier(1, 10_000), CheckpointBarrier(2, 10_000)]
    barriers += [CheckpointBarrier(3, 10_000, is_savepoint=True, target=target)]
    barriers += [CheckpointBarrier(4, 10_000)]
    acks = []
    for barrier in barriers:
        arrive(task, 0, RecordBatch([("a", "y" * 20)], [100]))
        for channel in (0, 1):
            arrive(task, channel, barrier)
        run_until_idle(task)
        (ack,) = sent_of(sent, AcknowledgeCheckpoint)
        acks.append(ack)
        task.handle(RpcReceived(NotifyCheckpointComplete(0, barrier.checkpoint_id, False)))
    kinds = [
        [name.rsplit(".", 1)[1] for name, _, new in ack.shared_files if new and ".heap" in name]
        for ack in acks
    ]
    assert kinds == [["heapbase"], ["heapdelta"], [], ["heapdelta"]]
    assert not acks[2].shared_files, "canonical: its keyed section names no chain"
    assert len(list((tmp_path / "sp").glob("savepoint-*/*"))) == 1


class HeldCalls(AsyncFunction):
    """Every call completes only once the test releases them all: ["<word>!"]."""

    release = threading.Event()

    async def async_invoke(self, value):
        await asyncio.get_running_loop().run_in_executor(None, HeldCalls.release.wait, 30)
        return [f"{value[0]}{value[1]}!"]


def async_job(out):
    """words -> async I/O (calls held) -> file sink, chained in one task."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    words = env.from_source(CollectionSource(WORDS), WatermarkStrategy.no_watermarks(), "src")
    AsyncDataStream.unordered_wait(words, HeldCalls(), 0).uid("lookup").sink_to(
        FileSink.for_rows(str(out))
    ).uid("sink")
    return env.get_job_graph("stop-async-test")


def stopped_with_calls_in_flight(tmp_path, monkeypatch):
    """A task whose source stopped (no drain) with 10 async calls in flight, that took the
    final savepoint's snapshot and acknowledged it, and whose calls then completed (their
    outcome mails arrived). Returns the task, its sent messages and those outcome mails."""
    HeldCalls.release.clear()
    task, _, sent = task_of(tmp_path, monkeypatch, "src", async_job(tmp_path / "out"))
    task._step_source()  # one batch: 10 calls in flight
    task.handle(RpcReceived(StopSources(0, False)))
    task._report_end_of_input()
    assert sent_of(sent, EndOfInput) == [EndOfInput(0, task.partition)]
    target = _fs.location(tmp_path / "sp" / "savepoint-abcdef-0123456789ab").uri
    task.handle(
        RpcReceived(TriggerCheckpoint(0, 7, 10_000, True, is_savepoint=True, target=target))
    )
    (ack,) = sent_of(sent, AcknowledgeCheckpoint)
    assert ack.checkpoint_id == 7
    HeldCalls.release.set()
    outcomes = [task.mailbox.get(timeout=10) for _ in range(10)]  # one mail per call
    assert all(isinstance(mail, RunAction) for mail in outcomes)
    return task, sent, outcomes


def committed(tmp_path) -> list:
    return sorted(
        line for f in (tmp_path / "out").glob("part-*") for line in f.read_text().splitlines()
    )


def test_async_results_after_the_final_snapshot_wait_and_go_once_it_completed(
    tmp_path, monkeypatch
):
    # They used to be emitted at once: the chained file sink wrote them into a transaction no
    # checkpoint covers, and its close() failed the task with "file(s) ... were never
    # committed"; a restore from the savepoint (which holds the 10 elements) would emit them
    # again.
    task, _, outcomes = stopped_with_calls_in_flight(tmp_path, monkeypatch)
    try:
        for mail in outcomes:
            task.handle(mail)
        task.handle(RpcReceived(NotifyCheckpointComplete(0, 7, True)))
        task._finish()  # closes the chain: nothing uncommitted is left
        assert committed(tmp_path) == []  # the 10 results are the savepoint's, not output
    finally:
        task.tear_down()


def test_async_results_after_the_final_snapshot_come_out_once_it_aborted(tmp_path, monkeypatch):
    task, sent, outcomes = stopped_with_calls_in_flight(tmp_path, monkeypatch)
    try:
        for mail in outcomes:
            task.handle(mail)
        assert committed(tmp_path) == []
        task.handle(RpcReceived(NotifyCheckpointAborted(0, 7)))  # the task goes on
        task.handle(RpcReceived(TriggerCheckpoint(0, 8, 11_000, True, is_savepoint=True)))
        (ack,) = sent_of(sent, AcknowledgeCheckpoint)
        assert ack.checkpoint_id == 8
        task.handle(RpcReceived(NotifyCheckpointComplete(0, 8, True)))
        task._finish()
        assert committed(tmp_path) == sorted(f'"a{i}!"' for i in range(10))
    finally:
        task.tear_down()
