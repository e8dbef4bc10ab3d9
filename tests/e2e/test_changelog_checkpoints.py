"""Changelog checkpoints of the heap backend on Spark (issue 22): the keyed running count
with `env.enable_changelog_state_backend(True)`, two retained checkpoints and a killed
task. The output is exactly that of a failure-free run; the newest checkpoint's keyed
sections are changelog manifests; every file of the job's `shared/` is referenced by a
retained checkpoint and every referenced file exists with its recorded size."""

from __future__ import annotations

from pathlib import Path

import pytest

from barrierflow import _fs
from barrierflow.checkpoint.files import read_checkpoint_file
from barrierflow.checkpoint.metadata import shared_files
from barrierflow.checkpoint.storage import METADATA_KIND, load_metadata
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.connectors.files import FileSink
from barrierflow.state.rocksdb_encoding import section_kind

from .conftest import read_rows
from .jobs import (
    generated_words,
    recovering_environment,
    running_count_rows,
    running_counts,
    word_of,
)

pytestmark = pytest.mark.spark

RECORDS = 12_000
JOB = "changelog-kill"


def test_the_word_count_with_changelog_checkpoints_stays_exactly_once_through_a_killed_task(
    spark, tmp_path: Path
) -> None:
    env = recovering_environment(tmp_path / "checkpoints")
    env.get_checkpoint_config().set_max_retained_checkpoints(2)
    env.enable_changelog_state_backend(True)
    running_counts(generated_words(env, RECORDS, 3000)).sink_to(
        FileSink.for_rows(str(tmp_path / "out"))
    ).uid("sink")
    job = env.execute_async(JOB)
    assert job.wait_for_completed_checkpoints(3, timeout=120)
    counting = next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)
    job.kill_task_process(counting, 1)
    result = job.wait(timeout=240)

    assert result.restarts >= 1 and job.restored_from is not None
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(RECORDS))
    job_dir = tmp_path / "checkpoints" / JOB
    newest = max(job_dir.glob("chk-*/_metadata"), key=lambda p: p.stat().st_mtime).parent
    location = _fs.location(str(newest))
    metadata, _ = read_checkpoint_file(location.child("_metadata"), METADATA_KIND)
    reader = SubtaskStateReader()
    kinds = {
        section_kind(reader.slice(location.child(entry["file"]).uri, *entry["keyed"]))
        for entry in metadata["operators"]["count"]["subtasks"]
        if entry["keyed"] is not None
    }
    assert kinds == {"heap-changelog"}
    present = {f"shared/{p.name}" for p in (job_dir / "shared").glob("*")}
    referenced: dict[str, int] = {}
    for metadata_file in job_dir.glob("chk-*/_metadata"):
        referenced.update(shared_files(load_metadata(_fs.location(str(metadata_file.parent)))))
    assert referenced and present == set(referenced)
    for name, size in referenced.items():
        assert (job_dir / name).stat().st_size == size
