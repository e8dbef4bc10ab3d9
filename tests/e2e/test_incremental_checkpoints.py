"""Incremental RocksDB checkpoints on Spark (issue 22): the keyed running count with
`enable_incremental_checkpointing`, two retained checkpoints, a killed task, a cancel and a
second run (a new driver) resuming from the folder. After each run, on disk: every file of
the job's `shared/` is referenced by a retained checkpoint and every referenced file exists;
the output is exactly that of a failure-free run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from barrierflow import EmbeddedRocksDBStateBackend, _fs
from barrierflow.checkpoint.metadata import shared_files
from barrierflow.checkpoint.storage import load_metadata
from barrierflow.cli import main
from barrierflow.connectors.files import FileSink

from .conftest import read_rows
from .jobs import (
    generated_words,
    recovering_environment,
    running_count_rows,
    running_counts,
    word_of,
)

pytestmark = pytest.mark.spark

RECORDS = 16_000
JOB = "incremental"


def word_count(tmp_path: Path, rate: float | None):
    env = recovering_environment(tmp_path / "checkpoints")
    env.get_checkpoint_config().set_max_retained_checkpoints(2)
    env.set_state_backend(
        EmbeddedRocksDBStateBackend(
            enable_incremental_checkpointing=True, local_dir=str(tmp_path / "local")
        )
    )
    running_counts(generated_words(env, RECORDS, rate)).sink_to(
        FileSink.for_rows(str(tmp_path / "out"))
    ).uid("sink")
    return env


def shared_state_on_disk(tmp_path: Path) -> tuple[set[str], set[str], dict[str, int]]:
    """(files in shared/, files the checkpoints on disk reference, their recorded sizes)."""
    job_dir = tmp_path / "checkpoints" / JOB
    present = {f"shared/{p.name}" for p in (job_dir / "shared").glob("*")}
    referenced: dict[str, int] = {}
    for metadata_file in job_dir.glob("chk-*/_metadata"):
        metadata = load_metadata(_fs.location(str(metadata_file.parent)))
        referenced.update(shared_files(metadata))
    return present, set(referenced), referenced


def assert_consistent(tmp_path: Path) -> set[str]:
    present, referenced, sizes = shared_state_on_disk(tmp_path)
    assert referenced, "no checkpoint references a shared file: not incremental"
    assert present == referenced, (
        f"missing {sorted(referenced - present)}, unreferenced {sorted(present - referenced)}"
    )
    job_dir = tmp_path / "checkpoints" / JOB
    for name, size in sizes.items():
        assert (job_dir / name).stat().st_size == size
    return present


def test_incremental_checkpoints_keep_exactly_the_shared_files_retained_ones_need(spark, tmp_path):
    first = word_count(tmp_path, 1500).execute_async(JOB)
    assert first.wait_for_completed_checkpoints(2, timeout=120)
    counting = next(v.vertex_id for v in first.job_graph.vertices if "Reduce" in v.name)
    first.kill_task_process(counting, 1)
    assert first.wait_for_completed_checkpoints(5, timeout=120)
    first.cancel("a new driver takes over")
    with pytest.raises(Exception, match="cancelled"):
        first.wait(timeout=60)
    assert first.restored_from is not None
    assert len(list((tmp_path / "checkpoints" / JOB).glob("chk-*/_metadata"))) <= 3
    assert_consistent(tmp_path)
    committed_before = sum(read_rows(tmp_path / "out").values())
    assert 0 < committed_before < RECORDS  # the second run really takes over mid-way

    second = word_count(tmp_path, None).execute_async(JOB)  # resumes from the folder
    result = second.wait(timeout=240)

    assert second.restored_from is not None
    assert result is not None
    assert_consistent(tmp_path)
    expected = running_count_rows(word_of(i) for i in range(RECORDS))
    assert read_rows(tmp_path / "out") == expected
    # the history shows both sizes; some checkpoint uploaded less than its whole state
    shown = CliRunner().invoke(main, ["checkpoints", str(tmp_path / "checkpoints"), JOB, "--json"])
    assert shown.exit_code == 0, shown.output
    completed = [h for h in json.loads(shown.output)["history"] if h["status"] == "COMPLETED"]
    assert all(0 < h["checkpointed_size"] <= h["state_size"] for h in completed)
    assert any(h["checkpointed_size"] < h["state_size"] for h in completed)
