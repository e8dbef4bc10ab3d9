"""An executor that cannot import the job's code: the task's error names the module, the host
and the fixes, and the JobMaster fails the job at once (every attempt would fail alike)."""

from __future__ import annotations

import socket
import traceback

import pytest
from job_master_builder import job_master_builder

from barrierflow.cluster.executor.task_entry import load_payload
from barrierflow.cluster.spark.runner import spark_error_summary
from barrierflow.errors import ExecutorImportError, JobExecutionError

NEEDS_A_MISSING_MODULE = b"cdriver_only_helpers\nenrich\n."
"""A pickle of a function by reference to a module only the driver has."""


def test_a_payload_needing_a_missing_module_names_it_the_host_and_the_fixes():
    with pytest.raises(ExecutorImportError) as raised:
        load_payload(NEEDS_A_MISSING_MODULE)
    text = str(raised.value)
    assert (
        f"the executor on {socket.gethostname()} cannot import module 'driver_only_helpers'" in text
    )
    for fix in ("--py-files", "env.add_python_file", "executors' Python", "--archives"):
        assert fix in text


def spark_report_of(error: BaseException) -> str:
    """Spark's error text for a task that raised `error` (a Python traceback inside)."""
    python = "".join(traceback.format_exception(error))
    return spark_error_summary(
        Exception(f"org.apache.spark.api.python.PythonException: {python}\n\tat org.apache...")
    )


def test_an_import_failure_on_the_executors_fails_the_job_without_a_restart(tmp_path):
    job = job_master_builder(tmp_path)  # fixed delay: would restart 3 times
    try:
        load_payload(NEEDS_A_MISSING_MODULE)
    except ExecutorImportError as error:
        report = spark_report_of(error)
    job.end_spark_job(0, report)
    assert job.master.ended and job.master.status.state == "FAILED"
    assert len(job.runner.submitted) == 1
    with pytest.raises(
        JobExecutionError, match="cannot import module 'driver_only_helpers'"
    ) as raised:
        job.master.result()
    assert isinstance(raised.value.__cause__, ExecutorImportError)


def test_another_spark_job_failure_still_restarts(tmp_path):
    job = job_master_builder(tmp_path)
    job.end_spark_job(0, spark_report_of(RuntimeError("executor lost")))
    assert job.master.status.state == "RESTARTING"
