"""Savepoints of running jobs on Spark: a savepoint taken while a word count runs, a stop with
savepoint (committed output ends exactly at the savepoint), a stop --drain that fires the
open event-time windows, and what a cancel leaves of the checkpoints."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from barrierflow import (
    Duration,
    ExternalizedCheckpointRetention,
    StreamExecutionEnvironment,
    WatermarkStrategy,
    _fs,
)
from barrierflow.checkpoint.files import read_checkpoint_file
from barrierflow.checkpoint.storage import METADATA_KIND
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.errors import JobExecutionError
from barrierflow.state.operator_state import decode_operator_state
from barrierflow.window import TumblingEventTimeWindows

from .conftest import read_rows
from .jobs import DEPLOY_S, paced_word_count, running_count_rows, word_of

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host


def savepoint_metadata(location: str) -> dict:
    folder = _fs.Location(location)
    metadata, _ = read_checkpoint_file(folder.child("_metadata"), METADATA_KIND)
    return metadata


def source_positions(location: str, source_name: str) -> dict[str, int]:
    """The next index of every split of the generator source `source_name` in a savepoint."""
    metadata = savepoint_metadata(location)
    folder, reader = _fs.Location(location), SubtaskStateReader()
    positions: dict[str, int] = {}
    for operator in metadata["operators"].values():
        if operator["name"] != source_name:
            continue
        for entry in operator["subtasks"]:
            if entry["operator"] is not None:
                data = reader.slice(folder.child(entry["file"]).uri, *entry["operator"])
                positions.update(decode_operator_state(data) or {})
    assert positions, f"no position of {source_name} in {location}"
    return positions


def read_indexes(positions: dict[str, int]) -> list[int]:
    """The indexes a generator source with these split positions has read (split k of n
    makes k, k + n, k + 2n, ...)."""
    indexes = []
    for split_id, position in positions.items():
        k, n = (int(part) for part in split_id.split("-of-"))
        indexes.extend(range(k, position, n))
    return indexes


def test_a_savepoint_of_a_running_job_then_a_stop_with_savepoint(spark, tmp_path):
    job = paced_word_count(tmp_path, None, 3000).execute_async("savepoints")
    assert job.wait_for_completed_checkpoints(1, timeout=DEPLOY_S)

    taken = job.trigger_savepoint(str(tmp_path / "savepoints")).result()
    folder = Path(_fs.Location(taken).path)
    assert folder.parent == tmp_path / "savepoints"
    assert folder.name.startswith(f"savepoint-{job.get_job_id()[:6]}-")
    metadata = savepoint_metadata(taken)
    assert metadata["is_savepoint"] and not metadata["is_final"]
    state_files = {e["file"] for op in metadata["operators"].values() for e in op["subtasks"]}
    assert state_files and all((folder / name).is_file() for name in state_files)
    assert job.get_job_status() == "RUNNING"

    stopped = job.stop_with_savepoint(False, str(tmp_path / "savepoints"), timeout=120).result()
    assert job.get_job_status() == "FINISHED"
    job.wait(timeout=60)
    final = savepoint_metadata(stopped)
    assert final["is_savepoint"] and final["is_final"]
    assert {p.name for p in (tmp_path / "savepoints").iterdir()} == {
        folder.name,
        Path(_fs.Location(stopped).path).name,
    }
    # The committed output ends exactly at the savepoint: the running counts of precisely
    # the records its source positions say were read, each once.
    read = read_indexes(source_positions(stopped, "words"))
    assert read
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in read)


def test_stop_with_drain_fires_every_open_event_time_window(spark, tmp_path):
    # One split: the records read are exactly 0..N-1, record i at event time i * 10 ms. The
    # watermark trails by 5 s, so at the stop five 1 s windows are still open; draining
    # advances event time to the end and they fire before the final savepoint.
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_seconds(5)
    ).with_timestamp_assigner(lambda i, _: i * 10)
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, None, records_per_second=1000, num_splits=1),
            strategy,
            "numbers",
        )
        .map(lambda i: [i])
        .key_by(lambda indexes: indexes[0] % 2)
        .window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
        .reduce(lambda a, b: a + b)
        .uid("window")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    job = env.execute_async("stop-drain")
    assert job.wait_for_completed_checkpoints(2, timeout=DEPLOY_S)
    stopped = job.stop_with_savepoint(True, str(tmp_path / "savepoints"), timeout=120).result()
    job.wait(timeout=60)
    assert savepoint_metadata(stopped)["is_final"]

    indexes = Counter(i for row, times in read_rows(tmp_path / "out").items() for i in row * times)
    (read,) = source_positions(stopped, "numbers").values()
    assert read * 10 > 5_000  # (so some windows were open at the stop)
    assert indexes == Counter(range(read))  # every record read is in a fired window, once


@pytest.mark.parametrize(
    "retention",
    [
        ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION,
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION,
    ],
    ids=["delete", "retain"],
)
def test_a_cancel_keeps_or_deletes_the_retained_checkpoints(spark, tmp_path, retention):
    env = paced_word_count(tmp_path, None, 2000)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(retention)
    job = env.execute_async(f"cancel-{retention.name}")
    assert job.wait_for_completed_checkpoints(1, timeout=DEPLOY_S)
    job.cancel()
    with pytest.raises(JobExecutionError, match="cancelled"):
        job.wait(timeout=120)
    job_dir = tmp_path / "checkpoints" / f"cancel-{retention.name}"
    completed = [p for p in job_dir.glob("chk-*") if (p / "_metadata").exists()]
    if retention is ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION:
        assert list(job_dir.glob("chk-*")) == []
    else:
        assert completed
