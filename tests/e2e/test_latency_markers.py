"""Latency markers in a real job: with latency tracking every 100 ms, `/metrics` shows the
sink operator's source-to-sink latency percentiles while the job runs, and the job's
committed output is exactly the output of the same job without markers (they never reach
a function or the sink's writer, and never disturb a checkpoint)."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import read_rows
from .jobs import paced_word_count, running_count_rows, word_of

pytestmark = pytest.mark.spark

RECORDS = 2_400
RATE = 600.0
"""About 4 s of input: time for several metrics reports while it runs."""


def latency_samples(url: str) -> dict[tuple[str, str, str], float]:
    """barrierflow_operator_latency_ms samples by (sample name, operator, quantile)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "barrierflow_operator_latency_ms":
            continue
        for sample in family.samples:
            assert sample.labels["source_vertex"] == "0"  # the only source: vertex 0
            key = (sample.name, sample.labels["operator"], sample.labels.get("quantile", ""))
            samples[key] = samples.get(key, 0.0) + sample.value
    return samples


def test_latency_markers_show_the_sinks_latency_and_leave_the_output_alone(
    spark, tmp_path, monkeypatch
):
    monkeypatch.setenv("BARRIERFLOW_REST_PORT", "0")
    env = paced_word_count(tmp_path, RECORDS, RATE)
    env.get_config().set_latency_tracking_interval(100).set_metrics_interval(200)
    job = env.execute_async("latency-markers")
    try:
        assert job.wait_until_running(timeout=60)
        url = job.rest_url
        assert url is not None
        deadline = time.monotonic() + 20
        while True:
            samples = latency_samples(url)
            if samples.get(("barrierflow_operator_latency_ms_count", "Sink", ""), 0) >= 3:
                break
            assert time.monotonic() < deadline, f"no sink latency in 20 s: {samples}"
            time.sleep(0.2)
        assert job.get_job_status() == "RUNNING"  # seen while the job runs
        for quantile in ("0.5", "0.95", "0.99"):
            for operator in ("Map", "Reduce", "Sink"):  # chained or not, each measures
                assert ("barrierflow_operator_latency_ms", operator, quantile) in samples
        assert not any(operator == "words" for _, operator, _ in samples)  # the source
        median = samples[("barrierflow_operator_latency_ms", "Sink", "0.5")]
        assert 0 <= median < 10_000
        result = job.wait(60)
    except BaseException:
        job.cancel()
        raise
    assert result.restarts == 0
    expected = running_count_rows(word_of(i) for i in range(RECORDS))
    assert read_rows(tmp_path / "out") == expected  # what the job writes without markers
