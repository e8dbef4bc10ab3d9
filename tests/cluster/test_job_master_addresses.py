"""The JobMaster's addresses: it listens where the runner says, tells the tasks the advertised
address, and fails the job at once (no restart) when no task could reach it.
Fake RPC, fake Spark runner, ManualClock: no Spark, no sockets, no sleeps."""

from __future__ import annotations

import pickle

import pytest
from job_master_builder import PARTITIONS, SOURCES, JobHarness, job_master_builder

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.addresses import RPC_ADVERTISED_KEY, JobAddresses
from barrierflow.cluster.rpc import unreachable_message
from barrierflow.errors import JobExecutionError, JobMasterUnreachableError
from barrierflow.runtime import task_messages as msg

UNREACHABLE = unreachable_message("worker-1", ("127.0.0.2", 4100), "Connection refused")


def spark_report(headline: str) -> str:
    """What the runner posts when a Python task raised (spark_runner.spark_error_summary)."""
    return (
        "Traceback (most recent call last):\n"
        '  File "barrierflow/cluster/executor/task_entry.py", line 50, in run_partitions\n'
        "    rpc = RpcClient(\n"
        f"{headline}\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException"
    )


def test_the_endpoint_binds_the_bind_address_and_tasks_get_the_advertised_one(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.no_restart())
    job.addresses = JobAddresses("0.0.0.0", "driver.example", None)
    job.start()
    assert job.rpc.host == "0.0.0.0"
    _, settings = pickle.loads(job.runner.payloads[0])
    assert settings.jobmaster_address == ("driver.example", job.rpc.address[1])
    assert settings.task_bind_address is None


def test_no_task_reaching_the_jobmaster_fails_the_job_at_once_without_restarting(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(10, 100))
    job.end_spark_job(
        0, spark_report(f"barrierflow.errors.JobMasterUnreachableError: {UNREACHABLE}")
    )
    assert job.master.ended and job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError) as raised:
        job.master.result()
    assert str(raised.value) == f"job 'unit-job' failed: {UNREACHABLE}"
    assert RPC_ADVERTISED_KEY in str(raised.value)
    assert isinstance(raised.value.__cause__, JobMasterUnreachableError)
    job.advance(10_000)
    assert job.runner.submitted == [(job.master.spark_group(0), 0)]  # never restarted
    assert job.rpc.closed


def test_once_a_task_registered_the_restart_strategy_decides(tmp_path):
    # one executor cut off while others reached the JobMaster: a new stage may land elsewhere
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 100))
    conn = job.rpc.connect()
    job.tasks[SOURCES[0]] = conn
    job.send(SOURCES[0], msg.RegisterTask(0, SOURCES[0], ("127.0.0.1", 7000), "host", 100))
    job.end_spark_job(
        0, spark_report(f"barrierflow.errors.JobMasterUnreachableError: {UNREACHABLE}")
    )
    assert job.master.status.state == "RESTARTING"
    job.advance(100)
    assert job.runner.submitted[-1] == (job.master.spark_group(1), 1)


def test_another_spark_failure_before_registration_still_restarts(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 100))
    job.end_spark_job(0, spark_report("ModuleNotFoundError: No module named 'numpy'"))
    assert job.master.status.state == "RESTARTING"
    job.advance(100)
    assert len(job.runner.submitted) == 2
    job.run_all(attempt=1)
    assert len(job.tasks) == len(PARTITIONS)
