"""Throughput of stateless Nexmark-like steps on Arrow batches against Python functions, p2.

    python benchmarks/columnar.py [--records N] [--copies C] [--repeat R] [--only NAME ...]

Writes a Parquet file of N bid-like rows (auction, bidder, price, channel, url,
date_time, extra) and links it C times into one folder (C x N events: long runs for
checkpoint costs without the memory to write them), then runs each pipeline at
parallelism 2 from a `ParquetSource` (event time from the date_time column, 4 s
out-of-orderness) to a `DiscardingSink` and prints
events/s (time from all tasks running to the job's end, so Spark start-up and
deployment are excluded):

- q0/q1/q2 with `map_batches` (projection, price * 0.908, auction % 123 == 0): source,
  step and sink chain into one task per subtask, so the Arrow data reaches the sink
  without becoming Python rows or crossing a channel;
- the same with Python `map`/`filter` on the rows (dicts, made by the default converter);
- q1 with `map_batches` and 1 s exactly-once checkpoints;
- `key_by("auction")` between two `map_batches` (Arrow frames routed by a hashed column).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from barrierflow import Duration, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.discarding import DiscardingSink
from barrierflow.connectors.files import ParquetSource


def write_bids(path: str, records: int) -> None:
    """Bid-like rows in Nexmark's shape, a row group per 128k rows."""
    rng = np.random.default_rng(42)
    base = 1_700_000_000_000
    channels = np.array(["Google", "Facebook", "Baidu", "Apple", "channel-1234"])
    table = pa.table(
        {
            "auction": rng.integers(1_000, 60_000, records),
            "bidder": rng.integers(1_000, 200_000, records),
            "price": rng.integers(100, 10_000_000, records),
            "channel": pa.array(channels[rng.integers(0, len(channels), records)]),
            "url": pa.array(["https://www.nexmark.com/abc/item.htm?query=1"] * records),
            "date_time": base + np.arange(records, dtype=np.int64) // 10,
            "extra": pa.array(["x" * 20] * records),
        }
    )
    pq.write_table(table, path, row_group_size=128 * 1024)


def q0(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.select(["auction", "bidder", "price", "date_time", "extra"])


def q1(batch: pa.RecordBatch) -> pa.RecordBatch:
    dollars = pc.multiply(batch["price"], 0.908)
    return batch.set_column(batch.schema.get_field_index("price"), "price", dollars)


def q2(batch: pa.RecordBatch) -> pa.RecordBatch:
    kept = batch.filter(pc.equal(pc.remainder(batch["auction"], 123), 0))
    return kept.select(["auction", "price", "_timestamp"])  # rows keep their event time


def q1_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "price": row["price"] * 0.908}


def q2_row(row: dict[str, Any]) -> bool:
    return row["auction"] % 123 == 0


def q2_project(row: dict[str, Any]) -> dict[str, Any]:
    return {"auction": row["auction"], "price": row["price"]}


def pipelines() -> dict[str, tuple[Callable[[Any], Any], int | None]]:
    """name -> (what follows the source, checkpoint interval or None)."""
    return {
        "q0 map_batches": (lambda s: s.map_batches(q0), None),
        "q0 python map": (
            lambda s: s.map(lambda r: {k: r[k] for k in ("auction", "bidder", "price")}),
            None,
        ),
        "q1 map_batches": (lambda s: s.map_batches(q1), None),
        "q1 python map": (lambda s: s.map(q1_row), None),
        "q2 map_batches": (lambda s: s.map_batches(q2), None),
        "q2 python filter": (lambda s: s.filter(q2_row).map(q2_project), None),
        "q1 map_batches, 1 s checkpoints": (lambda s: s.map_batches(q1), 1000),
        "key_by column, map_batches": (
            lambda s: s.map_batches(q2).key_by("auction").map_batches(q1),
            None,
        ),
    }


def run_once(path: str, build: Callable[[Any], Any], checkpoint_ms: int | None, workdir: str):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    if checkpoint_ms:
        env.enable_checkpointing(checkpoint_ms)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_seconds(4)
    ).with_timestamp_column("date_time")
    source = env.from_source(ParquetSource(path), strategy, "bids")
    build(source).sink_to(DiscardingSink())
    job = env.execute_async("bench-columnar")
    if not job.wait_until_running(timeout=120):
        raise SystemExit(f"job did not start: {job.get_job_status()}")
    started = time.monotonic()
    result = job.wait()
    return time.monotonic() - started, result.checkpoints


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="run only pipelines whose name has one of these")
    args = parser.parse_args()
    obtain_spark(None, 4)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    events = args.records * args.copies
    print(f"Parquet source -> step -> DiscardingSink, parallelism 2, {events:,} bids")
    data_dir = tempfile.mkdtemp(prefix="barrierflow-bench-bids-")
    path = os.path.join(data_dir, "bids")
    try:
        os.mkdir(path)
        write_bids(os.path.join(path, "bids-0.parquet"), args.records)
        for copy in range(1, args.copies):
            os.link(
                os.path.join(path, "bids-0.parquet"), os.path.join(path, f"bids-{copy}.parquet")
            )
        for name, (build, interval) in pipelines().items():
            if args.only and not any(word in name for word in args.only):
                continue
            rates, checkpoints = [], []
            for _ in range(args.repeat):
                workdir = tempfile.mkdtemp(prefix="barrierflow-bench-")
                try:
                    elapsed, done = run_once(path, build, interval, workdir)
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                rates.append(events / elapsed)
                checkpoints.extend(c for c in done if not c.is_final)
            line = (
                f"{name:>34}: {statistics.median(rates):>11,.0f} events/s "
                f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})"
            )
            if checkpoints:
                line += f", {len(checkpoints)} checkpoints"
            print(line, flush=True)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
