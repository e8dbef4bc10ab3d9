"""One attempt driven by hand: registration, deployment, checkpoints, refused messages,
and the root cause of its failure. Fake RPC, fake Spark runner, ManualClock."""

from __future__ import annotations

import pytest
from job_master_builder import (
    COUNTERS,
    INTERVAL_MS,
    PARTITIONS,
    SOURCES,
    failure,
    job_master_builder,
)
from metrics_reports import report

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster.attempt import (
    LOST_PEER_GRACE_MS,
    REGISTRATION_TIMEOUT_MS,
    SPARK_END_GRACE_MS,
)
from barrierflow.errors import ChannelLostError, JobExecutionError, RemoteTaskError
from barrierflow.runtime import task_messages as msg


def test_tasks_are_deployed_only_after_every_task_registered(tmp_path):
    job = job_master_builder(tmp_path)
    assert job.runner.submitted == [(job.master.spark_group(0), 0)]
    assert job.master.status.state == "DEPLOYING"
    job.register_all()
    deployed = {p: job.tasks[p].sent_of(msg.DeployTask) for p in PARTITIONS}
    assert all(len(d) == 1 for d in deployed.values())
    (deploy,) = deployed[COUNTERS[0]]
    assert deploy.attempt == 0
    assert deploy.peers == {p: ("127.0.0.1", 7000 + p) for p in PARTITIONS}
    assert deploy.restore_checkpoint_id is None
    assert job.master.status.processes[job.master.partitions[2]] == ("host", 102)


def test_no_task_is_deployed_while_one_has_not_registered(tmp_path):
    job = job_master_builder(tmp_path)
    for partition in PARTITIONS[:-1]:
        conn = job.rpc.connect()
        job.tasks[partition] = conn
        job.send(partition, msg.RegisterTask(0, partition, ("127.0.0.1", 1), "host", 1))
    assert all(conn.sent == [] for conn in job.tasks.values())


