"""What barrierflow writes on the driver's disk is its owner's only, whatever the umask
(issue 21: logs and checkpoint files took the default umask): the job's log folder 0700 and
its files 0600, a local checkpoint folder 0700."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.cluster.executor.task_logs import JobLogs
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime import task_messages as msg


@pytest.fixture
def open_umask():
    """The most permissive umask: every mode below is barrierflow's own choice."""
    before = os.umask(0)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_job_log_folder_is_0700_and_its_files_0600(tmp_path, open_umask):
    folder = tmp_path / "logs" / "job-1"
    logs = JobLogs(folder, (SubtaskId(0, 0),))
    try:
        record = msg.TaskLogRecord(0, "WARNING", "t", "words", 0)
        logs.write(msg.TaskLogRecords(0, 0, (record,)))
    finally:
        logs.close()
    assert {p.name: oct(mode(p)) for p in (tmp_path / "logs", folder)} == {
        "logs": "0o700",
        "job-1": "0o700",
    }
    files = {p.name: oct(mode(p)) for p in folder.iterdir()}
    assert files == {"jobmaster.log": "0o600", "spark.log": "0o600", "task-0-0.log": "0o600"}


def test_a_local_checkpoint_folder_is_0700(tmp_path, open_umask):
    storage = FileSystemCheckpointStorage(str(tmp_path / "checkpoints"), "my job")
    storage.prepare()
    assert oct(mode(Path(storage.job_dir.path))) == "0o700"
