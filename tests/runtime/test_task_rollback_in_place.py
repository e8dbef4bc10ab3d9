"""What a Spark task runs (`task_entry.run_attempts`), rolled back in place: a user function
raises once; the tasks keep their processes and RPC connections, get EndAttempt and
RestartTask, run attempt 1 from checkpoint 1, and commit every result exactly once. Two
StreamTasks in threads over loopback sockets and a fake JobMaster; no Spark."""

from __future__ import annotations

import dataclasses
import threading

from test_task_restart_in_place import (
    COMMITTED,
    GATE,
    VALUES,
    CommittingSink,
    FakeJobMaster,
    GatedSource,
)

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.executor.task_entry import run_attempts
from barrierflow.core.functions import MapFunction, RuntimeContext
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.attempt_outcome import AttemptEnd
from barrierflow.runtime.task import StreamTask


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
    jm = FakeJobMaster(env.get_job_graph("roll-back"), tmp_path, connect_timeout_s=20)
    tasks, inbox, source = jm.tasks, jm.inbox, jm.source
    ends: dict[int, AttemptEnd] = {}

    def run(task: StreamTask) -> None:
        ends[task.partition] = run_attempts(task)

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in tasks]
    for thread in threads:
        thread.start()

    deploy, checkpoint = jm.deploy, jm.checkpoint

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
    attempt_1 = dataclasses.replace(jm.settings, attempt=1, deployment_id="d1")
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
    jm = FakeJobMaster(env.get_job_graph("cancel-while-waiting"), tmp_path, connect_timeout_s=20)
    (task,), inbox = jm.tasks, jm.inbox
    jm.tell(0, msg.EndAttempt(0, "rolling back", 60_000))  # before it even registered
    jm.tell(0, msg.CancelTask(0, "the job failed"))
    assert run_attempts(task) is AttemptEnd.ENDED  # ended the attempt, then the process
    assert isinstance(inbox.get(timeout=5), msg.RegisterTask)
