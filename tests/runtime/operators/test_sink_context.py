"""A sink's writer learns the job's name, the checkpoint its attempt restored and the task's
clock: from the descriptor, the DeployTask and the task through the operator context into
the SinkContext."""

from __future__ import annotations

import queue
from typing import Any

from support.clocks import ManualClock

from barrierflow import StreamExecutionEnvironment
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import Sink, SinkContext, SinkWriter
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.deployment import TaskSettings
from barrierflow.runtime.task import StreamTask

CONTEXTS: list[SinkContext] = []


class _Writer(SinkWriter):
    def write_batch(self, records: list[Any]) -> None: ...
    def pre_commit(self, checkpoint_id: int) -> None: ...
    def snapshot_state(self) -> Any: ...
    def commit(self, checkpoint_id: int) -> None: ...
    def restore(self, states: list[Any]) -> None: ...


class ContextRecordingSink(Sink):
    def create_writer(self, context: SinkContext) -> SinkWriter:
        CONTEXTS.append(context)
        return _Writer()


def deployed_sink_context(
    tmp_path, restore_checkpoint_id: int | None, clock: Clock = SYSTEM_CLOCK
) -> SinkContext:
    CONTEXTS.clear()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.from_collection([1, 2]).uid("numbers").sink_to(ContextRecordingSink()).uid("sink")
    graph = env.get_job_graph("nightly totals")
    ((subtask, descriptor),) = build_task_descriptors(graph).items()
    settings = TaskSettings(
        job_id="a-uuid",
        attempt=3,
        deployment_id="run-3",
        secret=b"secret",
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir=tmp_path.as_uri(),
        partitions=(subtask,),
    )
    task = StreamTask(descriptor, settings, 0, lambda message: None, queue.SimpleQueue(), clock)
    try:
        task.deploy_and_restore(msg.DeployTask(3, {}, [], restore_checkpoint_id, {}))
    finally:
        task.tear_down()
    (context,) = CONTEXTS
    return context


def test_a_restored_attempt_tells_its_sink_the_job_name_and_the_restored_checkpoint(tmp_path):
    context = deployed_sink_context(tmp_path, restore_checkpoint_id=7)
    assert (context.job_name, context.restored_checkpoint_id) == ("nightly totals", 7)
    assert (context.operator_uid, context.attempt, context.deployment_id) == ("sink", 3, "run-3")


def test_a_fresh_start_has_no_restored_checkpoint(tmp_path):
    context = deployed_sink_context(tmp_path, restore_checkpoint_id=None)
    assert (context.job_name, context.restored_checkpoint_id) == ("nightly totals", None)


def test_the_sink_reads_time_from_the_tasks_clock(tmp_path):
    clock = ManualClock(1_000)
    context = deployed_sink_context(tmp_path, restore_checkpoint_id=None, clock=clock)
    clock.advance(250)
    assert (context.clock.epoch_millis(), context.clock.monotonic()) == (1_250, 0.25)
