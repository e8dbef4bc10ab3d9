"""The state backend a job chooses, on Spark: the keyed running count on the on-disk
backend (EmbeddedRocksDBStateBackend) through a killed task, and a job switched from the
heap backend to RocksDB through a savepoint (issue 22). Both must commit exactly the output
of a failure-free, unswitched run: the running counts of every record, each once."""

from __future__ import annotations

from pathlib import Path

import pytest

from barrierflow import EmbeddedRocksDBStateBackend, HashMapStateBackend, _envelope, _fs
from barrierflow.checkpoint.files import read_checkpoint_file
from barrierflow.checkpoint.storage import METADATA_KIND
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.connectors.files import FileSink
from barrierflow.errors import StateRestoreError

from .conftest import read_rows
from .jobs import (
    DEPLOY_S,
    generated_words,
    recovering_environment,
    running_count_rows,
    running_counts,
    word_of,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host


def word_count(tmp_path: Path, records: int, rate: float | None, backend):
    """The keyed running count of `records` words on `backend`, into <tmp_path>/out."""
    env = recovering_environment(tmp_path / "checkpoints")
    env.set_state_backend(backend)
    running_counts(generated_words(env, records, rate)).sink_to(
        FileSink.for_rows(str(tmp_path / "out"))
    ).uid("sink")
    return env


def counting_vertex(job) -> int:
    return next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)


def keyed_section_kinds(folder: str, uid: str = "count") -> set[str]:
    """The envelope kinds of the keyed sections operator `uid` has in a checkpoint or
    savepoint folder ("keyed-state": canonical; "rocksdb-keyed-state": native)."""
    location = _fs.Location(folder)
    metadata, _ = read_checkpoint_file(location.child("_metadata"), METADATA_KIND)
    reader, kinds = SubtaskStateReader(), set()
    for entry in metadata["operators"][uid]["subtasks"]:
        if entry["keyed"] is not None:
            data = reader.slice(location.child(entry["file"]).uri, *entry["keyed"])
            kinds.add(envelope_kind(data))
    return kinds


def newest_checkpoint(tmp_path: Path) -> Path:
    """The folder of the newest completed checkpoint below <tmp_path>/checkpoints."""
    newest = max((tmp_path / "checkpoints").rglob("_metadata"), key=lambda p: p.stat().st_mtime)
    return newest.parent


def envelope_kind(data: bytes) -> str:
    for kind in ("keyed-state", "rocksdb-keyed-state"):
        try:
            _envelope.decode(data, kind)
        except StateRestoreError:
            continue
        return kind
    raise AssertionError(f"a keyed section of no known kind: {bytes(data[:16])!r}")


def test_the_word_count_on_rocksdb_stays_exactly_once_through_a_killed_task(spark, tmp_path):
    records = 12_000
    backend = EmbeddedRocksDBStateBackend(local_dir=str(tmp_path / "local"))
    job = word_count(tmp_path, records, 4000, backend).execute_async("rocksdb-kill")
    assert job.wait_for_completed_checkpoints(2, timeout=DEPLOY_S)
    counting = counting_vertex(job)
    job.kill_task_process(counting, 1)
    result = job.wait(timeout=DEPLOY_S)

    assert result.restarts >= 1
    assert job.restored_from is not None  # the respawned task restored RocksDB's files
    assert keyed_section_kinds(str(newest_checkpoint(tmp_path))) == {"rocksdb-keyed-state"}
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))
    # the killed process's databases went with the respawned task's start, the others' at
    # their end: nothing is left on the host's disk
    assert list((tmp_path / "local" / "barrierflow-state").iterdir()) == []


def test_a_job_switches_from_the_heap_to_rocksdb_through_a_savepoint(spark, tmp_path):
    records = 12_000
    first = word_count(tmp_path, records, 3000, HashMapStateBackend()).execute_async("switch")
    assert first.wait_for_completed_checkpoints(1, timeout=DEPLOY_S)
    savepoint = first.stop_with_savepoint(False, str(tmp_path / "savepoints"), timeout=120).result()
    first.wait(timeout=60)
    assert keyed_section_kinds(savepoint) == {"keyed-state"}
    committed_before = sum(read_rows(tmp_path / "out").values())
    assert 0 < committed_before < records  # the second run really takes over mid-way

    env = word_count(tmp_path, records, None, EmbeddedRocksDBStateBackend())
    env.set_savepoint_restore_settings(savepoint)
    second = env.execute_async("switch")
    second.wait(timeout=DEPLOY_S)

    assert second.restored_from is not None
    # its checkpoints hold RocksDB's native files: the job runs on the backend it switched to
    assert keyed_section_kinds(str(newest_checkpoint(tmp_path))) == {"rocksdb-keyed-state"}
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))
