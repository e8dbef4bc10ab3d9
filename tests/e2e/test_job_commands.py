"""`barrierflow list/savepoint/stop/cancel` against real running jobs: found in the registry,
reached through their REST endpoint, gone from the registry once they ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from barrierflow.cli import main
from barrierflow.cluster.registry import JobRegistry
from barrierflow.errors import JobExecutionError

from .jobs import paced_word_count

pytestmark = pytest.mark.spark


@pytest.fixture
def registry(tmp_path, monkeypatch) -> JobRegistry:
    folder = tmp_path / "registry"
    monkeypatch.setenv("BARRIERFLOW_REGISTRY_DIR", str(folder))
    monkeypatch.delenv("BARRIERFLOW_REST_PORT", raising=False)
    return JobRegistry(folder)


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})
    assert "Traceback" not in result.output
    return result


def test_list_and_cancel_a_running_job_and_the_errors_around_them(spark, tmp_path, registry):
    job = paced_word_count(tmp_path, 400_000, 2_000).execute_async("commands-cancel")
    try:
        assert job.wait_for_completed_checkpoints(1, timeout=120)
        job_id = job.get_job_id()

        listed = run("list")
        assert listed.exit_code == 0, listed.output
        row = next(line for line in listed.stdout.splitlines() if line.startswith(job_id))
        assert row.split()[1:3] == ["commands-cancel", "RUNNING"]
        assert "#" in row  # a completed checkpoint
        (entry,) = json.loads(run("list", "--json").stdout)
        assert entry["rest"] == job.rest_url

        wrong = run("cancel", "0000ffff")
        assert wrong.exit_code == 1
        assert "no running job '0000ffff' on this machine" in wrong.stderr
        assert f"{job_id} (commands-cancel)" in wrong.stderr

        tokenless = run("cancel", job_id, "--rest", job.rest_url)
        assert tokenless.exit_code == 1
        assert "401" in tokenless.stderr and "--token" in tokenless.stderr
        assert job.get_job_status() == "RUNNING"

        cancelled = run("cancel", job_id[:8])
        assert cancelled.exit_code == 0, cancelled.output
        assert f"job {job_id} (commands-cancel) cancelled" in cancelled.stdout
    except BaseException:
        job.cancel()
        raise
    with pytest.raises(JobExecutionError, match="cancelled"):
        job.wait(timeout=120)

    assert registry.entries() == []
    assert list(registry.folder.iterdir()) == []
    again = run("cancel", "commands-cancel")
    assert again.exit_code == 1
    assert "no running job 'commands-cancel'" in again.stderr


def test_savepoint_and_stop_a_running_job(spark, tmp_path, registry):
    """`savepoint` prints the new savepoint's folder; `stop` takes one, waits until the job
    ended FINISHED, and the job is gone from the registry; a finished job is not found."""
    job = paced_word_count(tmp_path, 400_000, 2_000).execute_async("commands-stop")
    try:
        assert job.wait_for_completed_checkpoints(1, timeout=120)
        job_id = job.get_job_id()

        taken = run("savepoint", "commands-stop", "--dir", str(tmp_path / "savepoints"))
        assert taken.exit_code == 0, taken.output
        savepoint = Path(taken.stdout.strip().removeprefix("file://"))
        assert savepoint.parent == tmp_path / "savepoints"
        assert savepoint.name.startswith(f"savepoint-{job_id[:6]}-")
        assert (savepoint / "_metadata").is_file()

        stopped = run("stop", job_id[:10], "--savepoint-dir", str(tmp_path / "final"))
        assert stopped.exit_code == 0, stopped.output
        final = Path(stopped.stdout.strip().removeprefix("file://"))
        assert (final / "_metadata").is_file()
        assert "ended" in stopped.stderr
    except BaseException:
        job.cancel()
        raise
    job.wait(timeout=120)  # FINISHED: no error

    assert registry.entries() == []
    finished = run("savepoint", job_id)
    assert finished.exit_code == 1
    assert f"no running job '{job_id}'" in finished.stderr
