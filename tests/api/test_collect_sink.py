"""execute_and_collect's CollectSink (issue 24 item 9) driven through the two-phase-commit
writer, no Spark: records appear in the committed folder only when their checkpoint
completes, in checkpoint order, and a failure after a checkpoint's barrier never shows a
record twice or one of the aborted transaction. The iterator over a running job:
tests/e2e/test_pyflink_api.py."""

from __future__ import annotations

import pickle

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.api.collect import CollectSink
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.errors import JobDefinitionError


def committed(folder) -> list:
    names = sorted(p.name for p in (folder / "committed").iterdir())
    return [r for name in names for r in pickle.loads((folder / "committed" / name).read_bytes())]


def writer(sink, attempt=0):
    w = sink.create_writer(SinkContext("collect", 0, 1, attempt, f"deploy-{attempt}"))
    return w


def test_records_are_published_as_their_checkpoints_complete(tmp_path):
    sink = CollectSink(str(tmp_path))
    w = writer(sink)
    w.restore([])
    w.write_batch(["a", "b"])
    w.pre_commit(1)
    w.write_batch(["c"])
    assert committed(tmp_path) == []  # staged at the barrier, not yet visible
    w.pre_commit(2)  # (an empty transaction after it: no file at all)
    w.pre_commit(3)
    w.commit(1)
    assert committed(tmp_path) == ["a", "b"]
    w.commit(3)  # commits every pending transaction up to it, oldest first
    assert committed(tmp_path) == ["a", "b", "c"]


def test_a_failure_shows_neither_a_record_twice_nor_an_aborted_one(tmp_path):
    sink = CollectSink(str(tmp_path))
    w = writer(sink)
    w.restore([])
    w.write_batch([1, 2])
    w.pre_commit(1)
    state = w.snapshot_state()  # checkpoint 1 holds its transaction as pending
    w.write_batch([3])
    w.pre_commit(2)  # checkpoint 2 never completes: the task fails
    w.abort()
    again = writer(sink, attempt=1)
    again.restore([state])  # restored from checkpoint 1: its pending commit is repeated
    again.write_batch([3, 4])  # the replayed record and one more
    again.pre_commit(2)
    again.commit(2)
    assert committed(tmp_path) == [1, 2, 3, 4]


def test_a_bad_limit_is_refused_when_built():
    # (an unbounded stream without checkpoints is collected as it is produced:
    # tests/api/test_collect_streaming.py, tests/e2e/test_collect_without_checkpoints.py)
    env = StreamExecutionEnvironment.get_execution_environment()
    ticks = env.from_source(
        DataGeneratorSource(lambda i: i, None), WatermarkStrategy.no_watermarks(), "ticks"
    )
    with pytest.raises(JobDefinitionError, match="limit must be an int >= 0, got -1"):
        ticks.execute_and_collect(limit=-1)
