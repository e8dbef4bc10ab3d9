"""A record that always fails ends the job instead of restarting for good (issue 21, item 7).

The pure `RepeatedFailures` event by event, then the JobMaster with it (fake RPC, fake Spark
runner, ManualClock): the third same failure from one restore point fails the job in one
line, whatever the restart strategy; chaos failures and lost processes never count, and a
completed checkpoint starts the count again.
"""

from __future__ import annotations

import pytest
from job_master_builder import COUNTERS, INTERVAL_MS, PARTITIONS, JobHarness, failure

from barrierflow.api.checkpoint_config import CheckpointConfig
from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster.attempt_failure import failure_signature, task_failure
from barrierflow.cluster.jobmaster.repeated_failures import RepeatedFailures
from barrierflow.errors import (
    ChaosFailure,
    ConfigurationError,
    JobExecutionError,
    SinkUnavailableError,
    StateRestoreError,
)
from barrierflow.runtime import task_messages as msg

MAP = failure_signature("'lines -> Map' (1/1)", "builtins.ValueError", "bad record 'x'")
OTHER = failure_signature("'lines -> Map' (1/1)", "builtins.ValueError", "bad record 'y'")


# ---- the pure rule, event by event -------------------------------------------------------------


def test_the_third_same_failure_from_one_restore_point_gives_up_naming_both():
    repeated = RepeatedFailures(3)
    assert repeated.failed("checkpoint 4", MAP) is None
    assert repeated.failed("checkpoint 4", MAP) is None
    reason = repeated.failed("checkpoint 4", MAP)
    assert reason is not None
    assert reason.startswith(
        "the same failure 3 times in a row from checkpoint 4, no checkpoint completed in "
        "between: a record that always fails; route such records to a dead-letter output "
        "(`.with_dead_letters()` on the source, or on the map, flat_map, filter or process"
    )
    assert reason.endswith("or fix the input")
    assert "\n" not in reason


def test_a_job_that_never_completed_a_checkpoint_counts_from_the_start():
    repeated = RepeatedFailures(2)
    assert repeated.failed(None, MAP) is None
    reason = repeated.failed(None, MAP)
    assert reason is not None and "from the start (no checkpoint)" in reason


def test_another_failure_or_another_restore_point_starts_the_count_again():
    repeated = RepeatedFailures(3)
    assert repeated.failed("checkpoint 4", MAP) is None
    assert repeated.failed("checkpoint 4", MAP) is None
    assert repeated.failed("checkpoint 4", OTHER) is None  # another record: count 1
    assert repeated.failed("checkpoint 4", OTHER) is None
    assert repeated.failed("checkpoint 5", OTHER) is None  # the job moved on: count 1
    assert repeated.failed("checkpoint 5", OTHER) is None
    assert repeated.failed("checkpoint 5", OTHER) is not None


def test_a_completed_checkpoint_starts_the_count_again():
    repeated = RepeatedFailures(3)
    repeated.failed("checkpoint 4", MAP)
    repeated.failed("checkpoint 4", MAP)
    repeated.progressed()
    assert repeated.failed("checkpoint 4", MAP) is None
    assert repeated.failed("checkpoint 4", MAP) is None
    assert repeated.failed("checkpoint 4", MAP) is not None


def test_failures_that_say_nothing_about_the_input_neither_count_nor_break_a_streak():
    repeated = RepeatedFailures(3)
    repeated.failed("checkpoint 4", MAP)
    assert repeated.failed("checkpoint 4", None) is None  # chaos, a lost process, ...
    assert repeated.failed("checkpoint 4", None) is None
    assert repeated.failed("checkpoint 4", None) is None
    repeated.failed("checkpoint 4", MAP)
    assert repeated.failed("checkpoint 4", MAP) is not None


@pytest.mark.parametrize("limit", [0, None])
def test_a_limit_of_0_or_none_never_gives_up(limit):
    repeated = RepeatedFailures(limit)
    assert all(repeated.failed("checkpoint 4", MAP) is None for _ in range(20))


@pytest.mark.parametrize("limit", [-1, 2.5, True, "3"])
def test_a_limit_that_is_no_count_is_refused(limit):
    with pytest.raises(ConfigurationError, match="repeated failure limit must be an int >= 0"):
        CheckpointConfig().set_repeated_failure_limit(limit)


# ---- what makes two failures the same ---------------------------------------------------------


def reported(error: BaseException, position: str | None = None) -> msg.TaskFailure:
    try:
        raise error
    except BaseException as raised:
        return msg.TaskFailure.of(raised, "lines -> Map", position)


def test_a_failure_is_the_same_whatever_memory_addresses_its_message_holds():
    one = task_failure(reported(ValueError("bad <Row object at 0x7f3a2c10>")), "'m' (1/1)")
    two = task_failure(reported(ValueError("bad <Row object at 0x55d0e8a0>")), "'m' (1/1)")
    other_task = task_failure(reported(ValueError("bad <Row object at 0x1>")), "'m' (2/2)")
    assert one.signature == two.signature
    assert one.signature != other_task.signature


def test_chaos_lost_channels_and_unreachable_systems_have_no_signature():
    chaos = StateRestoreError("the sink failed while restoring")
    chaos.__cause__ = ChaosFailure("injected by barrierflow chaos (attempt 3)")
    for error in (
        ChaosFailure("injected by barrierflow chaos (attempt 1)"),
        chaos,
        SinkUnavailableError("cannot reach PostgreSQL"),
        ConnectionResetError("reset by peer"),
    ):
        assert task_failure(reported(error), "'m' (1/1)").signature is None, error


