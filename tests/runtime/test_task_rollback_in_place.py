"""What a Spark task runs (`task_entry.run_attempts`), rolled back in place: a user function
raises once; the tasks keep their processes and RPC connections, get EndAttempt and
RestartTask, run attempt 1 from checkpoint 1, and commit every result exactly once. Two
StreamTasks in threads over loopback sockets and a fake JobMaster; no Spark."""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Any

from test_task_restart_in_place import (
    COMMITTED,
    GATE,
    VALUES,
    CommittingSink,
    FakeJobMaster,
    GatedSource,
)

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy, _fs
from barrierflow.checkpoint.metadata import build_metadata, restore_assignment
from barrierflow.cluster.task_entry import run_attempts
from barrierflow.core.functions import MapFunction, RuntimeContext
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.attempt_outcome import AttemptEnd
from barrierflow.runtime.task import StreamTask, TaskSettings


class RaiseOnceIn0(MapFunction):
    """Raises on 15 in attempt 0 only."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value: int) -> int:
        if self.attempt == 0 and value == 15:
            raise ValueError("fails once")
        return value


def test_a_user_function_that_raises_once_rolls_back_in_place_exactly_once(tmp_path):
    GATE.clear()
    COMMITTED.clear()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    (
        env.from_source(GatedSource(), WatermarkStrategy.no_watermarks(), "numbers")
        .uid("numbers")
        .map(RaiseOnceIn0())
        .uid("raise")
        .key_by(lambda x: "all")
        .reduce(lambda a, b: a + b)
        .uid("sum")
        .sink_to(CommittingSink())
        .uid("sink")
    )
    graph = env.get_job_graph("roll-back")
    partitions = tuple(graph.all_subtasks())
    descriptors = build_task_descriptors(graph)
    folder = _fs.location(str(tmp_path))
    settings = TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d0",
        secret=b"secret",
        jobmaster_address=("127.0.0.1", 1),
        bind_host="127.0.0.1",
        checkpoint_dir=folder.uri,
        partitions=partitions,
        buffer_timeout_ms=5,
        connect_timeout_s=20,
    )
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    tasks = [
        StreamTask(descriptors[subtask], settings, p, inbox.put, queue.SimpleQueue())
        for p, subtask in enumerate(partitions)
    ]
    jm = FakeJobMaster(tasks, inbox)
    source = next(p for p, s in enumerate(partitions) if graph.vertex(s.vertex_id).is_source)
    splits = {source: GatedSource().create_splits()}
    ends: dict[int, AttemptEnd] = {}

    def run(task: StreamTask) -> None:
        ends[task.partition] = run_attempts(task)

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in tasks]
    for thread in threads:
        thread.start()

    def deploy(attempt: int, restore_from: tuple[int, dict[str, Any]] | None) -> None:
        registered = jm.expect(msg.RegisterTask, attempt, len(tasks))
        peers = {r.partition: r.data_address for r in registered}
        for p, subtask in enumerate(partitions):
            restore, checkpoint_id = {}, None
            if restore_from is not None:
                checkpoint_id, metadata = restore_from
                chk = folder.child(f"chk-{checkpoint_id}")
                restore = restore_assignment(graph, metadata, chk, subtask)
            jm.tell(p, msg.DeployTask(attempt, peers, splits.get(p, []), checkpoint_id, restore))
        jm.expect(msg.TaskRunning, attempt, len(tasks))

    def checkpoint(attempt: int, checkpoint_id: int, is_final: bool) -> dict[str, Any]:
        jm.tell(source, msg.TriggerCheckpoint(attempt, checkpoint_id, 0, is_final))
        acks = jm.expect(msg.AcknowledgeCheckpoint, attempt, len(tasks))
        handles = {partitions[a.partition]: a.state_handle for a in acks}
        metadata = build_metadata(graph, checkpoint_id, 0, is_final, handles)
        for p in range(len(tasks)):
            jm.tell(p, msg.NotifyCheckpointComplete(attempt, checkpoint_id, is_final))
        return metadata

    # ---- attempt 0: checkpoint 1 after 10 values, then the map raises on 15 ----
    deploy(0, None)
    metadata = checkpoint(0, 1, is_final=False)
    GATE.set()
    failed = inbox.get(timeout=20)
    while not isinstance(failed, msg.TaskFailed):
        failed = inbox.get(timeout=20)
    assert (failed.attempt, failed.partition) == (0, source)
    assert "fails once" in failed.failure.message
    for p in range(len(tasks)):
        jm.tell(p, msg.EndAttempt(0, "rolling back", 0))

    # ---- attempt 1 in the same processes, over the same connections ----
    attempt_1 = dataclasses.replace(settings, attempt=1, deployment_id="d1")
    for p in range(len(tasks)):
        jm.tell(p, msg.RestartTask(1, attempt_1))
    deploy(1, (1, metadata))
    jm.expect(msg.EndOfInput, 1, 1)
    checkpoint(1, 2, is_final=True)
    jm.expect(msg.TaskFinished, 1, len(tasks))
    for thread in threads:
        thread.join(20)
        assert not thread.is_alive()
    assert ends == {p: AttemptEnd.FINISHED for p in range(len(tasks))}
    sums = [sum(VALUES[: i + 1]) for i in range(len(VALUES))]
    assert {1: sums[:10], 2: sums[10:]} == COMMITTED


def test_a_task_waiting_for_its_next_attempt_ends_on_cancel(tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.from_collection([1, 2, 3]).uid("numbers").sink_to(CommittingSink()).uid("sink")
    graph = env.get_job_graph("cancel-while-waiting")
    (subtask,) = graph.all_subtasks()
    settings = TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d0",
        secret=b"secret",
        jobmaster_address=("127.0.0.1", 1),
        bind_host="127.0.0.1",
        checkpoint_dir=_fs.location(str(tmp_path)).uri,
        partitions=(subtask,),
        connect_timeout_s=20,
    )
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    task = StreamTask(build_task_descriptors(graph)[subtask], settings, 0, inbox.put, queue.Queue())
    jm = FakeJobMaster([task], inbox)
    jm.tell(0, msg.EndAttempt(0, "rolling back", 60_000))  # before it even registered
    jm.tell(0, msg.CancelTask(0, "the job failed"))
    assert run_attempts(task) is AttemptEnd.ENDED  # ended the attempt, then the process
    assert isinstance(inbox.get(timeout=5), msg.RegisterTask)
