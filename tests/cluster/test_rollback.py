"""Rolling back in place, driven by hand: a failure that leaves every task process alive ends
the attempt on every task, keeps the Spark job, and restarts the same tasks under the next
attempt number; a lost process or Spark job falls back to a new stage.
Fake RPC, fake Spark runner, ManualClock: no Spark, no sockets, no sleeps."""

from __future__ import annotations

import pytest
from job_master_builder import (
    COUNTERS,
    INTERVAL_MS,
    PARTITIONS,
    SOURCES,
    JobHarness,
    failure,
    job_master_builder,
)

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.errors import ChannelLostError, JobExecutionError
from barrierflow.runtime import task_messages as msg

DELAY_MS = 500


def with_checkpoint_1(job: JobHarness) -> None:
    job.run_all()
    job.advance(INTERVAL_MS)
    for partition in PARTITIONS:
        job.send(partition, msg.AcknowledgeCheckpoint(0, partition, 1, None))


def raise_in_user_code(job: JobHarness, attempt: int = 0) -> None:
    job.send(COUNTERS[0], msg.TaskFailed(attempt, COUNTERS[0], failure(ValueError("boom"))))


def reregister_all(job: JobHarness, attempt: int) -> None:
    """Every kept task registers again on its own connection under `attempt`."""
    for partition in PARTITIONS:
        job.send(
            partition,
            msg.RegisterTask(attempt, partition, ("127.0.0.1", 8000 + partition), "host", 100),
        )


def test_an_exception_rolls_every_task_back_in_place_without_a_new_spark_job(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    with_checkpoint_1(job)
    raise_in_user_code(job)

    assert job.master.status.state == "RESTARTING"
    for conn in job.tasks.values():
        (end,) = conn.sent_of(msg.EndAttempt)
        assert (end.attempt, end.restart_delay_ms) == (0, DELAY_MS)
        assert "ValueError: boom" in end.reason
        assert not conn.closed and conn.sent_of(msg.CancelTask) == []
    job.advance(DELAY_MS - 1)
    assert all(conn.sent_of(msg.RestartTask) == [] for conn in job.tasks.values())
    job.advance(1)

    for conn in job.tasks.values():
        (restart,) = conn.sent_of(msg.RestartTask)
        assert restart.attempt == restart.settings.attempt == 1
    assert job.runner.submitted == [(job.master.spark_group(0), 0)]  # no new Spark job
    assert job.runner.cancelled == []
    assert (job.master.status.state, job.master.status.attempt) == ("DEPLOYING", 1)
    reregister_all(job, attempt=1)
    for conn in job.tasks.values():
        (deploy,) = conn.sent_of(msg.DeployTask)[-1:]
        assert (deploy.attempt, deploy.restore_checkpoint_id) == (1, 1)
        assert deploy.peers == {p: ("127.0.0.1", 8000 + p) for p in PARTITIONS}
    for partition in PARTITIONS:
        job.send(partition, msg.TaskRunning(1, partition))
    assert job.master.status.state == "RUNNING"
    job.advance(INTERVAL_MS)
    assert job.trigger_ids(SOURCES[0]) == [1, 2]  # ids go on across attempts


def test_messages_of_the_ended_attempt_are_refused_by_number(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    with_checkpoint_1(job)
    raise_in_user_code(job)
    lost_peer = failure(ChannelLostError("lost the input channel"))
    job.send(SOURCES[0], msg.TaskFailed(0, SOURCES[0], lost_peer))  # during the delay
    job.advance(DELAY_MS)
    reregister_all(job, attempt=1)
    for partition in PARTITIONS:
        job.send(partition, msg.TaskRunning(1, partition))
    # zombies of attempt 0 on the same connections: a late failure, an acknowledgement
    job.send(SOURCES[1], msg.TaskFailed(0, SOURCES[1], failure(ValueError("late"))))
    job.send(COUNTERS[1], msg.AcknowledgeCheckpoint(0, COUNTERS[1], 1, None))
    assert (job.master.status.state, job.master.status.attempt) == ("RUNNING", 1)
    assert not any(conn.closed for conn in job.tasks.values())
    assert len(job.runner.submitted) == 1


def test_the_restart_strategy_counts_in_place_restarts_and_gives_up(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(1, DELAY_MS))
    job.run_all()
    raise_in_user_code(job)
    job.advance(DELAY_MS)
    reregister_all(job, attempt=1)
    raise_in_user_code(job, attempt=1)
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="gave up after 1 restart"):
        job.master.result()
    # the one stage, cancelled at the end
    assert job.runner.cancelled == [job.master.spark_group(0)]
    assert all(conn.closed and conn.sent_of(msg.CancelTask) for conn in job.tasks.values())


def test_a_cancel_during_the_delay_of_a_roll_back_ends_the_job_at_once(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 60_000))
    job.run_all()
    raise_in_user_code(job)
    job.master.request_cancel("stop it")
    job.master.drain()  # no clock advance: the delay is not waited for
    assert job.master.ended and job.master.status.state == "CANCELED"
    assert job.runner.cancelled == [job.master.spark_group(0)]
    for conn in job.tasks.values():
        assert conn.closed and conn.sent_of(msg.CancelTask)
    job.advance(60_000)
    assert all(conn.sent_of(msg.RestartTask) == [] for conn in job.tasks.values())


