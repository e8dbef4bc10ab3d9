"""Checkpoints and sink output on an S3-compatible server (moto, started by the tests): a
failure mid-run recovers from the checkpoint in the bucket and the output read back from
the bucket equals a failure-free run's, exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from barrierflow import StreamExecutionEnvironment, _fs
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.connectors.files import FileSink

from .jobs import (
    generated_words,
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = pytest.mark.spark

RECORDS = 12_000


def word_count_on(folder: str, failed: Path) -> tuple[StreamExecutionEnvironment, FileSink]:
    """The running count on the bucket; its second half of input waits for `failed`."""
    env = recovering_environment(_fs.location(folder).child("chk").uri)
    sink = FileSink.for_rows(_fs.location(folder).child("out").uri)
    words = generated_words(env, RECORDS, 4000, gate=failed)
    running_counts(words).sink_to(sink).uid("sink")
    return env, sink


def test_a_job_on_an_object_store_recovers_exactly_once(spark, s3_server, tmp_path):
    folder = s3_server.fresh_uri("job")
    env, sink = word_count_on(folder, tmp_path / "failed")
    job = env.execute_async("on-s3")
    assert job.wait_for_completed_checkpoints(2, timeout=120)  # deploying on a busy machine
    counting = next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)
    job.inject_failure("executor", counting, 1)
    wait_for_attempt(job, 1, timeout=60)
    (tmp_path / "failed").touch()  # the rest of the input runs at full pace
    result = job.wait(timeout=120)

    assert result.restarts >= 1
    rows = Counter(tuple(row) for row in sink.committed_output())
    assert rows == running_count_rows(word_of(i) for i in range(RECORDS))
    storage = FileSystemCheckpointStorage(_fs.location(folder).child("chk").uri, "on-s3")
    assert storage.completed_checkpoint_ids()  # the checkpoints live in the bucket
    assert not _fs.list_files_recursive(_fs.location(folder).child("out", ".staging"))
