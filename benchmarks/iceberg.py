"""Per-checkpoint cost of the IcebergSink, its writers and committer driven directly (no
Spark) against the embedded catalog (SQLite) in a temporary folder.

    python benchmarks/iceberg.py [--checkpoints N] [--rows R] [--parallelism P]

For append and upsert tables: P writers each write R rows per checkpoint; timed are one
subtask's pre-commit (Parquet data files and the hand-off manifest, or the staged rows) and
the committer's commit of all P hand-offs in one snapshot. Medians and 90th percentiles
over N checkpoints, and the cost at the end (the history the committer walks grows by a
snapshot per checkpoint).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from typing import Any

import pyarrow as pa

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.iceberg import IcebergSink, warehouse_catalog

SCHEMA = pa.schema([("word", pa.string()), ("n", pa.int64())])


def run(mode: str, checkpoints: int, rows: int, parallelism: int) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="iceberg-bench-")
    keys = ["word"] if mode == "upsert" else []
    sink = IcebergSink.for_table("db.t", warehouse_catalog(folder)).with_schema(
        SCHEMA, identifier_fields=keys
    )
    sink.prepare()
    writers = []
    for subtask in range(parallelism):
        context = SinkContext("bench", subtask, parallelism, 0, "run-0", "bench", lineage="ab12")
        writer = sink._copy().create_writer(context)
        writer.restore([])
        writers.append(writer)
    pre, commit = [], []
    for checkpoint in range(1, checkpoints + 1):
        for subtask, writer in enumerate(writers):
            base = (checkpoint * parallelism + subtask) * rows
            words = (f"w{(base + i) % (rows * 4) if keys else base + i}" for i in range(rows))
            writer.write_batch([{"word": w, "n": checkpoint} for w in words])
            started = time.perf_counter()
            writer.pre_commit(checkpoint)
            pre.append(time.perf_counter() - started)
        started = time.perf_counter()
        for writer in writers:
            writer.commit(checkpoint)
        commit.append(time.perf_counter() - started)
    return {"pre": pre, "commit": commit}


def describe(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    last = statistics.median(times[-5:])
    median = statistics.median(times)
    return f"median {median * 1000:6.1f} ms, p90 {p90 * 1000:6.1f} ms, last 5 {last * 1000:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=40)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    print(f"{platform.node()}: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{args.checkpoints} checkpoints, {args.parallelism} writers x {args.rows} rows each")
    for mode in ("append", "upsert"):
        times = run(mode, args.checkpoints, args.rows, args.parallelism)
        print(f"{mode:7s} pre-commit (one subtask): {describe(times['pre'])}")
        print(f"{mode:7s} commit (one snapshot):    {describe(times['commit'])}")


if __name__ == "__main__":
    main()
