"""Checkpoint statistics of a real job: the REST endpoint while it runs, the log line of
each checkpoint, JobExecutionResult.checkpoints, and `barrierflow checkpoints` afterwards."""

from __future__ import annotations

import json
import logging
import socket
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cli import main
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

from .conftest import read_rows
from .jobs import running_count_rows, word_of

pytestmark = pytest.mark.spark


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_a_running_job_serves_its_checkpoint_statistics_and_leaves_a_history(
    spark, tmp_path, monkeypatch, caplog
):
    port = free_port()
    monkeypatch.setenv("BARRIERFLOW_REST_PORT", str(port))
    caplog.set_level(logging.INFO, logger="barrierflow.cluster.jobmaster.job_master")
    records = 20_000
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    (
        env.from_source(
            DataGeneratorSource(word_of, records, records_per_second=4_000),
            WatermarkStrategy.no_watermarks(),
            "words",
        )
        .map(lambda w: (w, 1))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
    )
    job = env.execute_async("stats-job")
    assert job.wait_for_completed_checkpoints(2, timeout=120)

    # While it runs (about 5 s of input at 4,000 records/s).
    base = f"http://127.0.0.1:{port}"
    (overview,) = get(f"{base}/jobs/overview")["jobs"]
    assert (overview["name"], overview["state"]) == ("stats-job", "RUNNING")
    job_id = overview["jid"]
    vertices = get(f"{base}/jobs/{job_id}")["vertices"]
    assert [v["parallelism"] for v in vertices] == [2] * len(vertices)
    subtasks = 2 * len(vertices)
    checkpoints = get(f"{base}/jobs/{job_id}/checkpoints")
    assert checkpoints["counts"]["completed"] >= 2
    assert checkpoints["counts"]["failed"] == 0
    latest = checkpoints["latest"]["completed"]
    assert latest["num_acknowledged_subtasks"] == latest["num_subtasks"] == subtasks
    assert latest["duration"] >= latest["end_to_end_duration"] >= 0
    assert checkpoints["summary"]["end_to_end_duration"]["count"] >= 2
    details = get(f"{base}/jobs/{job_id}/checkpoints/details/{latest['id']}")
    rows = [s for task in details["tasks"].values() for s in task["subtasks"]]
    assert [s["status"] for s in rows] == ["completed"] * subtasks
    assert sum(s["state_size"] for s in rows) == latest["state_size"] > 0  # counts and sources
    assert all(s["checkpoint"]["sync"] >= 0 and s["checkpoint"]["async"] >= 0 for s in rows)

    result = job.wait(timeout=240)

    with pytest.raises(urllib.error.URLError):  # the endpoint ended with the job
        get(f"{base}/jobs")
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))
    completed = [c.checkpoint_id for c in result.checkpoints]
    assert result.checkpoints[-1].is_final
    for stats in result.checkpoints:  # what benchmarks/keyed_count.py reads
        assert stats.duration_ms >= 0 and stats.state_bytes > 0
        assert stats.max_sync_ms >= 0 and stats.max_async_ms >= 0
        assert (
            f"checkpoint {stats.checkpoint_id} completed in {stats.duration_ms} ms" in caplog.text
        )

    cli = CliRunner().invoke(
        main, ["checkpoints", str(tmp_path / "checkpoints"), "stats-job", "--json", "--last", "0"]
    )
    assert cli.exit_code == 0, cli.output
    document = json.loads(cli.output)
    history = document["history"][::-1]  # oldest first
    assert [h["id"] for h in history if h["status"] == "COMPLETED"] == completed
    assert {h["status"] for h in history} == {"COMPLETED"}
    assert history[-1]["is_final"] and history[-1]["id"] == completed[-1]
    assert [r["id"] for r in document["retained"]] == [completed[-1]]  # retention keeps 1
