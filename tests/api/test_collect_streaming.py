"""execute_and_collect without checkpointing (issue 24): `StreamingCollectSink` publishes
each batch the moment its writer gets it, so the iterator sees records while the job runs;
at least once, as Flink's uncheckpointed collect buffer. Driven through its writer, no
Spark; the iterator over a running unbounded job: tests/e2e/test_collect_without_checkpoints.py."""

from __future__ import annotations

import pickle

from barrierflow.api.collect import StreamingCollectSink
from barrierflow.connectors.base import SinkContext


def published(folder) -> list:
    committed = folder / "committed"
    names = sorted(p.name for p in committed.iterdir()) if committed.exists() else []
    return [r for name in names for r in pickle.loads((committed / name).read_bytes())]


def writer(sink, subtask=0, attempt=0):
    return sink.create_writer(SinkContext("collect", subtask, 2, attempt, f"deploy-{attempt}"))


def test_each_batch_is_visible_the_moment_it_is_written_no_checkpoint_needed(tmp_path):
    w = writer(StreamingCollectSink(str(tmp_path)))
    w.restore([])
    assert published(tmp_path) == []
    w.write_batch(["a", "b"])
    assert published(tmp_path) == ["a", "b"]
    w.write_batch([])  # nothing to publish: no file
    w.write_batch(["c"])
    assert published(tmp_path) == ["a", "b", "c"]
    assert len(list((tmp_path / "committed").iterdir())) == 2
    w.pre_commit(1)  # a checkpoint, if one comes, holds nothing back and changes nothing
    w.commit(1)
    assert w.snapshot_state() is None
    assert published(tmp_path) == ["a", "b", "c"]


def test_batches_of_one_writer_read_back_in_the_order_written_past_ten_files(tmp_path):
    w = writer(StreamingCollectSink(str(tmp_path)), subtask=1)
    for n in range(12):
        w.write_batch([n])
    assert published(tmp_path) == list(range(12))


def test_a_restarted_attempt_publishes_its_records_again_at_least_once(tmp_path):
    sink = StreamingCollectSink(str(tmp_path))
    first = writer(sink)
    first.write_batch([1, 2])
    first.abort()  # the task fails; without a checkpoint the attempt starts from scratch
    again = writer(sink, attempt=1)
    again.restore([])
    again.write_batch([1, 2, 3])
    assert sorted(published(tmp_path)) == [1, 1, 2, 2, 3]
