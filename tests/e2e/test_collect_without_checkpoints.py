"""execute_and_collect without checkpointing returns records as they are produced (issue
24): an unbounded job's first records reach the iterator while the job runs, with no
checkpoint ever taken; closing the iterator cancels the job."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource

pytestmark = pytest.mark.spark


def test_an_unbounded_job_without_checkpoints_streams_its_records_to_the_iterator(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    assert not env.get_checkpoint_config().is_checkpointing_enabled()
    source = DataGeneratorSource(lambda i: i, None, records_per_second=200, num_splits=1)
    ticks = env.from_source(source, WatermarkStrategy.no_watermarks(), "ticks")
    with ticks.map(lambda i: i * 10).execute_and_collect("collect-streaming") as records:
        first = list(itertools.islice(records, 25))
        client = records.job_client
        assert client.get_job_status() == "RUNNING"  # the job has not ended: no end flush
        assert client.completed_checkpoints == ()  # and no checkpoint committed them
    assert first == [i * 10 for i in range(25)]  # one split: in order, each once
    assert client.join(60) and client.get_job_status() == "CANCELED"
    assert not Path(records.folder).exists()
