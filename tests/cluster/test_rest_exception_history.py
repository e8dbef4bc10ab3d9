"""The JobMaster records every attempt failure into the published view's exception history:
when, which attempt, the one-line root cause, the task and its traceback, and whether the job
rolled back in place, took a new stage or failed. Fake RPC and runner, ManualClock."""

from __future__ import annotations

from dataclasses import replace

from job_master_builder import COUNTERS, SOURCES, failure, job_master_builder

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster import job_view
from barrierflow.cluster.rest.actions import JobControl
from barrierflow.cluster.rest.server import route
from barrierflow.runtime import task_messages as msg

DELAY_MS = 500


def exceptions(job) -> dict:
    view = job.master.publisher.view
    control = JobControl(object(), "t")  # type: ignore[arg-type]  # reads only
    path = f"/jobs/{view.job_id}/exceptions"
    status, body = route(view, path, authorization="Bearer t", control=control)
    assert status == 200
    return body


def test_an_exception_in_user_code_is_recorded_as_a_roll_back_in_place(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, DELAY_MS))
    job.run_all()
    failed_at = job.clock.epoch_millis()
    job.send(COUNTERS[1], msg.TaskFailed(0, COUNTERS[1], failure(ValueError("boom"))))

    (entry,) = exceptions(job)["exceptionHistory"]["entries"]
    assert entry["timestamp"] == failed_at and entry["attempt"] == 0
    assert entry["root_cause"] == "ValueError: boom (task 'Reduce -> Sink' (2/2))"
    assert (entry["exceptionName"], entry["taskName"]) == ("ValueError", "'Reduce -> Sink' (2/2)")
    assert "raise error" in entry["stacktrace"]  # the task's own traceback
    assert (entry["recovery"], entry["delay_ms"]) == ("in-place", DELAY_MS)
    state = exceptions(job)["restart_strategy"]
    assert (state["type"], state["restarts"], state["limit"], state["next_delay_ms"]) == (
        "fixed-delay", 1, 3, DELAY_MS,
    )  # fmt: skip


def test_a_lost_task_takes_a_new_stage_and_the_last_failure_fails_the_job(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(1, DELAY_MS))
    job.run_all()
    job.lose(SOURCES[0])
    job.advance(DELAY_MS)
    job.run_all(attempt=1)
    job.send(COUNTERS[0], msg.TaskFailed(1, COUNTERS[0], failure(KeyError("k"))))

    assert job.master.status.state == "FAILED"
    body = exceptions(job)
    latest, first = body["exceptionHistory"]["entries"]
    assert (first["attempt"], first["recovery"], first["taskName"]) == (0, "new-stage", None)
    assert "Collection -> Map" in first["root_cause"]
    assert (latest["attempt"], latest["recovery"], latest["delay_ms"]) == (1, "none", None)
    assert "gave up after 1 restart" in latest["explanation"]
    assert body["root-exception"] == latest["root_cause"]
    assert body["restart_strategy"]["restarts"] == 1


def test_the_history_keeps_only_the_newest_failures(tmp_path, monkeypatch):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(10, 0))
    publisher = job.master.publisher
    entry = job_view.FailureEntry(0, 0, "x")
    for attempt in range(job_view.MAX_FAILURE_HISTORY + 5):
        publisher.record_failure(replace(entry, attempt=attempt))
    publisher.publish_view()

    view = publisher.view
    assert len(view.exceptions) == job_view.MAX_FAILURE_HISTORY and view.exceptions_truncated
    assert view.exceptions[0].attempt == 5


def test_the_view_has_the_graph_config_and_log_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("BARRIERFLOW_LOG_DIR", str(tmp_path / "logs"))
    job = job_master_builder(tmp_path)
    view = job.master.publisher.view
    job.master.publisher = job_view.JobPublisher(
        job.master.job_id, job.master.graph, job.master.settings, "s3a://key:secret@b/c",
        job.master.stats_tracker, job.clock,
    )  # fmt: skip
    job.master.publisher.publish_view()
    fresh = job.master.publisher.view

    assert [(e.source, e.target, e.partitioning) for e in view.edges] == [(0, 1, "HASH")]
    assert fresh.log_dir == str(tmp_path / "logs" / f"unit-job-{job.master.job_id}")
    assert fresh.checkpoint_config["checkpoint_storage"] == "s3a://b/c"
    assert fresh.checkpoint_config["state_backend"] == "HashMapStateBackend"
    assert "secret" not in str(fresh.config)
    assert fresh.config["restart_strategy"]["type"] == "fixed-delay"
    assert fresh.config["max_parallelism"] == job.master.graph.max_parallelism
