"""Runs one Nexmark query as a barrierflow job and measures it (`barrierflow nexmark run`).

The figures: events/s from the moment every task runs to the job's end (so Spark's start-up
and the deployment are left out; the whole command's time is reported beside them), the
checkpoints' durations and sizes, and, in a paced run, the end-to-end latency. A paced run
(`events_per_second`) generates each event at its event time on the wall clock, so a
result's timestamp minus the moment it leaves the last operator is the time from the
event's creation by the generator to the result (`latency.LatencyProbe`). Unpaced, events
are made as fast as the job takes them and their event time says nothing of when they were
made, so no latency is reported.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from barrierflow import StreamExecutionEnvironment
from barrierflow._clock import SYSTEM_CLOCK
from barrierflow.connectors.base import Sink
from barrierflow.connectors.discarding import DiscardingSink
from barrierflow.connectors.files import FileSink
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend, HashMapStateBackend
from barrierflow.errors import ConfigurationError
from barrierflow.nexmark.generator import GeneratorConfig
from barrierflow.nexmark.job import events_from_file, events_from_generator
from barrierflow.nexmark.latency import GAUGES, LatencyProbe
from barrierflow.nexmark.queries import query

__all__ = ["RunReport", "RunSettings", "build_job", "run"]

SINK_UID = "nexmark-sink"
PROBE_UID = "nexmark-latency"
"""The uid of the latency probe, the last operator before the sink in a paced run."""
START_ALLOWANCE_MS = 15_000
"""A paced run's event 0 is due this long after the job is built: time for Spark to start
the tasks, so no event is late before the job runs (the tasks wait for it instead)."""


STATE_BACKENDS = {"hashmap": HashMapStateBackend, "rocksdb": EmbeddedRocksDBStateBackend}
"""`--state-backend`'s choices."""


@dataclass(frozen=True)
class RunSettings:
    """What `barrierflow nexmark run` was asked for."""

    query: str
    events: int | None = None
    """Generate this many events (exclusive with `input_path`)."""
    input_path: str | None = None
    """Read the events of this file (JSON Lines or Parquet, flink-nexmark's table shape)."""
    parallelism: int = 2
    checkpoint_interval_ms: int | None = None
    """None: no checkpoints. Checkpoints are exactly-once (aligned)."""
    output: str | None = None
    """A folder: the results go there as JSON Lines part files through the FileSink."""
    seed: int = 0
    events_per_second: int | None = None
    """Pace the generator at this rate (real time) and measure latency; None: as fast as
    the job takes events."""
    checkpoint_dir: str | None = None
    """Where checkpoints go; None: a temporary folder removed afterwards."""
    state_backend: str = "hashmap"
    """Where keyed state lives: "hashmap" (Python dicts) or "rocksdb" (an embedded RocksDB
    per subtask, default settings)."""
    changelog: bool = False
    """The hashmap backend's changelog checkpoints (`enable_changelog_state_backend`): each
    checkpoint writes what changed since the last one, a new base now and then."""

    def __post_init__(self) -> None:
        query(self.query)  # an unknown name fails here, naming the known ones
        if (self.events is None) == (self.input_path is None):
            raise ConfigurationError("give either a number of events to generate or an input file")
        if self.events is not None and self.events < 1:
            raise ConfigurationError(f"the number of events must be at least 1, got {self.events}")
        if self.input_path is not None and not Path(self.input_path).is_file():
            raise ConfigurationError(f"no events file at {self.input_path}")
        if self.parallelism < 1:
            raise ConfigurationError(f"parallelism must be at least 1, got {self.parallelism}")
        if self.checkpoint_interval_ms is not None and self.checkpoint_interval_ms < 10:
            raise ConfigurationError(
                f"the checkpoint interval must be at least 10 ms, got {self.checkpoint_interval_ms}"
            )
        if self.events_per_second is not None and self.input_path is not None:
            raise ConfigurationError("a rate paces the generator; it cannot pace an input file")
        if self.state_backend not in STATE_BACKENDS:
            raise ConfigurationError(
                f"unknown state backend {self.state_backend!r}; known: {', '.join(STATE_BACKENDS)}"
            )
        if self.changelog and self.state_backend != "hashmap":
            raise ConfigurationError(
                f"changelog checkpoints are the hashmap backend's; {self.state_backend} has "
                "incremental checkpoints of its own"
            )


