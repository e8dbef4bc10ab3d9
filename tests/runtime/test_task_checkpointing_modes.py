"""A StreamTask's barrier handling without Spark or sockets: the mailbox is fed by hand.

The task under test is `Map -> Sink` (parallelism 1) behind two source subtasks, so it has
two input channels and no output channel; acknowledgements are collected from its RPC.
"""

from __future__ import annotations

import queue

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy, _fs
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.channel_state import read_channel_state
from barrierflow.runtime.elements import CheckpointBarrier
from barrierflow.runtime.mails import InputReceived
from barrierflow.runtime.network import codec
from barrierflow.runtime.task import StreamTask, TaskSettings
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint, DeployTask


class _Wire:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, frame: bytes) -> None:
        self.sent.append(frame)


def two_input_task(tmp_path, **checkpointing) -> tuple[StreamTask, queue.SimpleQueue]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    (
        env.from_source(CollectionSource([1, 2]), WatermarkStrategy.no_watermarks(), "src")
        .rebalance()
        .map(lambda x: x)
        .uid("map")
        .set_parallelism(1)
        .sink_to(PrintSink())
        .uid("sink")
        .set_parallelism(1)
    )
    graph = env.get_job_graph("task-test")
    partitions = tuple(graph.all_subtasks())
    settings = TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d0",
        secret=b"secret",
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir=str(tmp_path),
        partitions=partitions,
        **checkpointing,
    )
    sent: queue.SimpleQueue = queue.SimpleQueue()
    partition = len(partitions) - 1
    descriptor = build_task_descriptors(graph)[partitions[partition]]
    task = StreamTask(descriptor, settings, partition, sent.put, queue.SimpleQueue())
    return task, sent


def deploy(task: StreamTask, channel_state=None) -> None:
    task.deploy_and_restore(DeployTask(0, {}, [], None, {}, channel_state=channel_state))
    assert task.gate is not None
    for channel in range(2):
        task.gate.connected(channel, _Wire())  # type: ignore[arg-type]


def arrive(task: StreamTask, channel: int, element) -> bytes:
    frame = codec.encode_event(element) if not isinstance(element, list) else None
    if frame is None:
        frame = codec.encode_batch(element)
        element = RecordBatch(element)
    task.handle(InputReceived(0, channel, element, frame))
    return frame


def next_ack(sent: queue.SimpleQueue) -> AcknowledgeCheckpoint:
    while True:
        message = sent.get(timeout=10)
        if isinstance(message, AcknowledgeCheckpoint):
            return message


def channel_state_of(tmp_path, ack: AcknowledgeCheckpoint):
    handle = ack.state_handle
    assert handle is not None
    location = _fs.Location(str(tmp_path)).child(f"chk-{ack.checkpoint_id}", handle.file)
    assert handle.channel_state is not None
    offset, length = handle.channel_state
    data = SubtaskStateReader().slice(location.uri, offset, length)
    return read_channel_state(data, input_channels=2)


def test_an_unaligned_task_persists_the_input_each_channel_delivered_before_its_barrier(tmp_path):
    task, sent = two_input_task(tmp_path, unaligned_checkpoints=True)
    deploy(task)
    barrier = CheckpointBarrier(1, 0)
    queued_1 = arrive(task, 1, [10, 11])  # queued on channel 1 before any barrier
    queued_0 = arrive(task, 0, [1])  # queued ahead of the barrier, unpolled at the snapshot
    arrive(task, 0, barrier)  # the snapshot is taken now, on arrival
    late_1 = arrive(task, 1, [12])  # arrives on channel 1 before its barrier: state
    arrive(task, 1, barrier)
    arrive(task, 1, [13])  # after the barrier: not state

    ack = next_ack(sent)
    assert ack.checkpoint_id == 1 and ack.unaligned
    assert ack.persisted_bytes == len(queued_0) + len(queued_1) + len(late_1)
    recovered = channel_state_of(tmp_path, ack)
    assert recovered.inputs == {0: [queued_0], 1: [queued_1, late_1]}
    assert recovered.outputs == {}


def test_an_aligned_task_acknowledges_only_once_the_barrier_was_polled_on_every_channel(tmp_path):
    task, sent = two_input_task(tmp_path)
    deploy(task)
    barrier = CheckpointBarrier(1, 0)
    arrive(task, 0, barrier)
    arrive(task, 1, [10])
    arrive(task, 1, barrier)
    for _ in range(2):
        task._step_input()
    assert task.gate is not None and task.gate.is_blocked(0)
    with pytest.raises(queue.Empty):
        while not isinstance(sent.get_nowait(), AcknowledgeCheckpoint):
            pass
    task._step_input()
    ack = next_ack(sent)
    assert ack.checkpoint_id == 1 and not ack.unaligned and ack.persisted_bytes == 0


def test_a_restored_task_polls_its_recovered_input_before_anything_new(tmp_path):
    task, sent = two_input_task(tmp_path, unaligned_checkpoints=True)
    deploy(task)
    barrier = CheckpointBarrier(1, 0)
    arrive(task, 1, [10, 11])
    arrive(task, 0, barrier)
    arrive(task, 1, barrier)
    ack = next_ack(sent)
    handle = ack.state_handle
    assert handle is not None
    assert handle.channel_state is not None
    uri = _fs.Location(str(tmp_path)).child("chk-1", handle.file).uri

    restored, _ = two_input_task(tmp_path, unaligned_checkpoints=True)
    arrive(restored, 1, [99])  # new input that arrived while the task was deploying
    deploy(restored, channel_state=(uri, *handle.channel_state))
    assert restored.gate is not None
    polled = [restored.gate.gate.poll(lambda channel: False) for _ in range(2)]
    assert polled == [(1, RecordBatch([10, 11])), (1, RecordBatch([99]))]
