"""Metrics of a real job: `/metrics` moves as the job runs, a map function's user counter
appears, and a fast source upstream of a slow map shows backpressure."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.errors import JobExecutionError
from barrierflow.functions import MapFunction

from .jobs import word_of

pytestmark = pytest.mark.spark


class SlowCountingMap(MapFunction):
    """Counts what it maps in a user counter and takes about 0.3 ms a record, far slower than
    an unpaced source."""

    def open(self, runtime_context) -> None:
        self.mapped = runtime_context.get_metrics_group().counter("mapped")

    def map(self, value):
        self.mapped.inc()
        time.sleep(0.0003)
        return value


def scrape(url: str) -> dict[tuple[str, str], float]:
    """Sample values by (sample name, vertex) (summed over subtasks and operators)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    values: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, sample.labels.get("vertex", ""))
            values[key] = values.get(key, 0.0) + sample.value
    return values


def wait_for(
    url: str, condition: Callable[[dict[tuple[str, str], float]], bool], timeout: float = 30
) -> dict[tuple[str, str], float]:
    """The first scrape meeting `condition`, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        values = scrape(url)
        if condition(values):
            return values
        if time.monotonic() > deadline:
            raise AssertionError(f"no scrape met the condition in {timeout} s: {values}")
        time.sleep(0.2)


def test_metrics_of_a_running_job_move_and_show_backpressure(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("BARRIERFLOW_REST_PORT", "0")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    (
        env.from_source(
            DataGeneratorSource(word_of, None), WatermarkStrategy.no_watermarks(), "words"
        )
        .rebalance()  # a channel between the source and the slow map: credit runs out
        .map(SlowCountingMap())
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
    )
    job = env.execute_async("metrics-job")
    try:
        assert job.wait_until_running(timeout=60)
        url = job.rest_url
        assert url is not None
        source, mapper = (v.name for v in job.job_graph.vertices)  # words; Map -> Sink

        def records_in(values: dict) -> float:
            return values.get(("barrierflow_task_records_in_total", mapper), 0.0)

        def mapped(values: dict) -> float:
            return values.get(("barrierflow_user_mapped_total", mapper), 0.0)

        def backpressure(values: dict) -> float:
            name = "barrierflow_task_backpressured_time_ms_per_second"
            return values.get((name, source), 0.0)

        first = wait_for(url, lambda values: records_in(values) > 0)
        wait_for(url, lambda values: records_in(values) > records_in(first))
        counted = wait_for(url, lambda values: mapped(values) > 0)
        assert mapped(counted) == records_in(counted)  # one report holds both
        wait_for(url, lambda values: backpressure(values) > 0)
    finally:
        job.cancel()
        with pytest.raises(JobExecutionError, match="cancelled"):
            job.wait(60)
