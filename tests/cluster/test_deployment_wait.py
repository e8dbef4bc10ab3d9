"""Deploying on a busy cluster: an attempt's barrier stage may wait for free task slots (other
Spark jobs hold them) and its tasks may take long to start; only a stage that never gets its
slots, or tasks that make no progress for REGISTRATION_TIMEOUT_MS once Spark started them,
fail the attempt. Scenarios event by event: fake RPC, fake Spark runner, ManualClock."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from job_master_builder import PARTITIONS, JobHarness

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster.attempt import REGISTRATION_TIMEOUT_MS, SLOT_WAIT_TIMEOUT_MS
from barrierflow.cluster.spark.runner import tasks_launched
from barrierflow.errors import JobExecutionError
from barrierflow.runtime import task_messages as msg

S = 1000


def harness(tmp_path, reports_launches: bool = True) -> JobHarness:
    """A started job (attempt 0 submitted, no restart) whose runner reports its stage's start."""
    job = JobHarness(tmp_path, RestartStrategies.no_restart())
    job.reports_launches = reports_launches
    return job.start()


def register(job: JobHarness, partitions: list[int]) -> None:
    assert job.rpc is not None
    for partition in partitions:
        job.tasks[partition] = job.rpc.connect()
        job.send(partition, msg.RegisterTask(0, partition, ("127.0.0.1", 7000 + partition), "h", 1))


def running(job: JobHarness, partitions: list[int]) -> None:
    for partition in partitions:
        job.send(partition, msg.TaskRunning(0, partition))


def outcome(job: JobHarness) -> str:
    """DEPLOYING/RUNNING while the attempt lives, else the job's failure message."""
    if not job.master.ended:
        return job.master.status.state
    with pytest.raises(JobExecutionError) as raised:
        job.master.result()
    return str(raised.value)


# (what happens, in order) -> the state after the last step, or the start of the failure
SCENARIOS = {
    "a stage waiting for slots outlives the registration bound": (
        [("advance", REGISTRATION_TIMEOUT_MS + S)],
        "DEPLOYING",
    ),
    "the registration bound counts from the stage's start": (
        [("advance", 250 * S), ("launch", 0), ("advance", REGISTRATION_TIMEOUT_MS - S)],
        "DEPLOYING",
    ),
    "no task registered within the bound after the start": (
        [("advance", 250 * S), ("launch", 0), ("advance", REGISTRATION_TIMEOUT_MS)],
        "only 0 of 4 tasks registered and started (0 registered), none more in the last "
        f"{REGISTRATION_TIMEOUT_MS // S} s ({250 + REGISTRATION_TIMEOUT_MS // S} s after",
    ),
    "each registration restarts the bound": (
        [
            ("launch", 0),
            ("advance", 100 * S),
            ("register", [0, 1]),
            ("advance", 100 * S),
            ("register", [2]),
            ("advance", REGISTRATION_TIMEOUT_MS - S),
        ],
        "DEPLOYING",
    ),
    "each task running restarts the bound": (
        [
            ("launch", 0),
            ("advance", 100 * S),
            ("register", PARTITIONS),
            ("advance", 100 * S),
            ("running", [0]),
            ("advance", REGISTRATION_TIMEOUT_MS - S),
            ("running", [1, 2, 3]),
        ],
        "RUNNING",
    ),
    "tasks that stop making progress fail the attempt": (
        [
            ("launch", 0),
            ("register", PARTITIONS),
            ("running", [0]),
            ("advance", REGISTRATION_TIMEOUT_MS),
        ],
        "only 1 of 4 tasks registered and started (4 registered), none more in the last "
        f"{REGISTRATION_TIMEOUT_MS // S} s",
    ),
    "a registration proves the start when Spark's report lags": (
        [("advance", 10 * S), ("register", [0]), ("advance", REGISTRATION_TIMEOUT_MS)],
        "only 0 of 4 tasks registered and started (1 registered)",
    ),
    "a stage that never gets its slots fails, naming them": (
        [("advance", SLOT_WAIT_TIMEOUT_MS)],
        f"the Spark stage of attempt 0 waited {SLOT_WAIT_TIMEOUT_MS // S} s for 4 free task "
        "slots at once",
    ),
    "a report of the start after the tasks registered changes nothing": (
        [("launch", 0), ("register", PARTITIONS), ("launch", 0), ("running", PARTITIONS)],
        "RUNNING",
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_deployment_waits_for_slots_and_bounds_only_a_lack_of_progress(tmp_path, name):
    steps, expected = SCENARIOS[name]
    job = harness(tmp_path)
    for action, argument in steps:
        if action == "advance":
            job.advance(argument)
        elif action == "launch":
            job.launch(argument)
        elif action == "register":
            register(job, argument)
        else:
            running(job, argument)
    assert outcome(job).startswith(expected), outcome(job)


def test_without_launch_reports_the_bound_counts_from_the_submission(tmp_path):
    job = harness(tmp_path, reports_launches=False)
    job.advance(REGISTRATION_TIMEOUT_MS)
    assert outcome(job).startswith("only 0 of 4 tasks registered and started")


def test_the_start_of_an_older_stage_does_not_start_the_current_ones_bound(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.fixed_delay_restart(1, 0))
    job.reports_launches = True
    job.start()
    job.advance(SLOT_WAIT_TIMEOUT_MS)  # attempt 0 never got its slots: attempt 1 is submitted
    job.advance(0)
    assert [attempt for _, attempt in job.runner.submitted] == [0, 1]
    job.launch(0)  # late report of the old stage
    job.advance(REGISTRATION_TIMEOUT_MS)
    assert outcome(job) == "DEPLOYING"


def tracker(jobs: dict[int, list[int]], stages: dict[int, tuple[int, int, int]]):
    """A Spark StatusTracker answering for group 'g': its jobs' stages, and each stage's
    (active, completed, failed) task counts; a stage it forgot answers None."""
    return SimpleNamespace(
        getJobIdsForGroup=lambda group: list(jobs) if group == "g" else [],
        getJobInfo=lambda job_id: SimpleNamespace(stageIds=jobs[job_id]),
        getStageInfo=lambda stage_id: (
            SimpleNamespace(
                numActiveTasks=stages[stage_id][0],
                numCompletedTasks=stages[stage_id][1],
                numFailedTasks=stages[stage_id][2],
            )
            if stage_id in stages
            else None
        ),
    )


@pytest.mark.parametrize(
    ("jobs", "stages", "launched"),
    [
        ({}, {}, False),  # not submitted yet
        ({7: [3]}, {}, False),  # the stage is not known yet
        ({7: [3]}, {3: (0, 0, 0)}, False),  # waiting for 4 free slots
        ({7: [3]}, {3: (4, 0, 0)}, True),  # all 4 started
        ({7: [3]}, {3: (1, 2, 1)}, True),  # some already ended
        ({7: [2, 3]}, {2: (0, 0, 0), 3: (4, 0, 0)}, True),
    ],
)
def test_spark_started_the_stage_once_every_task_is_active_or_ended(jobs, stages, launched):
    assert tasks_launched(tracker(jobs, stages), "g", 4) is launched
