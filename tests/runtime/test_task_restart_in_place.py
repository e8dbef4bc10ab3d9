"""Rolling a running job back in place: two StreamTasks in threads over loopback sockets and a
fake JobMaster run attempt 0, take checkpoint 1, are torn down, and run attempt 1 from it in
the same process (no new tasks, no Spark)."""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Sequence
from typing import Any

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy, _fs
from barrierflow.checkpoint.metadata import build_metadata, restore_assignment
from barrierflow.connectors.base import (
    Sink,
    SinkContext,
    SinkWriter,
    Source,
    SourceReader,
    SourceSplit,
)
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.mails import RpcReceived
from barrierflow.runtime.task import StreamTask, TaskSettings

GATE = threading.Event()
"""Opens the source's second half (attempt 1)."""
COMMITTED: dict[int, list[Any]] = {}
"""What the sink committed, by checkpoint id (commits are idempotent)."""
VALUES = list(range(1, 21))


class _GatedReader(SourceReader):
    def __init__(self, has_split: bool) -> None:
        self._has_split = has_split
        self._position = 0

    def restore(self, positions: dict[str, Any]) -> None:
        self._position = int(positions.get("values", 0))

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if not self._has_split or self._position >= len(VALUES):
            return None
        end = min(self._position + 3, len(VALUES) if GATE.is_set() else 10)
        batch = VALUES[self._position : end]
        self._position += len(batch)
        return batch

    def snapshot(self) -> dict[str, Any]:
        return {"values": self._position} if self._has_split else {}


class GatedSource(Source):
    """1..20 in order; holds back everything after 10 until GATE opens."""

    bounded = True

    def create_splits(self) -> list[SourceSplit]:
        return [SourceSplit("values")]

    def create_reader(self, splits: Sequence[SourceSplit]) -> SourceReader:
        return _GatedReader(bool(splits))


class _CommittingWriter(SinkWriter):
    def __init__(self) -> None:
        self.open: list[Any] = []
        self.pending: dict[int, list[Any]] = {}

    def write_batch(self, records: list[Any]) -> None:
        self.open.extend(records)

    def pre_commit(self, checkpoint_id: int) -> None:
        self.pending[checkpoint_id], self.open = self.open, []

    def snapshot_state(self) -> Any:
        return [[n, values] for n, values in sorted(self.pending.items())]

    def commit(self, checkpoint_id: int) -> None:
        for n in [n for n in self.pending if n <= checkpoint_id]:
            COMMITTED[n] = self.pending.pop(n)

    def restore(self, states: list[Any]) -> None:
        for state in states:
            for n, values in state:
                COMMITTED[n] = list(values)


class CommittingSink(Sink):
    def create_writer(self, context: SinkContext) -> SinkWriter:
        return _CommittingWriter()


