"""A job stopped with a savepoint, then run again without `--from-savepoint` (issue 11,
"Retained checkpoints"): the rerun restores the stop's savepoint, the newest snapshot of the
job, not the older retained checkpoint of its folder, so nothing is committed twice."""

from __future__ import annotations

import logging

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy, _fs
from barrierflow.checkpoint.storage import load_metadata
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

from .conftest import read_rows
from .jobs import running_count_rows, word_of

pytestmark = pytest.mark.spark

RECORDS = 12_000


def word_count(tmp_path, rate: float | None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    (
        env.from_source(
            DataGeneratorSource(word_of, RECORDS, records_per_second=rate),
            WatermarkStrategy.no_watermarks(),
            "words",
        )
        .uid("words")
        .map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    return env


def test_a_rerun_after_a_stop_with_savepoint_restores_the_savepoint_and_commits_once(
    spark, tmp_path, caplog
):
    first = word_count(tmp_path, rate=3000).execute_async("rerun-after-stop")
    assert first.wait_for_completed_checkpoints(2, timeout=120)
    stopped = first.stop_with_savepoint(str(tmp_path / "savepoints"), timeout=120)
    first.wait(timeout=60)
    savepoint_id = load_metadata(_fs.Location(stopped))["checkpoint_id"]
    job_dir = tmp_path / "checkpoints" / "rerun-after-stop"
    retained = [int(p.name[4:]) for p in job_dir.glob("chk-*") if (p / "_metadata").exists()]
    assert retained and max(retained) < savepoint_id  # the trap: an older checkpoint is left
    assert 0 < sum(read_rows(tmp_path / "out").values()) < RECORDS

    with caplog.at_level(logging.INFO, logger="barrierflow.cluster"):
        rerun = word_count(tmp_path, rate=None).execute_async("rerun-after-stop")
        rerun.wait(timeout=240)

    # Every running count exactly once: the records between the retained checkpoint and the
    # savepoint were committed by the first run and are not read again.
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(RECORDS))
    assert rerun.restored_from == savepoint_id
    assert f"restoring savepoint {savepoint_id} from {stopped}" in caplog.text
