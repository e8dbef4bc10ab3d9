"""A stream task's process that dies while its Spark task lives, driven by hand: the Spark
task reports TaskProcessDied, the job rolls back in place (no Spark job cancelled or
submitted) and the restart strategy counts it; only a lost Spark task (its connection)
takes a new stage. Fake RPC, fake Spark runner, ManualClock: no Spark, no sockets."""

from __future__ import annotations

import logging

import pytest
from job_master_builder import COUNTERS, PARTITIONS, SOURCES, job_master_builder
from test_rollback import DELAY_MS, reregister_all, with_checkpoint_1

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.errors import JobExecutionError
from barrierflow.runtime import task_messages as msg

KILLED = msg.TaskProcessDied(0, COUNTERS[0], 102, "was killed by SIGKILL")


def test_a_dead_stream_task_process_rolls_back_in_place_and_counts_as_a_restart(tmp_path, caplog):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    with_checkpoint_1(job)
    with caplog.at_level(logging.WARNING, logger="barrierflow.cluster.jobmaster.job_master"):
        job.send(COUNTERS[0], KILLED)

    (line,) = [r.getMessage() for r in caplog.records if "attempt 0 failed" in r.getMessage()]
    assert "task 'Reduce -> Sink' (1/2) (pid 102 on host) died" in line, line
    assert "was killed by SIGKILL" in line and "restarting in place" in line, line
    assert "(its Spark task lives); restart 1 of 3" in line, line
    for conn in job.tasks.values():
        (end,) = conn.sent_of(msg.EndAttempt)
        assert end.attempt == 0 and "died" in end.reason
        assert not conn.closed
    job.advance(DELAY_MS)
    for conn in job.tasks.values():
        (restart,) = conn.sent_of(msg.RestartTask)
        assert restart.attempt == 1
    assert job.runner.submitted == [(job.master.spark_group(0), 0)]
    assert job.runner.cancelled == []
    reregister_all(job, attempt=1)  # the respawned process registers on the kept connection
    for partition in PARTITIONS:
        job.send(partition, msg.TaskRunning(1, partition))
    assert (job.master.status.state, job.master.status.attempt) == ("RUNNING", 1)
    (deploy,) = job.tasks[COUNTERS[0]].sent_of(msg.DeployTask)[-1:]
    assert deploy.restore_checkpoint_id == 1


def test_the_restart_strategy_gives_up_on_repeated_deaths(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(1, DELAY_MS))
    job.run_all()
    job.send(COUNTERS[0], KILLED)
    job.advance(DELAY_MS)
    reregister_all(job, attempt=1)
    job.send(COUNTERS[0], msg.TaskProcessDied(1, COUNTERS[0], 103, "exited with code 1"))
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="exited with code 1"):
        job.master.result()


def test_a_death_report_of_an_ended_attempt_is_refused_by_number(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    job.run_all()
    job.send(COUNTERS[0], KILLED)
    job.send(COUNTERS[1], msg.TaskProcessDied(0, COUNTERS[1], 103, "was killed by SIGKILL"))
    job.advance(DELAY_MS)
    reregister_all(job, attempt=1)
    for partition in PARTITIONS:
        job.send(partition, msg.TaskRunning(1, partition))
    job.send(COUNTERS[1], msg.TaskProcessDied(0, COUNTERS[1], 103, "was killed by SIGKILL"))
    assert (job.master.status.state, job.master.status.attempt) == ("RUNNING", 1)
    assert all(len(conn.sent_of(msg.EndAttempt)) == 1 for conn in job.tasks.values())


def test_a_lost_spark_task_still_takes_a_new_stage(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    with_checkpoint_1(job)
    job.lose(COUNTERS[0])  # the Spark task itself: its connection is gone
    assert job.runner.cancelled == [job.master.spark_group(0)]
    assert all(conn.sent_of(msg.EndAttempt) == [] for conn in job.tasks.values())
    job.advance(DELAY_MS)
    assert job.runner.submitted[-1] == (job.master.spark_group(1), 1)


def test_a_death_before_the_task_registered_takes_a_new_stage_and_cancels_its_spark_task(
    tmp_path,
):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    conn = job.rpc.connect()
    job.send(SOURCES[0], msg.TaskProcessDied(0, SOURCES[0], 100, "exited with code 1"), conn)
    assert job.master.status.state == "RESTARTING"
    assert conn.closed and conn.sent_of(msg.CancelTask)  # its Spark task is not left waiting
    job.advance(DELAY_MS)
    assert job.runner.submitted[-1] == (job.master.spark_group(1), 1)


def test_a_death_after_the_task_finished_is_not_a_failure(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    job.run_all()
    job.send(COUNTERS[0], msg.TaskFinished(0, COUNTERS[0]))
    job.send(COUNTERS[0], KILLED)
    assert job.master.status.state == "RUNNING"


def test_the_spark_task_of_each_subtask_is_known_for_its_kill_hook(tmp_path):
    job = job_master_builder(tmp_path)
    job.register_all()
    job.send(COUNTERS[1], msg.SparkTaskProcess(0, COUNTERS[1], "host", 4242))
    assert job.master.spark_tasks == {job.master.partitions[COUNTERS[1]]: ("host", 4242)}
