"""The JobMaster and the lease of its checkpoint folder (issue 21, "One run per job"): a second
start of a running job is refused before it touches anything, an expired lease is taken over
and its old holder stops at its next renewal, and the lease goes at every kind of end.
Fake RPC, fake Spark runner, ManualClock; real files."""

from __future__ import annotations

import json
import logging

import pytest
from job_master_builder import COUNTERS, PARTITIONS, JobHarness, failure, job_master_builder

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint.lease import EXPIRY_MS, RENEW_INTERVAL_MS
from barrierflow.errors import (
    InsufficientResourcesError,
    JobAlreadyRunningError,
    JobExecutionError,
)
from barrierflow.runtime import task_messages as msg


def job_folder(job: JobHarness):
    return job.master.storage.job_dir


def leases(tmp_path) -> dict[str, str]:
    """Lease file name -> the job id it names."""
    folder = tmp_path / "checkpoints" / "unit-job"
    return {
        p.name: json.loads(p.read_text())["holder"]["job_id"]
        for p in sorted(folder.glob("_lease-*"))
    }


def everything_under(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if "logs" not in p.parts)


def test_a_second_start_is_refused_at_once_naming_the_running_job_and_touches_nothing(tmp_path):
    first = job_master_builder(tmp_path)
    first.run_all()
    assert leases(tmp_path) == {"_lease-1": first.master.job_id}
    before = everything_under(tmp_path)

    second = JobHarness(tmp_path, RestartStrategies.no_restart())
    with pytest.raises(JobAlreadyRunningError) as refused:
        second.start()
    line = str(refused.value)
    assert f"job {first.master.job_id} on host " in line
    assert f"`barrierflow cancel {first.master.job_id}`" in line
    assert "lease expires 30 s after its last renewal" in line
    assert second.master.status.state == "FAILED"
    assert second.runner is None and second.rpc is None  # no Spark, no endpoint
    assert everything_under(tmp_path) == before  # no sink, checkpoint or lease file touched
    assert leases(tmp_path) == {"_lease-1": first.master.job_id}
    assert first.master.status.state == "RUNNING"


def test_the_job_renews_its_lease_on_its_scheduler(tmp_path):
    job = job_master_builder(tmp_path)
    folder = tmp_path / "checkpoints" / "unit-job" / "_lease-1"
    renewed = json.loads(folder.read_text())["renewed_ms"]
    assert "renew the lease" in job.master.scheduler.pending()
    job.advance(RENEW_INTERVAL_MS)
    assert json.loads(folder.read_text())["renewed_ms"] == renewed + RENEW_INTERVAL_MS
    job.advance(RENEW_INTERVAL_MS * 10)  # long past the first expiry: renewed all along
    assert json.loads(folder.read_text())["expires_ms"] == job.clock.epoch_millis() + EXPIRY_MS


def test_an_expired_lease_is_taken_over_and_the_old_run_stops_at_its_next_renewal(tmp_path, caplog):
    old = job_master_builder(tmp_path)
    old.run_all()
    new = JobHarness(tmp_path, RestartStrategies.no_restart())
    new.clock.advance(EXPIRY_MS)  # the old run's renewals stopped 30 s ago (as the new sees it)
    with caplog.at_level(logging.WARNING, "barrierflow"):
        new.start()
    assert f"from job {old.master.job_id} on host" in caplog.text
    assert "has expired" in caplog.text
    assert leases(tmp_path) == {"_lease-2": new.master.job_id}

    old.advance(RENEW_INTERVAL_MS)  # its next renewal finds the newer lease
    assert old.master.ended and old.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError) as failed:
        old.master.result()
    message = str(failed.value)
    assert f"lost the lease of checkpoint folder {job_folder(old)}" in message
    assert f"taken over by job {new.master.job_id}" in message
    assert "stopping so that two runs never write the same checkpoints" in message
    assert old.runner.cancelled == [old.master.spark_group(0)]  # its tasks are stopped
    assert all(conn.sent_of(msg.CancelTask) for conn in old.tasks.values())
    assert leases(tmp_path) == {"_lease-2": new.master.job_id}  # the new run's stays
    assert new.master.status.state == "DEPLOYING"


def test_a_lost_lease_during_the_restart_delay_ends_the_job_and_no_attempt_follows(tmp_path):
    old = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 60_000))
    old.run_all()
    old.send(COUNTERS[0], msg.TaskFailed(0, COUNTERS[0], failure(ValueError("boom"))))
    assert old.master.status.state == "RESTARTING"
    new = JobHarness(tmp_path, RestartStrategies.no_restart())
    new.clock.advance(EXPIRY_MS)
    new.start()
    old.advance(RENEW_INTERVAL_MS)
    assert old.master.status.state == "FAILED"
    old.advance(60_000)
    assert len(old.runner.submitted) == 1  # the restart never happens


# ---- released at every end --------------------------------------------------------------------


def test_a_finished_job_releases_its_lease(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    for partition in PARTITIONS:
        job.send(partition, msg.TaskFinished(0, partition))
    job.end_spark_job(0)
    assert job.master.status.state == "FINISHED"
    assert leases(tmp_path) == {}
    job_master_builder(tmp_path)  # a rerun starts at once


def test_a_failed_job_releases_its_lease(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    job.send(COUNTERS[0], msg.TaskFailed(0, COUNTERS[0], failure(ValueError("boom"))))
    assert job.master.status.state == "FAILED"
    assert leases(tmp_path) == {}


def test_a_cancelled_job_releases_its_lease(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.master.request_cancel()
    job.master.drain()
    assert job.master.status.state == "CANCELED"
    assert leases(tmp_path) == {}


def test_a_crashed_job_releases_its_lease(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.post(("not a mail",))  # the crash path
    assert job.master.status.state == "FAILED"
    assert leases(tmp_path) == {}


def test_a_start_failing_after_the_lease_was_taken_releases_it(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.no_restart())

    def no_slots(*args):
        raise InsufficientResourcesError("1 of 4 task slots")

    job.master.connect_runner = no_slots
    with pytest.raises(InsufficientResourcesError):
        job.start()
    assert leases(tmp_path) == {}
    job_master_builder(tmp_path)  # a rerun starts at once


def test_a_run_that_lost_its_lease_before_its_end_cleans_up_no_sink(tmp_path, caplog):
    old = job_master_builder(tmp_path)
    old.run_all()
    new = JobHarness(tmp_path, RestartStrategies.no_restart())
    new.clock.advance(EXPIRY_MS)
    new.start()  # took over; the old run has not renewed since
    with caplog.at_level(logging.INFO, "barrierflow"):
        old.master.request_cancel()
        old.master.drain()
    assert old.master.status.state == "CANCELED"
    assert "could not clean up its sinks: LeaseLostError: lost the lease" in caplog.text
    assert "cleaned up sink(s)" not in caplog.text
    assert leases(tmp_path) == {"_lease-2": new.master.job_id}
