"""`barrierflow chaos` asks the JobMaster to make a task fail: the request reaches the task of
the attempt it was aimed at, and is dropped once that attempt is no longer current."""

from __future__ import annotations

from job_master_builder import PARTITIONS, failure, job_master_builder

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.mails import FailureInjectionRequested
from barrierflow.errors import ChaosFailure
from barrierflow.runtime import task_messages as msg


def test_a_requested_failure_reaches_the_task_of_the_current_attempt(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    target = job.master.partitions[PARTITIONS[-1]]

    job.post(FailureInjectionRequested(0, target, "injected"))

    assert job.tasks[PARTITIONS[-1]].sent_of(msg.InjectFailure) == [
        msg.InjectFailure(0, "injected")
    ]
    for partition in PARTITIONS[:-1]:
        assert job.tasks[partition].sent_of(msg.InjectFailure) == []


def test_a_failure_aimed_at_an_ended_attempt_is_dropped(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 0))
    job.run_all()
    job.send(0, msg.TaskFailed(0, 0, failure(ChaosFailure("first"))))  # attempt 0 rolls back
    job.advance(1)
    job.run_all(attempt=1)
    target = job.master.partitions[0]

    job.post(FailureInjectionRequested(0, target, "too late"))

    assert job.master.status.attempt == 1
    assert job.tasks[0].sent_of(msg.InjectFailure) == []