class FakeJobMaster:
    """Plays the JobMaster's side of the protocol for one attempt at a time, for the tasks
    of `graph` (parallelism 1 everywhere) with their checkpoints under `tmp_path`."""

    def __init__(self, graph: Any, tmp_path: Any, **settings: Any) -> None:
        self.graph = graph
        self.partitions = tuple(graph.all_subtasks())
        self.folder = _fs.location(str(tmp_path))
        self.settings = TaskSettings(
            job_id="job",
            attempt=0,
            deployment_id="d0",
            secret=b"secret",
            jobmaster_address=("127.0.0.1", 1),
            task_bind_address="127.0.0.1",
            checkpoint_dir=self.folder.uri,
            partitions=self.partitions,
            buffer_timeout_ms=5,
            **settings,
        )
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        descriptors = build_task_descriptors(graph)
        self.tasks = [
            StreamTask(descriptors[subtask], self.settings, p, self.inbox.put, queue.SimpleQueue())
            for p, subtask in enumerate(self.partitions)
        ]
        self.source = next(
            p for p, s in enumerate(self.partitions) if graph.vertex(s.vertex_id).is_source
        )
        self.splits = {self.source: GatedSource().create_splits()}

    def tell(self, partition: int, message: Any) -> None:
        self.tasks[partition].mailbox.put(RpcReceived(message))

    def expect(self, kind: type, attempt: int, count: int) -> list[Any]:
        got: list[Any] = []
        while len(got) < count:
            message = self.inbox.get(timeout=20)
            if isinstance(message, msg.TaskFailed) and message.attempt == attempt:
                raise AssertionError(message.failure.traceback)
            if isinstance(message, kind) and message.attempt == attempt:
                got.append(message)
        return got

    def deploy(self, attempt: int, restore_from: tuple[int, dict[str, Any]] | None) -> None:
        """Wait for every task to register under `attempt`, deploy it, wait until running."""
        registered = self.expect(msg.RegisterTask, attempt, len(self.tasks))
        peers = {r.partition: r.data_address for r in registered}
        for p, subtask in enumerate(self.partitions):
            restore, checkpoint_id = {}, None
            if restore_from is not None:
                checkpoint_id, metadata = restore_from
                chk = self.folder.child(f"chk-{checkpoint_id}")
                restore = restore_assignment(self.graph, metadata, chk, subtask)
            splits = self.splits.get(p, [])
            self.tell(p, msg.DeployTask(attempt, peers, splits, checkpoint_id, restore))
        self.expect(msg.TaskRunning, attempt, len(self.tasks))

    def checkpoint(self, attempt: int, checkpoint_id: int, is_final: bool) -> dict[str, Any]:
        """Trigger a checkpoint at the source, collect every ack, notify its completion."""
        self.tell(self.source, msg.TriggerCheckpoint(attempt, checkpoint_id, 0, is_final))
        acks = self.expect(msg.AcknowledgeCheckpoint, attempt, len(self.tasks))
        handles = {self.partitions[a.partition]: a.state_handle for a in acks}
        metadata = build_metadata(self.graph, checkpoint_id, 0, is_final, handles)
        for p in range(len(self.tasks)):
            self.tell(p, msg.NotifyCheckpointComplete(attempt, checkpoint_id, is_final))
        return metadata


def run_in_threads(tasks: list[StreamTask]) -> list[threading.Thread]:
    threads = [threading.Thread(target=t.run, daemon=True) for t in tasks]
    for thread in threads:
        thread.start()
    return threads


def test_a_task_rolls_back_to_a_checkpoint_and_runs_the_next_attempt_in_the_same_process(
    tmp_path,
):
    GATE.clear()
    COMMITTED.clear()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    (
        env.from_source(GatedSource(), WatermarkStrategy.no_watermarks(), "numbers")
        .uid("numbers")
        .key_by(lambda x: "all")
        .reduce(lambda a, b: a + b)
        .uid("sum")
        .sink_to(CommittingSink())
        .uid("sink")
    )
    jm = FakeJobMaster(env.get_job_graph("restart"), tmp_path)
    tasks, deploy, checkpoint = jm.tasks, jm.deploy, jm.checkpoint

    # ---- attempt 0: the first half, checkpoint 1, then a roll-back ----
    threads = run_in_threads(tasks)
    deploy(0, None)
    metadata = checkpoint(0, 1, is_final=False)
    for p in range(len(tasks)):
        jm.tell(p, msg.CancelTask(0, "roll back to checkpoint 1"))
    for thread in threads:
        thread.join(20)
        assert not thread.is_alive()
    sums = [sum(VALUES[: i + 1]) for i in range(len(VALUES))]
    assert {1: sums[:10]} == COMMITTED

    # ---- attempt 1: the same task objects, restored from checkpoint 1 ----
    attempt_1 = dataclasses.replace(jm.settings, attempt=1, deployment_id="d1")
    for task in tasks:
        task.restart(attempt_1)
    GATE.set()
    threads = run_in_threads(tasks)
    deploy(1, (1, metadata))
    jm.expect(msg.EndOfInput, 1, 1)
    checkpoint(1, 2, is_final=True)
    jm.expect(msg.TaskFinished, 1, len(tasks))
    for thread in threads:
        thread.join(20)
        assert not thread.is_alive()
    # the source resumed at 11 and the sum at 55: every running sum committed exactly once
    assert {1: sums[:10], 2: sums[10:]} == COMMITTED