def test_the_position_a_task_sends_is_in_the_summary():
    position = "source 'lines', split 'a.txt', the batch of 3 record(s) read up to offset 40"
    got = task_failure(reported(ValueError("bad"), position), "'lines -> Map' (1/1)")
    assert got.summary == f"ValueError: bad (task 'lines -> Map' (1/1); at {position})"
    assert got.position == position


# ---- the JobMaster ---------------------------------------------------------------------------


UNLIMITED = RestartStrategies.exponential_delay_restart(100, 100, 1.5, 3_600_000, 0.0)
"""Restarts without limit after 100 ms: the default with checkpoints, shortened."""


def run(job: JobHarness, attempt: int) -> None:
    """Every task of `attempt` registers and runs: new connections in a new stage, the kept
    ones after a roll-back in place."""
    if job.master.stage == attempt:
        job.run_all(attempt)
        return
    for partition in PARTITIONS:
        job.send(partition, msg.RegisterTask(attempt, partition, ("127.0.0.1", 1), "host", 1))
    for partition in PARTITIONS:
        job.send(partition, msg.TaskRunning(attempt, partition))


def fail(job: JobHarness, attempt: int, error: BaseException) -> None:
    run(job, attempt)
    job.send(COUNTERS[0], msg.TaskFailed(attempt, COUNTERS[0], failure(error)))


def complete_checkpoint(job: JobHarness, attempt: int, checkpoint_id: int) -> None:
    job.advance(INTERVAL_MS)
    for partition in PARTITIONS:
        job.send(partition, msg.AcknowledgeCheckpoint(attempt, partition, checkpoint_id, None))


def test_the_same_failure_three_times_fails_the_job_though_the_strategy_restarts(tmp_path):
    job = JobHarness(tmp_path, UNLIMITED).start()
    for attempt in (0, 1):
        fail(job, attempt, ValueError("invalid literal for int() with base 10: 'x'"))
        assert job.master.status.state == "RESTARTING"
        job.advance(1000)
    fail(job, 2, ValueError("invalid literal for int() with base 10: 'x'"))

    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError) as raised:
        job.master.result()
    assert str(raised.value) == (
        "ValueError: invalid literal for int() with base 10: 'x' (task 'Reduce -> Sink' (1/2)); "
        "job 'unit-job' failed and will not restart (the same failure 3 times in a row from "
        "the start (no checkpoint), no checkpoint completed in between: a record that always "
        "fails; route such records to a dead-letter output (`.with_dead_letters()` on the "
        "source, or on the map, flat_map, filter or process that raises, then "
        "`.get_side_output(DEAD_LETTERS)`) or fix the input)"
    )
    assert type(raised.value.__cause__) is ValueError
    history = job.master.publisher.view.exceptions
    assert [entry.recovery for entry in history] == ["in-place", "in-place", "none"]
    assert history[-1].explanation.startswith("the same failure 3 times in a row")


def test_the_count_names_the_restored_checkpoint_and_restarts_after_progress(tmp_path):
    job = JobHarness(tmp_path, UNLIMITED).start()
    run(job, 0)
    complete_checkpoint(job, 0, 1)
    job.send(COUNTERS[0], msg.TaskFailed(0, COUNTERS[0], failure(ValueError("bad"))))
    job.advance(1000)
    fail(job, 1, ValueError("bad"))  # from checkpoint 1: 1
    job.advance(1000)
    run(job, 2)
    complete_checkpoint(job, 2, 2)  # progress: the count starts again
    job.send(COUNTERS[0], msg.TaskFailed(2, COUNTERS[0], failure(ValueError("bad"))))
    for attempt in (3, 4, 5):  # from checkpoint 2: 1, 2, 3
        job.advance(1000)
        assert job.master.status.state != "FAILED"
        fail(job, attempt, ValueError("bad"))
    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="3 times in a row from checkpoint 2, no"):
        job.master.result()


def test_chaos_failures_never_fail_the_job(tmp_path):
    job = JobHarness(tmp_path, UNLIMITED).start()
    for attempt in range(6):
        fail(job, attempt, ChaosFailure("injected by barrierflow chaos"))
        assert job.master.status.state == "RESTARTING"
        job.advance(1000)
    for attempt in range(6, 9):  # nor do lost processes
        run(job, attempt)
        job.lose(COUNTERS[0])
        assert job.master.status.state == "RESTARTING"
        job.advance(1000)


def test_a_strategy_that_gives_up_keeps_its_own_explanation(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.fixed_delay_restart(2, 100)).start()
    for attempt in (0, 1):
        fail(job, attempt, ValueError("bad"))
        job.advance(1000)
    fail(job, 2, ValueError("bad"))
    with pytest.raises(JobExecutionError, match=r"gave up after 2 restart\(s\)"):
        job.master.result()


def test_with_the_limit_off_the_strategy_restarts_for_good(tmp_path):
    job = JobHarness(tmp_path, UNLIMITED)
    job.master.repeated_failures = RepeatedFailures(0)
    job.start()
    for attempt in range(6):
        fail(job, attempt, ValueError("bad"))
        assert job.master.status.state == "RESTARTING"
        job.advance(1000)
