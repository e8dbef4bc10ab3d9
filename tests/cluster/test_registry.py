"""The per-user job registry: register, list, remove, stale entries, permissions, the folder."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from barrierflow.cluster.registry import JobEntry, JobRegistry, default_registry_dir

HOST = "this-host"


def entry(
    job_id: str = "4f1c0ffee", *, pid: int = 100, host: str = HOST, start: int = 1
) -> JobEntry:
    return JobEntry(job_id, f"job-{job_id}", "http://127.0.0.1:8081", "tok", pid, host, start)


def registry(tmp_path: Path, alive: set[int] | None = None) -> JobRegistry:
    alive = {100} if alive is None else alive
    return JobRegistry(tmp_path / "state" / "jobs", host=HOST, is_alive=lambda p: p in alive)


def test_a_registered_job_is_listed_with_every_field(tmp_path):
    jobs = registry(tmp_path)

    jobs.register(entry())

    assert jobs.entries() == [entry()]


def test_an_unregistered_job_is_no_longer_listed(tmp_path):
    jobs = registry(tmp_path)
    jobs.register(entry("a"))
    jobs.register(entry("b"))

    jobs.unregister("a")
    jobs.unregister("a")  # twice: nothing happens

    assert [e.job_id for e in jobs.entries()] == ["b"]


def test_entries_are_listed_oldest_first(tmp_path):
    jobs = registry(tmp_path)
    for job_id, start in [("c", 3), ("a", 2), ("b", 1)]:
        jobs.register(entry(job_id, start=start))

    assert [e.job_id for e in jobs.entries()] == ["b", "a", "c"]


def test_an_entry_whose_process_died_on_this_host_is_ignored_and_removed(tmp_path):
    jobs = registry(tmp_path, alive={100})
    jobs.register(entry("live", pid=100))
    stale = jobs.register(entry("dead", pid=200))

    assert [e.job_id for e in jobs.entries()] == ["live"]
    assert not stale.exists()


def test_an_entry_of_another_host_is_kept_whatever_its_pid(tmp_path):
    jobs = registry(tmp_path, alive=set())
    jobs.register(entry("remote", pid=200, host="elsewhere"))

    assert [e.job_id for e in jobs.entries()] == ["remote"]


def test_the_folder_is_private_and_each_file_readable_by_its_owner_only(tmp_path):
    jobs = registry(tmp_path)

    path = jobs.register(entry())

    assert stat.S_IMODE(jobs.folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["token"] == "tok"


def test_registering_again_replaces_the_entry_and_leaves_no_temporary_file(tmp_path):
    jobs = registry(tmp_path)
    jobs.register(entry())

    jobs.register(JobEntry("4f1c0ffee", "renamed", "http://h:1", "t2", 100, HOST, 5))

    assert [(e.name, e.token) for e in jobs.entries()] == [("renamed", "t2")]
    assert os.listdir(jobs.folder) == ["4f1c0ffee.json"]


def test_files_that_are_not_entries_are_skipped(tmp_path):
    jobs = registry(tmp_path)
    jobs.register(entry())
    (jobs.folder / "broken.json").write_text("{not json")
    (jobs.folder / "future.json").write_text(json.dumps({"version": 99, "job_id": "x"}))
    (jobs.folder / ".tmp-half.json").write_text("{")

    assert [e.job_id for e in jobs.entries()] == ["4f1c0ffee"]


def test_a_missing_folder_lists_no_jobs(tmp_path):
    assert registry(tmp_path).entries() == []


@pytest.mark.parametrize("job_id", ["", "../x", ".hidden"])
def test_a_job_id_cannot_name_a_file_outside_the_folder(tmp_path, job_id):
    with pytest.raises(ValueError, match="not a job id"):
        registry(tmp_path).register(entry(job_id))


def test_the_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("BARRIERFLOW_REGISTRY_DIR", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert default_registry_dir() == tmp_path / ".local" / "state" / "barrierflow" / "jobs"
    monkeypatch.setenv("BARRIERFLOW_REGISTRY_DIR", str(tmp_path / "r"))
    assert JobRegistry.default().folder == tmp_path / "r"


def test_a_live_process_of_this_machine_is_alive_and_a_finished_one_is_not(tmp_path):
    """The default liveness check, against real processes."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    jobs = JobRegistry(tmp_path)
    jobs.register(JobEntry("me", "n", "u", "t", os.getpid(), jobs.host, 1))
    jobs.register(JobEntry("gone", "n", "u", "t", child.pid, jobs.host, 2))

    assert [e.job_id for e in jobs.entries()] == ["me"]
