"""A keyed count over the same files, barrierflow next to Spark Structured Streaming, in one run.

    python benchmarks/keyed_count_vs_spark.py [--records N] [--keys K] [--files F] [--repeat R]

All read the same text files (one key per line) and count per key with checkpointing on:

- barrierflow, per record: parallelism 2, 1 s exactly-once checkpoints, the way a PyFlink
  user writes it: `map(key -> (key, 1))`, `key_by`, `reduce` (a running count, one output
  per record, one Python call and one state read and write per record), then a filter
  keeping the counts that are multiples of 1000 in front of an exactly-once file sink;
- barrierflow, batched: the same job written for speed with `process_batches` and a
  `KeyedBatchFunction` (`BatchedCount`): per batch of lines one `Counter` of the keys, one
  `get_many` and one `put_many` of batched value state, and out only the (key, count)
  pairs whose running count crossed a multiple of 1000 - the same rows the per-record
  job's filter lets through;
- Spark Structured Streaming: `groupBy().count()` in update mode, 2 shuffle partitions, a
  checkpoint location and `trigger(availableNow=True)` into the `noop` sink (JVM only).

Times start once the job is running (barrierflow: all tasks deployed; Spark: `start()`
returned) and end when all input is processed. One smaller warm-up run of each (JIT,
query planning, worker start) is not counted. The ratios are each barrierflow job's
events/s over Spark's, medians of `--repeat` rounds, all three run one after the other in
each round.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections import Counter
from typing import Any

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.functions import KeyedBatchFunction
from barrierflow.state import ValueStateDescriptor

EVERY = 1000
"""The sink gets the (key, count) pairs whose count is a multiple of this."""


def write_input(folder: str, records: int, keys: int, files: int) -> None:
    os.makedirs(folder)
    per_file = -(-records // files)
    for f in range(files):
        lines = (
            f"key-{(i * 2654435761) % keys}\n"
            for i in range(f * per_file, min(records, (f + 1) * per_file))
        )
        with open(os.path.join(folder, f"part-{f:03d}.txt"), "w") as out:
            out.writelines(lines)


class BatchedCount(KeyedBatchFunction):
    """A running count per key, a batch at a time; emits `(key, n)` for every multiple `n`
    of EVERY that the key's count passed in this batch (what the per-record job's filter
    keeps)."""

    def open(self, runtime_context: Any) -> None:
        self.counts = runtime_context.get_batch_state(ValueStateDescriptor("count"))

    def process_batch(self, batch: Any, keys: list[Any], ctx: Any) -> list[tuple[str, int]]:
        seen = Counter(keys)
        distinct = list(seen)
        before = self.counts.get_many(distinct)
        after = [(old or 0) + seen[key] for key, old in zip(distinct, before, strict=True)]
        self.counts.put_many(distinct, after)
        out = []
        for key, old, new in zip(distinct, before, after, strict=True):
            for n in range(((old or 0) // EVERY + 1) * EVERY, new + 1, EVERY):
                out.append((key, n))
        return out


def identity(line: str) -> str:
    return line


def barrierflow_rate(folder: str, records: int, workdir: str, batched: bool) -> float:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    lines = env.from_source(FileSource.for_lines(folder), WatermarkStrategy.no_watermarks(), "keys")
    if batched:
        counts = lines.key_by(identity).process_batches(BatchedCount())
    else:
        counts = (
            lines.map(lambda key: (key, 1))
            .key_by(lambda pair: pair[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .filter(lambda pair: pair[1] % EVERY == 0)
        )
    counts.sink_to(FileSink.for_rows(os.path.join(workdir, "out")))
    job = env.execute_async("bench-vs-spark")
    if not job.wait_until_running(timeout=120):
        raise SystemExit(f"job did not start: {job.get_job_status()}")
    started = time.monotonic()
    job.wait()
    return records / (time.monotonic() - started)


def spark_rate(spark: Any, folder: str, records: int, workdir: str) -> float:
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    counts = spark.readStream.text(folder).groupBy("value").count()
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", os.path.join(workdir, "spark-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    started = time.monotonic()
    query.awaitTermination()
    return records / (time.monotonic() - started)


def output_rows(folder: str) -> list[str]:
    """The committed rows of a FileSink's folder (hidden staging folders skipped), sorted."""
    rows: list[str] = []
    for parent, folders, files in os.walk(folder):
        folders[:] = [f for f in folders if not f.startswith((".", "_"))]
        for name in files:
            if name.startswith("part-"):
                with open(os.path.join(parent, name)) as part:
                    rows.extend(part.read().splitlines())
    return sorted(rows)


def _line(label: str, rates: list[float]) -> str:
    runs = ", ".join(f"{r:,.0f}" for r in rates)
    return f"{label:>40}: {statistics.median(rates):>10,.0f} events/s (runs: {runs})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spark = obtain_spark(None, 4)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        f", load average {os.getloadavg()[0]:.1f}"
    )
    print(f"keyed count, parallelism 2, {args.records:,} records, {args.keys:,} keys")
    rates: dict[str, list[float]] = {"per-record": [], "batched": [], "spark": []}
    for run in range(args.repeat + 1):
        warm_up = run == 0
        records = max(args.records // 10, 1000) if warm_up else args.records
        workdir = tempfile.mkdtemp(prefix="barrierflow-vs-spark-")
        try:
            folder = os.path.join(workdir, "in")
            write_input(folder, records, args.keys, args.files)
            round_rates = {}
            for name in ("per-record", "batched"):
                out = os.path.join(workdir, name)
                os.makedirs(out)
                round_rates[name] = barrierflow_rate(folder, records, out, name == "batched")
            round_rates["spark"] = spark_rate(spark, folder, records, workdir)
            per_record, batched = (
                output_rows(os.path.join(workdir, name, "out"))
                for name in ("per-record", "batched")
            )
            if per_record == batched:
                print(f"round {run}: the two barrierflow jobs wrote the same {len(batched)} rows")
            else:
                print(
                    f"WARNING: round {run}: the two barrierflow jobs' outputs differ "
                    f"({len(per_record)} and {len(batched)} rows)"
                )
            if not warm_up:
                for name, rate in round_rates.items():
                    rates[name].append(rate)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    spark_median = statistics.median(rates["spark"])
    print(_line("barrierflow, per record (reduce)", rates["per-record"]))
    print(_line("barrierflow, batched (process_batches)", rates["batched"]))
    print(_line("Spark Structured Streaming", rates["spark"]))
    for name, label in (("per-record", "per record"), ("batched", "batched")):
        ratio = statistics.median(rates[name]) / spark_median
        print(f"{'ratio barrierflow ' + label + ' / Spark':>40}: {ratio:.2f}")


if __name__ == "__main__":
    main()
