"""The restart loop driven by hand: restart after the delay, cancel, giving up, and the
crash path (an unexpected error fails the job and leaves no task running).
Fake RPC, fake Spark runner, ManualClock: no Spark, no sockets, no sleeps."""

from __future__ import annotations

import pytest
from job_master_builder import (
    COUNTERS,
    INTERVAL_MS,
    PARTITIONS,
    JobHarness,
    failure,
    job_master_builder,
)

from barrierflow.api.environment import JobClient
from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.mails import TaskMessageReceived
from barrierflow.errors import JobExecutionError
from barrierflow.runtime import task_messages as msg


def fail_attempt(job: JobHarness, attempt: int = 0) -> None:
    job.send(COUNTERS[0], msg.TaskFailed(attempt, COUNTERS[0], failure(ValueError("boom"))))


def test_an_attempt_whose_process_died_restarts_as_a_new_stage_after_the_delay(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 500))
    job.run_all()
    job.advance(INTERVAL_MS)
    for partition in PARTITIONS:
        job.send(partition, msg.AcknowledgeCheckpoint(0, partition, 1, None))
    first_tasks = dict(job.tasks)
    job.lose(COUNTERS[0])  # a task process died: the Spark job goes, a new stage follows
    assert job.master.status.state == "RESTARTING"
    assert job.runner.cancelled == [job.master.spark_group(0)]
    for conn in first_tasks.values():
        assert conn.closed
        assert conn.sent_of(msg.CancelTask) == [msg.CancelTask(0, conn.sent[-1].reason)]
    job.advance(499)
    assert job.runner.submitted == [(job.master.spark_group(0), 0)]
    job.advance(1)
    assert job.runner.submitted[-1] == (job.master.spark_group(1), 1)
    assert (job.master.status.state, job.master.status.attempt) == ("DEPLOYING", 1)
    assert job.master.status.restored_from == 1
    job.run_all(attempt=1)
    (deploy,) = job.tasks[COUNTERS[0]].sent_of(msg.DeployTask)
    assert (deploy.attempt, deploy.restore_checkpoint_id) == (1, 1)
    job.advance(INTERVAL_MS)
    assert job.trigger_ids(0) == [2]  # ids go on across attempts


def test_a_cancel_during_the_restart_delay_ends_the_job_at_once(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 60_000))
    job.run_all()
    fail_attempt(job)
    assert job.master.status.state == "RESTARTING"
    job.master.request_cancel("stop it")
    job.master.drain()  # no clock advance: the delay is not waited for
    assert job.master.ended and job.master.status.state == "CANCELED"
    with pytest.raises(JobExecutionError, match="cancelled: stop it"):
        job.master.result()
    job.advance(60_000)
    assert len(job.runner.submitted) == 1  # the restart never happens
    assert job.rpc.closed


def test_a_cancel_while_running_cancels_the_tasks_and_the_spark_job(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.master.request_cancel()
    job.master.drain()
    assert job.master.status.state == "CANCELED"
    assert job.runner.cancelled == [job.master.spark_group(0)]
    assert all(conn.closed for conn in job.tasks.values())


def test_without_restarts_the_first_failure_fails_the_job(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    fail_attempt(job)
    assert job.master.ended and job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="will not restart") as raised:
        job.master.result()
    assert type(raised.value.__cause__) is ValueError
    assert job.runner.cancelled == [job.master.spark_group(0)]
    assert job.rpc.closed and all(conn.closed for conn in job.rpc.connections)


def test_the_restart_strategy_gives_up_after_its_attempts(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(1, 100))
    job.run_all()
    fail_attempt(job)
    job.advance(100)
    job.run_all(attempt=1)
    fail_attempt(job, attempt=1)
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="gave up after 1 restart"):
        job.master.result()


# ---- the crash path (issue 9, defect 1) -------------------------------------------------------


def assert_crashed(job: JobHarness, cause_type: type) -> None:
    """FAILED, the error chained, the Spark job cancelled, every connection closed."""
    assert job.master.ended
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError) as raised:
        job.master.result()
    assert type(raised.value.__cause__) is cause_type
    assert job.runner.cancelled == [job.master.spark_group(0)]
    assert job.rpc.closed
    assert all(conn.closed for conn in job.rpc.connections)
    assert all(conn.sent_of(msg.CancelTask) for conn in job.tasks.values())


def test_an_error_in_message_handling_fails_the_job_and_stops_every_task(tmp_path, monkeypatch):
    job = job_master_builder(tmp_path)
    job.run_all()

    def broken(partition, message):
        raise KeyError("a bug in message handling")

    monkeypatch.setitem(job.master.attempt._handlers, msg.EndOfInput, broken)
    job.send(0, msg.EndOfInput(0, 0))
    assert_crashed(job, KeyError)


def test_an_error_of_the_statistics_tracker_fails_the_job(tmp_path, monkeypatch):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.advance(INTERVAL_MS)

    def broken(*args, **kwargs):
        raise ValueError("the tracker is confused")

    monkeypatch.setattr(job.master.stats_tracker, "report_acknowledged", broken)
    job.send(0, msg.AcknowledgeCheckpoint(0, 0, 1, None))
    assert_crashed(job, ValueError)
    with pytest.raises(JobExecutionError, match="ValueError: the tracker is confused"):
        job.master.result()


def test_an_unexpected_error_reaches_the_job_client_as_a_job_execution_error(tmp_path, monkeypatch):
    job = JobHarness(tmp_path, RestartStrategies.no_restart())
    client = JobClient(job.master, None)  # runs the JobMaster on its own thread
    assert job.master.wait_for(lambda s: s.state == "DEPLOYING", timeout=30)
    conn = job.rpc.connect()
    job.master.mailbox.put(TaskMessageReceived(conn, msg.RegisterTask(0, 99, ("h", 1), "h", 1)))
    with pytest.raises(JobExecutionError, match="unexpected") as raised:
        client.wait(timeout=30)
    assert isinstance(raised.value.__cause__, IndexError)
    assert client.get_job_status() == "FAILED"
    assert conn.closed and job.runner.cancelled == [job.master.spark_group(0)]


def test_a_mail_of_unknown_type_is_an_error_that_fails_the_job(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.post(("task_message", job.tasks[0], msg.TaskRunning(0, 0)))  # the old tuple mails
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="mail of unknown type") as raised:
        job.master.result()
    assert isinstance(raised.value.__cause__, TypeError)
