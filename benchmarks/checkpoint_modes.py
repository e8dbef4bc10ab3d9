"""Checkpointing modes compared: duration under backpressure, and throughput cost.

    python benchmarks/checkpoint_modes.py [--records N] [--slow-records M] [--repeat R]

1. Backpressure: a fast source (parallelism 2) feeds, over a rebalance, a map that sleeps
   0.2 ms per record in front of a FileSink. Checkpoints every 300 ms, aligned and then
   unaligned; prints the end-to-end duration of the periodic checkpoints (the final
   checkpoint is always aligned and left out) and the in-flight bytes unaligned ones persist.
2. Throughput: a keyed running count at parallelism 2 over N generated records, with no
   checkpoints, exactly-once aligned, at-least-once and unaligned checkpoints every 1 s;
   events/s from all tasks running to the job's end (Spark start-up excluded).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time

from barrierflow import CheckpointingMode, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

MODES = {
    "none": None,
    "exactly-once aligned": (CheckpointingMode.EXACTLY_ONCE, False),
    "at-least-once": (CheckpointingMode.AT_LEAST_ONCE, False),
    "exactly-once unaligned": (CheckpointingMode.EXACTLY_ONCE, True),
}


class SlowIdentity:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, value):
        time.sleep(self.seconds)
        return value


class KeyOf:
    def __call__(self, index: int) -> tuple[str, int]:
        return (f"key-{(index * 2654435761) % 1000}", 1)


def backpressured(records: int, unaligned: bool, workdir: str) -> tuple[list[int], list[int]]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    config.enable_unaligned_checkpoints(unaligned)
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, records, num_splits=2),
            WatermarkStrategy.no_watermarks(),
            "fast",
        )
        .rebalance()
        .map(SlowIdentity(0.0002))
        .sink_to(FileSink.for_rows(os.path.join(workdir, "out")))
    )
    result = env.execute(f"backpressure-{'unaligned' if unaligned else 'aligned'}")
    periodic = [c for c in result.checkpoints if not c.is_final]
    return (
        [c.completion_ms - c.trigger_ms for c in periodic],
        [sum(a.persisted_bytes for a in c.acknowledged) for c in periodic],
    )


def throughput(records: int, mode, workdir: str) -> tuple[float, list[int]]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    if mode is not None:
        env.enable_checkpointing(1000, mode[0])
        env.get_checkpoint_config().enable_unaligned_checkpoints(mode[1])
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    (
        env.from_source(
            DataGeneratorSource(KeyOf(), records), WatermarkStrategy.no_watermarks(), "gen"
        )
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .filter(lambda t: t[1] % 1000 == 0)  # keep the sink out of the measurement
        .sink_to(FileSink.for_rows(os.path.join(workdir, "out")))
    )
    job = env.execute_async("throughput")
    if not job.wait_until_running(timeout=120):
        raise SystemExit(f"job did not start: {job.get_job_status()}")
    started = time.monotonic()
    result = job.wait()
    elapsed = time.monotonic() - started
    return records / elapsed, [c.completion_ms - c.trigger_ms for c in result.checkpoints]


def describe(durations: list[int]) -> str:
    if not durations:
        return "no periodic checkpoint completed"
    return (
        f"{len(durations)} completed, median {statistics.median(durations):.0f} ms, "
        f"min {min(durations)} ms, max {max(durations)} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--slow-records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    obtain_spark("local[8]", 8)
    print(f"# {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("## checkpoint duration under backpressure (0.2 ms/record sink, every 300 ms)")
    for unaligned in (False, True):
        workdir = tempfile.mkdtemp(prefix="bench-bp-")
        try:
            durations, persisted = backpressured(args.slow_records, unaligned, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        name = "unaligned" if unaligned else "aligned  "
        extra = f", in-flight data persisted up to {max(persisted, default=0):,} B"
        print(f"{name}: {describe(durations)}{extra if unaligned else ''}")
    print(f"## throughput, keyed count of {args.records:,} records, checkpoints every 1 s")
    for name, mode in MODES.items():
        rates, durations = [], []
        for _ in range(args.repeat):
            workdir = tempfile.mkdtemp(prefix="bench-modes-")
            try:
                rate, checkpoint_ms = throughput(args.records, mode, workdir)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            rates.append(rate)
            durations.extend(checkpoint_ms)
        line = f"{name:24s} {statistics.median(rates):>10,.0f} events/s"
        if mode is not None:
            line += f"   checkpoints: {describe(durations)}"
        print(line)


if __name__ == "__main__":
    main()
