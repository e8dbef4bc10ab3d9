"""A StreamTask whose keyed state is snapshotted asynchronously, without Spark or sockets.

The task under test is `KeyedProcess -> Sink` (parallelism 1) behind two source subtasks;
its mailbox is fed by hand and its RPC collected. The keyed snapshot is serialized on the
uploader thread, so a value that cannot be pickled surfaces there: the task must still
fail with the ConfigurationError naming state and key, as when it was pickled at the
barrier.
"""

from __future__ import annotations

import queue
import threading

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.errors import ConfigurationError
from barrierflow.functions import KeyedProcessFunction
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import CheckpointBarrier
from barrierflow.runtime.mails import InputReceived, SnapshotFailed
from barrierflow.runtime.network import codec
from barrierflow.runtime.task import StreamTask, TaskSettings
from barrierflow.runtime.task_messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    DeployTask,
)
from barrierflow.state import ValueStateDescriptor


class KeepsALock(KeyedProcessFunction):
    """Keeps a count per key, and for key "lock" a lock, which pickle refuses."""

    def open(self, runtime_context):
        self.kept = runtime_context.get_state(ValueStateDescriptor("kept"))

    def process_element(self, value, ctx):
        self.kept.update(threading.Lock() if value == "lock" else (self.kept.value() or 0) + 1)
        yield value


class _Wire:
    def send_bytes(self, frame: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def keyed_task(tmp_path) -> tuple[StreamTask, queue.SimpleQueue, queue.SimpleQueue]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    (
        env.from_source(CollectionSource(["a"]), WatermarkStrategy.no_watermarks(), "src")
        .key_by(lambda x: x)
        .process(KeepsALock())
        .uid("keep")
        .set_parallelism(1)
        .sink_to(PrintSink())
        .uid("sink")
        .set_parallelism(1)
    )
    graph = env.get_job_graph("async-snapshot-test")
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
    )
    sent: queue.SimpleQueue = queue.SimpleQueue()
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    partition = len(partitions) - 1
    descriptor = build_task_descriptors(graph)[partitions[partition]]
    task = StreamTask(descriptor, settings, partition, sent.put, mailbox)
    task.deploy_and_restore(DeployTask(0, {}, [], None, {}))
    assert task.gate is not None
    for channel in range(2):
        task.gate.connected(channel, _Wire())  # type: ignore[arg-type]
    return task, sent, mailbox


def checkpoint_with(task: StreamTask, records: list[str], checkpoint_id: int) -> None:
    task.handle(InputReceived(0, 0, RecordBatch(records), codec.encode_batch(records)))
    barrier = CheckpointBarrier(checkpoint_id, 0)
    for channel in range(2):
        task.handle(InputReceived(0, channel, barrier, codec.encode_event(barrier)))
    for _ in range(3):
        task._step_input()


def test_a_keyed_snapshot_is_written_by_the_uploader_and_acknowledged(tmp_path):
    task, sent, _ = keyed_task(tmp_path)
    checkpoint_with(task, ["a", "b", "a"], 1)
    message = sent.get(timeout=10)
    while not isinstance(message, AcknowledgeCheckpoint | DeclineCheckpoint):
        message = sent.get(timeout=10)
    assert isinstance(message, AcknowledgeCheckpoint) and message.checkpoint_id == 1
    assert message.state_handle is not None and message.state_bytes > 0
    task.tear_down()


def test_state_that_cannot_be_pickled_fails_the_task_naming_state_and_key(tmp_path):
    task, sent, mailbox = keyed_task(tmp_path)
    checkpoint_with(task, ["a", "lock"], 1)
    mail = mailbox.get(timeout=10)
    while not isinstance(mail, SnapshotFailed):
        mail = mailbox.get(timeout=10)
    with pytest.raises(ConfigurationError, match="the value of state 'kept' for key 'lock'"):
        task.handle(mail)  # the task's loop handles it so: the attempt fails with it
    while not sent.empty():  # and the checkpoint is neither acknowledged nor declined
        assert not isinstance(sent.get_nowait(), AcknowledgeCheckpoint | DeclineCheckpoint)
    task.tear_down()