def test_a_process_death_during_the_roll_back_falls_back_to_a_new_stage(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    with_checkpoint_1(job)
    raise_in_user_code(job)
    job.lose(SOURCES[1])
    # the kept tasks and their Spark job go at once, freeing the slots
    assert job.runner.cancelled == [job.master.spark_group(0)]
    assert all(conn.closed for conn in job.tasks.values())
    job.advance(DELAY_MS)
    assert job.runner.submitted[-1] == (job.master.spark_group(1), 1)
    assert all(conn.sent_of(msg.RestartTask) == [] for conn in job.tasks.values())
    job.end_spark_job(0, "cancelled")  # the old stage's end is not the new attempt's
    job.run_all(attempt=1)
    assert (job.master.status.state, job.master.status.attempt) == ("RUNNING", 1)
    (deploy,) = job.tasks[COUNTERS[0]].sent_of(msg.DeployTask)
    assert deploy.restore_checkpoint_id == 1


def test_the_spark_job_ending_during_the_roll_back_falls_back_to_a_new_stage(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    job.run_all()
    raise_in_user_code(job)
    job.end_spark_job(0, "an executor was lost")
    job.advance(DELAY_MS)
    assert job.runner.submitted[-1] == (job.master.spark_group(1), 1)


def test_a_process_lost_before_it_registers_again_fails_the_attempt_at_once(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    job.run_all()
    raise_in_user_code(job)
    job.advance(DELAY_MS)
    job.lose(COUNTERS[1])  # attempt 1 knows its kept connections before they register
    assert job.master.status.state == "RESTARTING"
    assert job.runner.cancelled == [job.master.spark_group(0)]
    job.advance(DELAY_MS)
    assert job.runner.submitted[-1] == (job.master.spark_group(2), 2)


def test_a_failure_before_every_task_registered_restarts_in_a_new_stage(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    conn = job.rpc.connect()
    job.tasks[0] = conn
    job.send(0, msg.RegisterTask(0, 0, ("127.0.0.1", 1), "host", 1))
    job.send(0, msg.TaskFailed(0, 0, failure(ValueError("bad source"))))
    assert conn.closed and conn.sent_of(msg.EndAttempt) == []
    job.advance(DELAY_MS)
    assert job.runner.submitted[-1] == (job.master.spark_group(1), 1)


def test_the_job_finishes_in_the_stage_that_rolled_back(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    job.run_all()
    raise_in_user_code(job)
    job.advance(DELAY_MS)
    reregister_all(job, attempt=1)
    for partition in PARTITIONS:
        job.send(partition, msg.TaskRunning(1, partition))
    for partition in PARTITIONS:
        job.send(partition, msg.TaskFinished(1, partition))
    job.end_spark_job(0)  # the stage submitted for attempt 0 ran attempt 1 too
    assert job.master.ended and job.master.status.state == "FINISHED"