@dataclass(frozen=True)
class RunReport:
    """The figures of one run; `as_json()` is what `--json` prints."""

    query: str
    events: int
    parallelism: int
    checkpoint_interval_ms: int | None
    seconds: float
    """From every task running to the job's end."""
    events_per_second: float
    wall_seconds: float
    """The whole run, Spark session and deployment included."""
    latency_ms: dict[str, float] | None
    """count, p50, p95, p99, max of the results' latency in a paced run (for each figure the
    worst subtask's); None unpaced."""
    checkpoints: dict[str, Any]
    restarts: int
    state_backend: str = "hashmap"
    changelog: bool = False

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """What the command prints without `--json`."""
        lines = [
            f"{self.query}: {self.events:,} events in {self.seconds:.2f} s at parallelism "
            f"{self.parallelism}: {self.events_per_second:,.0f} events/s "
            f"({self.wall_seconds:.1f} s with start-up)"
        ]
        if self.latency_ms is not None:
            lat = self.latency_ms
            lines.append(
                f"latency (event created -> result emitted): p50 {lat['p50']:.1f} ms, "
                f"p95 {lat['p95']:.1f} ms, p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms"
            )
        checkpoints = self.checkpoints
        if self.checkpoint_interval_ms is None:
            lines.append("checkpoints: off (only the final one, at the end of the input)")
        elif checkpoints["completed"]:
            duration, size = checkpoints["duration_ms"], checkpoints["size_bytes"]
            lines.append(
                f"checkpoints: {checkpoints['completed']} completed every "
                f"{self.checkpoint_interval_ms} ms, duration p50 {duration['p50']:.0f} ms / max "
                f"{duration['max']:.0f} ms, size p50 {size['p50']:,.0f} B / max {size['max']:,} B"
            )
            uploaded = checkpoints.get("checkpointed_bytes")
            if uploaded and uploaded != size:  # incremental: less than the whole state uploaded
                lines[-1] += f", uploaded p50 {uploaded['p50']:,.0f} B / max {uploaded['max']:,} B"
            pause = checkpoints.get("sync_ms")
            if pause:  # the longest subtask's synchronous part (the pause at the barrier)
                p50, longest = pause["p50"], pause["max"]
                lines[-1] += f", barrier pause p50 {p50:.1f} ms / max {longest:.1f} ms"
        if self.restarts:
            lines.append(f"restarts: {self.restarts}")
        return lines


def build_job(env: StreamExecutionEnvironment, settings: RunSettings) -> None:
    """Adds the events, the query and a sink (the FileSink, or one that keeps nothing)."""
    if settings.input_path is not None:
        events = events_from_file(env, settings.input_path)
    else:
        assert settings.events is not None
        config = _generator_config(settings)
        start_at = None if settings.events_per_second is None else config.base_time
        events = events_from_generator(
            env, config, settings.events, settings.events_per_second, start_at
        )
    results = query(settings.query).build(events)
    if settings.events_per_second is not None:
        results = results.process(LatencyProbe()).uid(PROBE_UID).name("latency probe")
    sink: Sink = DiscardingSink() if settings.output is None else FileSink.for_rows(settings.output)
    results.sink_to(sink).uid(SINK_UID).name(f"{settings.query} sink")


