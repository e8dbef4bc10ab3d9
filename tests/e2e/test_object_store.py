"""Checkpoints and sink output on an S3-compatible server (moto, started by the tests): a
failure mid-run recovers from the checkpoint in the bucket and the output read back from
the bucket equals a failure-free run's, exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy, _fs
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

from .jobs import running_count_rows, word_of

pytestmark = pytest.mark.spark

RECORDS = 12_000


def word_count_on(folder: str) -> tuple[StreamExecutionEnvironment, FileSink]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(_fs.location(folder).child("chk").uri)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    sink = FileSink.for_rows(_fs.location(folder).child("out").uri)
    (
        env.from_source(
            DataGeneratorSource(word_of, RECORDS, records_per_second=4000),
            WatermarkStrategy.no_watermarks(),
            "words",
        )
        .map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(sink)
        .uid("sink")
    )
    return env, sink


def test_a_job_on_an_object_store_recovers_exactly_once(spark, s3_server):
    folder = s3_server.fresh_uri("job")
    env, sink = word_count_on(folder)
    job = env.execute_async("on-s3")
    assert job.wait_for_completed_checkpoints(2, timeout=60)
    counting = next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)
    job.inject_failure("executor", counting, 1)
    result = job.wait(timeout=120)

    assert result.restarts >= 1
    rows = Counter(tuple(row) for row in sink.committed_output())
    assert rows == running_count_rows(word_of(i) for i in range(RECORDS))
    storage = FileSystemCheckpointStorage(_fs.location(folder).child("chk").uri, "on-s3")
    assert storage.completed_checkpoint_ids()  # the checkpoints live in the bucket
    assert not _fs.list_files_recursive(_fs.location(folder).child("out", ".staging"))
