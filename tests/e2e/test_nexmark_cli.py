"""`barrierflow nexmark run` as a user runs it: a paced query with checkpoints, its results
written through the FileSink, its figures printed as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from barrierflow.nexmark.generator import GeneratorConfig, generate_events
from barrierflow.nexmark.model import Bid

pytestmark = pytest.mark.spark

EVENTS = 100_000
RATE = 50_000


def test_a_paced_run_writes_the_query_results_and_prints_its_figures(tmp_path):
    out = tmp_path / "out"
    barrierflow = Path(sys.executable).parent / "barrierflow"
    command = [
        str(barrierflow), "nexmark", "run", "--query", "q2", "--events", str(EVENTS),
        "--rate", str(RATE), "--checkpoint-interval", "500", "--output", str(out), "--json",
    ]  # fmt: skip
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        timeout=240,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])

    # q2 over the same events, computed here from the generator alone. A paced run's
    # event times start at the wall clock, which only moves every event alike: q2 keeps
    # no time, so its rows are those of the generator's default base time.
    bids = generate_events(GeneratorConfig(first_event_rate=RATE), EVENTS)
    expected = Counter(
        frozenset({"auction": b.auction, "price": b.price}.items())
        for b in bids
        if type(b) is Bid and b.auction % 123 == 0
    )
    got = Counter(
        frozenset(json.loads(line).items())
        for part in out.glob("part-*")
        for line in part.read_text().splitlines()
    )
    assert got == expected and sum(expected.values()) > 100

    assert figures["query"] == "q2" and figures["events"] == EVENTS
    assert figures["parallelism"] == 2 and figures["restarts"] == 0
    assert figures["events_per_second"] > 0 and figures["wall_seconds"] > figures["seconds"]
    # Paced: every result measured, event time being the wall clock at which events were made.
    latency = figures["latency_ms"]
    assert latency["count"] == sum(expected.values())
    assert 0 <= latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    assert figures["checkpoints"]["completed"] >= 1
    assert figures["checkpoints"]["duration_ms"]["max"] > 0