def run(settings: RunSettings) -> RunReport:
    """Runs the query to the end of its events and measures it."""
    wall_start = time.monotonic()
    scratch = None
    checkpoint_dir = settings.checkpoint_dir
    if checkpoint_dir is None:
        scratch = tempfile.mkdtemp(prefix="barrierflow-nexmark-")
        checkpoint_dir = os.path.join(scratch, "checkpoints")
    try:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(settings.parallelism)
        if settings.checkpoint_interval_ms is not None:
            env.enable_checkpointing(settings.checkpoint_interval_ms)
        env.get_checkpoint_config().set_checkpoint_storage(checkpoint_dir)
        env.set_state_backend(STATE_BACKENDS[settings.state_backend]())
        env.enable_changelog_state_backend(settings.changelog)
        build_job(env, settings)
        job = env.execute_async(f"nexmark-{settings.query}")
        if not job.wait_until_running(timeout=300):
            raise ConfigurationError(f"the job did not start: {job.get_job_status()}")
        started = time.monotonic()
        result = job.wait()
        seconds = time.monotonic() - started
        events = (
            settings.events
            if settings.events is not None
            else count_events(settings.input_path or "")
        )
        return RunReport(
            query=settings.query,
            events=events,
            parallelism=settings.parallelism,
            checkpoint_interval_ms=settings.checkpoint_interval_ms,
            seconds=seconds,
            events_per_second=events / seconds if seconds > 0 else float("inf"),
            wall_seconds=time.monotonic() - wall_start,
            latency_ms=None if settings.events_per_second is None else _latency(job.metrics),
            checkpoints=_checkpoint_figures(result.checkpoints),
            restarts=result.restarts,
            state_backend=settings.state_backend,
            changelog=settings.changelog,
        )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def count_events(path: str) -> int:
    """The number of events in an events file: rows of a Parquet file, lines of JSON Lines."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    count, last = 0, b"\n"
    with open(path, "rb") as file:
        while chunk := file.read(1 << 24):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _generator_config(settings: RunSettings) -> GeneratorConfig:
    """A paced run's event time is the wall clock from START_ALLOWANCE_MS on, at its rate."""
    if settings.events_per_second is None:
        return GeneratorConfig(seed=settings.seed)
    return GeneratorConfig(
        seed=settings.seed,
        first_event_rate=settings.events_per_second,
        base_time=SYSTEM_CLOCK.epoch_millis() + START_ALLOWANCE_MS,
    )


def _latency(metrics: Any) -> dict[str, float] | None:
    """The probe's figures: results measured, and the worst subtask's p50, p95, p99, max."""
    per_subtask = []
    for subtask in metrics.subtasks if metrics is not None else ():
        for operator in subtask.operators:
            if operator.uid == PROBE_UID:
                values = {m.name: m.value for m in operator.user}
                if values.get(GAUGES[0]):
                    per_subtask.append([values.get(name, 0.0) for name in GAUGES])
    if not per_subtask:
        return None
    return {
        "count": sum(figures[0] for figures in per_subtask),
        **{
            key: max(figures[index] for figures in per_subtask)
            for index, key in enumerate(("p50", "p95", "p99", "max"), start=1)
        },
    }


def _checkpoint_figures(checkpoints: list[Any]) -> dict[str, Any]:
    durations = [c.duration_ms for c in checkpoints]
    sizes = [c.state_bytes for c in checkpoints]
    uploaded = [c.checkpointed_bytes for c in checkpoints]
    pauses = [c.max_sync_ms for c in checkpoints]
    if not checkpoints:
        return {
            "completed": 0,
            "duration_ms": None,
            "size_bytes": None,
            "checkpointed_bytes": None,
            "sync_ms": None,
        }
    return {
        "completed": len(checkpoints),
        "duration_ms": {"p50": statistics.median(durations), "max": max(durations)},
        "size_bytes": {"p50": statistics.median(sizes), "max": max(sizes)},
        "checkpointed_bytes": {"p50": statistics.median(uploaded), "max": max(uploaded)},
        "sync_ms": {"p50": statistics.median(pauses), "max": max(pauses)},
    }
