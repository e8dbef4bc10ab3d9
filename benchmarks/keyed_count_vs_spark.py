"""A keyed count over the same files, barrierflow next to Spark Structured Streaming, in one run.

    python benchmarks/keyed_count_vs_spark.py [--records N] [--keys K] [--files F] [--repeat R]

Both read the same text files (one key per line) and count per key with
checkpointing on: barrierflow at parallelism 2 with 1 s checkpoints (a running
count, one output per record, exactly-once file sink behind a filter), Spark
Structured Streaming with `groupBy().count()` in update mode, 2 shuffle
partitions, a checkpoint location and `trigger(availableNow=True)` into the
`noop` sink. Times start once the job is running (barrierflow: all tasks
deployed; Spark: `start()` returned) and end when all input is processed. One
smaller warm-up run of each (JIT, query planning, worker start) is not counted.
The ratio is barrierflow's events/s over Spark's.
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
from barrierflow.cluster.spark_session import obtain_spark
from barrierflow.connectors.files import FileSink, FileSource


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


def barrierflow_rate(folder: str, records: int, workdir: str) -> float:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    (
        env.from_source(FileSource.for_lines(folder), WatermarkStrategy.no_watermarks(), "keys")
        .map(lambda key: (key, 1))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .filter(lambda pair: pair[1] % 1000 == 0)
        .sink_to(FileSink.for_rows(os.path.join(workdir, "out")))
    )
    job = env.execute_async("bench-vs-spark")
    if not job.wait_until_running(timeout=120):
        raise SystemExit(f"job did not start: {job.get_job_status()}")
    started = time.monotonic()
    job.wait()
    return records / (time.monotonic() - started)


def spark_rate(spark, folder: str, records: int, workdir: str) -> float:
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
    ours, theirs = [], []
    for run in range(args.repeat + 1):
        warm_up = run == 0
        records = max(args.records // 10, 1000) if warm_up else args.records
        workdir = tempfile.mkdtemp(prefix="barrierflow-vs-spark-")
        try:
            folder = os.path.join(workdir, "in")
            write_input(folder, records, args.keys, args.files)
            ours_rate = barrierflow_rate(folder, records, workdir)
            theirs_rate = spark_rate(spark, folder, records, workdir)
            if not warm_up:
                ours.append(ours_rate)
                theirs.append(theirs_rate)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    ours_median, theirs_median = statistics.median(ours), statistics.median(theirs)
    print(
        f"{'barrierflow':>28}: {ours_median:>10,.0f} events/s "
        f"(runs: {', '.join(f'{r:,.0f}' for r in ours)})"
    )
    print(
        f"{'Spark Structured Streaming':>28}: {theirs_median:>10,.0f} events/s "
        f"(runs: {', '.join(f'{r:,.0f}' for r in theirs)})"
    )
    print(f"{'ratio barrierflow / Spark':>28}: {ours_median / theirs_median:.2f}")


if __name__ == "__main__":
    main()