def test_a_checkpoint_is_triggered_acknowledged_and_completed(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    assert job.master.status.state == "RUNNING"
    assert job.trigger_ids(SOURCES[0]) == []
    job.advance(INTERVAL_MS)
    assert job.trigger_ids(SOURCES[0]) == job.trigger_ids(SOURCES[1]) == [1]
    assert job.tasks[COUNTERS[0]].sent_of(msg.TriggerCheckpoint) == []  # sources only
    for partition in PARTITIONS:
        job.send(partition, msg.AcknowledgeCheckpoint(0, partition, 1, None))
    assert job.master.status.completed_checkpoints == (1,)
    for partition in PARTITIONS:
        (notify,) = job.tasks[partition].sent_of(msg.NotifyCheckpointComplete)
        assert notify == msg.NotifyCheckpointComplete(0, 1, False)
    assert [s.checkpoint_id for s in job.master.checkpoint_stats] == [1]
    assert job.master.storage.latest_completed()[0] == 1


def test_the_job_finishes_when_its_spark_job_ends_after_every_task_finished(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    for partition in PARTITIONS:
        job.send(partition, msg.TaskFinished(0, partition))
    job.end_spark_job(0)
    assert job.master.ended and job.master.status.state == "FINISHED"
    assert job.master.result() == []


def test_a_finished_jobs_metrics_view_holds_every_tasks_last_report(tmp_path):
    # The tasks' last reports come within the store's publish interval of earlier ones; the
    # view a finished job leaves must still be those last reports (nexmark run reads it).
    job = job_master_builder(tmp_path)
    job.run_all()
    for partition in PARTITIONS:
        job.send(partition, report(1_000, partition=partition, records_in=10))
    for partition in PARTITIONS:
        job.send(partition, report(1_050, partition=partition, records_in=25))
        job.send(partition, msg.TaskFinished(0, partition))
    job.end_spark_job(0)
    assert job.master.status.state == "FINISHED"
    assert [s.records_in for s in job.master.metrics.snapshot.subtasks] == [25] * len(PARTITIONS)


def test_a_finished_message_still_on_its_way_when_the_spark_job_ends_finishes_the_job(tmp_path):
    # Regression (issue 10): the Spark job's end can reach the JobMaster before the RPC reader
    # posts the last TaskFinished; the attempt failed with "ended before every task finished".
    job = job_master_builder(tmp_path)
    job.run_all()
    late = PARTITIONS[-1]
    for partition in PARTITIONS[:-1]:
        job.send(partition, msg.TaskFinished(0, partition))
    job.end_spark_job(0)
    assert not job.master.ended and job.master.status.state == "RUNNING"
    job.send(late, msg.TaskFinished(0, late))
    assert job.master.ended and job.master.status.state == "FINISHED"
    assert job.master.result() == []


def test_a_task_that_never_says_finished_after_the_spark_job_ended_fails_the_attempt(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    for partition in PARTITIONS[:-1]:
        job.send(partition, msg.TaskFinished(0, partition))
    job.end_spark_job(0)
    job.lose(PARTITIONS[-1])  # its connection closed without a TaskFinished before it
    assert job.master.ended and job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="died"):
        job.master.result()


def test_a_spark_job_that_ended_waits_for_the_last_task_messages_only_so_long(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    job.end_spark_job(0)
    job.advance(SPARK_END_GRACE_MS - 1)
    assert not job.master.ended
    job.advance(1)
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="ended before every task finished"):
        job.master.result()


def test_a_message_of_an_older_attempt_is_refused(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.lose(COUNTERS[0])  # a process died: the next attempt is a new Spark job
    job.advance(500)  # the restart delay
    assert job.master.attempt.number == 1
    zombie = job.rpc.connect()
    job.send(0, msg.RegisterTask(0, 0, ("127.0.0.1", 1), "host", 1), zombie)
    assert zombie.closed and zombie.sent == []
    assert job.master.attempt.addresses == {}
    job.send(0, msg.TaskFailed(0, 0, failure(ValueError("late"))), zombie)
    job.end_spark_job(0, "the old Spark job was cancelled")
    assert job.master.status.state == "DEPLOYING" and job.master.attempt.number == 1


def test_a_message_from_a_connection_that_did_not_register_its_partition_is_refused(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    stranger = job.rpc.connect()
    job.send(2, msg.TaskFailed(0, 2, failure(ValueError("not me"))), stranger)
    assert job.master.status.state == "RUNNING"


def test_an_unknown_message_type_is_an_error_that_fails_the_job(tmp_path):
    # Regression (issue 9): the JobMaster silently dropped a message it did not know.
    job = job_master_builder(tmp_path)
    job.run_all()
    job.send(0, ("hello", 0))
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="unknown type") as raised:
        job.master.result()
    assert isinstance(raised.value.__cause__, TypeError)


def test_a_task_failure_shows_the_original_type_and_message_with_the_remote_traceback(tmp_path):
    # Regression (issue 9, defect 5): the cause was a traceback string chained `from None`.
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    job.send(1, msg.TaskFailed(0, 1, failure(ZeroDivisionError("division by zero"), "Map")))
    with pytest.raises(JobExecutionError) as raised:
        job.master.result()
    error = raised.value
    assert str(error).startswith(
        "ZeroDivisionError: division by zero (task 'Collection -> Map' (2/2))"
    )
    assert type(error.__cause__) is ZeroDivisionError
    assert str(error.__cause__) == "division by zero"
    (note,) = error.__cause__.__notes__
    assert "Traceback (most recent call last)" in note and "in Map" in note


def test_an_exception_the_driver_cannot_rebuild_becomes_a_remote_task_error(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    unpicklable = msg.TaskFailure("mylib.Oops", "it broke", "Traceback ...", "Map", False, b"junk")
    job.send(0, msg.TaskFailed(0, 0, unpicklable))
    with pytest.raises(JobExecutionError, match=r"^Oops: it broke \(task") as raised:
        job.master.result()
    assert isinstance(raised.value.__cause__, RemoteTaskError)
    assert "Oops: it broke" in str(raised.value.__cause__)


def test_a_lost_peer_waits_for_the_dead_tasks_lost_connection_and_names_it(tmp_path, caplog):
    # Regression (issue 9, defect 5): the survivor's lost channel was reported as the cause.
    job = job_master_builder(tmp_path)
    job.run_all()
    lost = failure(ChannelLostError("lost the channel from 'Reduce -> Sink' (1/2)"), "Map")
    assert lost.lost_peer
    job.send(1, msg.TaskFailed(0, 1, lost))
    assert job.master.status.state == "RUNNING"  # waiting for the primary cause
    job.advance(LOST_PEER_GRACE_MS // 3)
    job.lose(1)  # the survivor ends after reporting: not a cause
    assert job.master.status.state == "RUNNING"
    job.lose(COUNTERS[0])
    assert job.master.status.state == "RESTARTING"
    (line,) = [r.getMessage() for r in caplog.records if "attempt 0 failed" in r.getMessage()]
    assert "attempt 0 failed: task 'Reduce -> Sink' (1/2) (pid 102 on host) died" in line
    assert "\n" not in line


def test_a_lost_peer_prefers_another_tasks_own_failure(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    job.send(1, msg.TaskFailed(0, 1, failure(ChannelLostError("lost a channel"), "Map")))
    job.send(2, msg.TaskFailed(0, 2, failure(KeyError("user"), "Reduce")))
    with pytest.raises(JobExecutionError, match=r"^KeyError: 'user' \(task 'Reduce -> Sink'"):
        job.master.result()


def test_a_lost_peer_without_a_primary_cause_is_reported_after_the_grace_period(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    job.send(1, msg.TaskFailed(0, 1, failure(ChannelLostError("lost a channel"), "Map")))
    job.advance(LOST_PEER_GRACE_MS - 1)
    assert job.master.status.state == "RUNNING"
    job.advance(1)
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match=r"^ChannelLostError: lost a channel") as raised:
        job.master.result()
    assert isinstance(raised.value.__cause__, ChannelLostError)


def test_tasks_that_do_not_all_register_in_time_fail_the_attempt(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.advance(REGISTRATION_TIMEOUT_MS)
    with pytest.raises(JobExecutionError, match="only 0 of 4 tasks"):
        job.master.result()


def test_a_failed_spark_job_is_named_by_its_python_exception_line(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.register_all()
    job.end_spark_job(
        0,
        "PythonException: Traceback (most recent call last):\n"
        '  File "task_entry.py", line 9, in run\n    start()\n'
        "ImportError: no module named 'mylib'\n\tat org.apache.spark.Something",
    )
    with pytest.raises(
        JobExecutionError,
        match=r"^the Spark job of attempt 0 failed: ImportError: no module named 'mylib'; ",
    ) as raised:
        job.master.result()
    assert isinstance(raised.value.__cause__, RemoteTaskError)
