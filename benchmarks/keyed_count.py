"""Throughput of a keyed running count at parallelism 2, with and without 1 s checkpoints.

    python benchmarks/keyed_count.py [--records N] [--keys K] [--repeat R]

Prints events/s for each configuration (time from all tasks running to the job's
end, so Spark start-up and deployment are excluded) and the duration, size,
synchronous/asynchronous parts, alignment and start delay of the checkpoints
(`barrierflow checkpoints` shows them one by one).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink


class KeyOf:
    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, index: int) -> tuple[str, int]:
        return (f"key-{(index * 2654435761) % self.keys}", 1)


def run_once(records: int, keys: int, checkpoint_ms: int | None, workdir: str):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    if checkpoint_ms:
        env.enable_checkpointing(checkpoint_ms)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    (
        env.from_source(
            DataGeneratorSource(KeyOf(keys), records), WatermarkStrategy.no_watermarks(), "gen"
        )
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .filter(lambda t: t[1] % 1000 == 0)  # keep the sink out of the measurement
        .sink_to(FileSink.for_rows(os.path.join(workdir, "out")))
    )
    job = env.execute_async(f"bench-{checkpoint_ms}")
    if not job.wait_until_running(timeout=120):
        raise SystemExit(f"job did not start: {job.get_job_status()}")
    started = time.monotonic()
    result = job.wait()
    elapsed = time.monotonic() - started
    return records / elapsed, result.checkpoints


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    obtain_spark(None, 4)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"keyed running count, parallelism 2, {args.records:,} records, {args.keys:,} keys")
    for label, interval in (("no checkpoints", None), ("1 s checkpoints", 1000)):
        rates, all_checkpoints = [], []
        for _ in range(args.repeat):
            workdir = tempfile.mkdtemp(prefix="barrierflow-bench-")
            try:
                rate, checkpoints = run_once(args.records, args.keys, interval, workdir)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            rates.append(rate)
            all_checkpoints.extend(checkpoints)
        print(
            f"{label:>16}: {statistics.median(rates):>10,.0f} events/s "
            f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})"
        )
        periodic = [c for c in all_checkpoints if not c.is_final]
        if periodic:
            durations = [c.duration_ms for c in periodic]
            print(
                f"{'':>16}  {len(periodic)} periodic checkpoints: duration median "
                f"{statistics.median(durations):.0f} ms, max {max(durations)} ms; state "
                f"{statistics.median(c.state_bytes for c in periodic) / 1024:.0f} KiB; "
                f"sync max {max(c.max_sync_ms for c in periodic):.1f} ms, async max "
                f"{max(c.max_async_ms for c in periodic):.1f} ms, alignment max "
                f"{max(c.max_alignment_ms for c in periodic):.1f} ms, start delay max "
                f"{max(c.max_start_delay_ms for c in periodic):.1f} ms"
            )


if __name__ == "__main__":
    main()
