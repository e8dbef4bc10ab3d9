"""JobClient in PyFlink's shape (issue 24 item 19): `stop_with_savepoint` takes
`(advance_to_end_of_event_time, savepoint_directory)` in that order and refuses the reversed
call with one line before anything reaches the job; the methods PyFlink gives futures return
`concurrent.futures.Future`s. The futures against a running job: tests/e2e/test_pyflink_api.py."""

from __future__ import annotations

import inspect
from concurrent.futures import Future

import pytest

from barrierflow import JobID
from barrierflow.api.job_client import JobClient, JobExecutionResult, _in_background
from barrierflow.errors import ConfigurationError


def test_the_parameters_are_pyflinks_in_pyflinks_order():
    def positional(method):
        return [
            name
            for name, p in inspect.signature(method).parameters.items()
            if p.kind is p.POSITIONAL_OR_KEYWORD and name != "self"
        ]

    assert positional(JobClient.stop_with_savepoint) == [
        "advance_to_end_of_event_time",
        "savepoint_directory",
    ]
    assert positional(JobClient.trigger_savepoint) == ["savepoint_directory"]
    assert (
        inspect.signature(JobClient.stop_with_savepoint)
        .parameters["advance_to_end_of_event_time"]
        .default
        is False
    )


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("/sp",), {}, "takes a bool first, got '/sp'; pass the folder as savepoint_directory"),
        ((False, True), {}, "a savepoint directory must be a path or URI string .* got True"),
        ((), {"savepoint_dir": False}, "a savepoint directory must be .* got False"),
        ((False, "/a"), {"savepoint_dir": "/b"}, "both savepoint_directory and savepoint_dir"),
    ],
)
def test_a_reversed_or_wrong_call_is_refused_before_the_job_is_asked(args, kwargs, message):
    # No job behind it: a refused call never reaches `_master`.
    client = JobClient.__new__(JobClient)
    with pytest.raises(ConfigurationError, match=message):
        client.stop_with_savepoint(*args, **kwargs)


def test_trigger_savepoint_refuses_a_bool_as_its_folder():
    client = JobClient.__new__(JobClient)
    with pytest.raises(ConfigurationError, match="got True"):
        client.trigger_savepoint(True)


def test_a_background_future_carries_the_result_or_the_error():
    done = _in_background("t", lambda: 42)
    assert isinstance(done, Future) and done.result(timeout=5) == 42

    def fails():
        raise ValueError("boom")

    failed = _in_background("t", fails)
    assert isinstance(failed.exception(timeout=5), ValueError)
    with pytest.raises(ValueError, match="boom"):
        failed.result()


def test_the_execution_result_has_pyflinks_getters():
    result = JobExecutionResult("job", 1200, [], 0, "ab12" * 8)
    assert (result.get_job_id(), result.get_net_runtime()) == ("ab12" * 8, 1200)
    assert isinstance(result.get_job_id(), JobID)
    assert result.get_all_accumulator_results() == {}
    assert result.get_accumulator_result("n") is None


def test_a_status_reads_as_pyflinks_future_of_it_too():
    from barrierflow import JobStatus

    assert JobStatus.RUNNING.result() is JobStatus.RUNNING
    assert JobStatus.FINISHED.result(timeout=1) == "FINISHED"
