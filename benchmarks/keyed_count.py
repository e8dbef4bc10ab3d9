"""Throughput of a keyed running count at parallelism 2, with and without 1 s checkpoints.

    python benchmarks/keyed_count.py [--records N] [--keys K] [--repeat R]
        [--backends hashmap,changelog,rocksdb] [--keys-drawn cycle|zipf]
        [--write-cache-entries E]
        [--intervals 0,1000] [--floor]

Backends: `hashmap` (full checkpoints), `changelog` (the hashmap backend with changelog
checkpoints, `env.enable_changelog_state_backend(True)`: a checkpoint uploads the keys
changed since the last one), `rocksdb`.

Keys: `cycle` visits the K keys in a fixed scrambled cycle (every key equally often, the
worst case for any cache smaller than the key set); `zipf` draws key rank r with
probability about 1/(r+1) (a log-uniform rank: `int((K+1) ** u) - 1` for a scrambled
u in [0, 1)), so a few keys are hot and most are rare. `--write-cache-entries` is the
on-disk backend's write-back cache per keyed operator and subtask (its default otherwise);
the output names it.

`--floor` prints only what RocksDB itself costs per record (rocksdict multi-get and
batched put with the backend's options) beside a dict, without Spark.

Prints events/s for each configuration (time from all tasks running to the job's
end, so Spark start-up and deployment are excluded), the CPU seconds the task processes
spent per million records (user + system time of the Python processes under Spark's JVM,
RocksDB's background threads included, from the job's submission to its end: load barely
moves it, so on a busy machine it is the figure to compare), and the duration, size,
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

from barrierflow import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink


class KeyOf:
    """Record `index` -> (key, 1), the keys visited in a fixed scrambled cycle."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, index: int) -> tuple[str, int]:
        return (f"key-{(index * 2654435761) % self.keys}", 1)


class ZipfKeyOf:
    """Record `index` -> (key, 1), key rank r drawn with probability about 1/(r+1): a
    log-uniform rank from a scrambled uniform u, deterministic per index."""

    def __init__(self, keys: int) -> None:
        self.base = keys + 1

    def __call__(self, index: int) -> tuple[str, int]:
        u = ((index * 2654435761) & 0xFFFFFFFF) / 4294967296.0
        return (f"key-{int(self.base**u) - 1}", 1)


def backend_for(name: str, write_cache_entries: int | None):
    """The state backend named `name` (`hashmap`, `changelog` or `rocksdb`)."""
    if name in ("hashmap", "changelog"):
        return HashMapStateBackend()
    if write_cache_entries is None:
        return EmbeddedRocksDBStateBackend()
    return EmbeddedRocksDBStateBackend(write_cache_entries=write_cache_entries)


def task_processes_cpu() -> float:
    """CPU seconds (user + system, their reaped children's included) of every Python
    process descending from this one: Spark's Python workers and daemon under its JVM."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            if not child.name().startswith("python"):
                continue
            times = child.cpu_times()
        except psutil.Error:  # it ended meanwhile
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def run_once(
    records: int,
    keys: int,
    checkpoint_ms: int | None,
    workdir: str,
    backend: str = "hashmap",
    drawn: str = "cycle",
    write_cache_entries: int | None = None,
):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_state_backend(backend_for(backend, write_cache_entries))
    env.enable_changelog_state_backend(backend == "changelog")
    if checkpoint_ms:
        env.enable_checkpointing(checkpoint_ms)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    (
        env.from_source(
            DataGeneratorSource((ZipfKeyOf if drawn == "zipf" else KeyOf)(keys), records),
            WatermarkStrategy.no_watermarks(),
            "gen",
        )
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .filter(lambda t: t[1] % 1000 == 0)  # keep the sink out of the measurement
        .sink_to(FileSink.for_rows(os.path.join(workdir, "out")))
    )
    cpu_before = task_processes_cpu()
    job = env.execute_async(f"bench-{checkpoint_ms}")
    if not job.wait_until_running(timeout=120):
        raise SystemExit(f"job did not start: {job.get_job_status()}")
    started = time.monotonic()
    result = job.wait()
    elapsed = time.monotonic() - started
    cpu = task_processes_cpu() - cpu_before
    return records / elapsed, cpu * 1_000_000 / records, result.checkpoints


def measure(
    records: int,
    keys: int,
    drawn: str,
    backends: list[str],
    intervals: str,
    repeat: int,
    cache: int | None,
) -> None:
    """Run and print one key count and distribution on every backend and interval."""
    print(
        f"keyed running count, parallelism 2, {records:,} records, {keys:,} keys "
        f"({drawn}); rocksdb write_cache_entries "
        f"{'default' if cache is None else f'{cache:,}'}"
    )
    medians: dict[tuple[str, int], float] = {}
    cpu_medians: dict[tuple[str, int], float] = {}
    for interval in (int(i) for i in intervals.split(",")):
        for backend in backends:
            label = f"{backend}, {f'{interval} ms checkpoints' if interval else 'no checkpoints'}"
            rates, cpus, all_checkpoints = [], [], []
            for _ in range(repeat):
                workdir = tempfile.mkdtemp(prefix="barrierflow-bench-")
                try:
                    rate, cpu, checkpoints = run_once(
                        records,
                        keys,
                        interval or None,
                        workdir,
                        backend,
                        drawn,
                        cache,
                    )
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                rates.append(rate)
                cpus.append(cpu)
                all_checkpoints.extend(checkpoints)
            medians[backend, interval] = statistics.median(rates)
            cpu_medians[backend, interval] = statistics.median(cpus)
            print(
                f"{label:>32}: {statistics.median(rates):>10,.0f} events/s "
                f"(runs: {', '.join(f'{r:,.0f}' for r in rates)}); task CPU "
                f"{statistics.median(cpus):.2f} s per million records "
                f"(runs: {', '.join(f'{c:.2f}' for c in cpus)}); load "
                f"{os.getloadavg()[0]:.1f}"
            )
            periodic = [c for c in all_checkpoints if not c.is_final]
            if periodic:
                durations = [c.duration_ms for c in periodic]
                print(
                    f"{'':>32}  {len(periodic)} periodic checkpoints: duration median "
                    f"{statistics.median(durations):.0f} ms, max {max(durations)} ms; state "
                    f"{statistics.median(c.state_bytes for c in periodic) / 1024:.0f} KiB; "
                    f"sync max {max(c.max_sync_ms for c in periodic):.1f} ms, async max "
                    f"{max(c.max_async_ms for c in periodic):.1f} ms, alignment max "
                    f"{max(c.max_alignment_ms for c in periodic):.1f} ms, start delay max "
                    f"{max(c.max_start_delay_ms for c in periodic):.1f} ms"
                )
        if ("hashmap", interval) in medians and ("rocksdb", interval) in medians:
            ratio = medians["rocksdb", interval] / medians["hashmap", interval]
            by_cpu = cpu_medians["hashmap", interval] / cpu_medians["rocksdb", interval]
            print(
                f"{'ratio rocksdb / hashmap':>32}: {ratio:.2f} events/s, {by_cpu:.2f} by CPU "
                "per record (hashmap's CPU / rocksdb's)"
            )


def floor(keys: int) -> None:
    """Print what RocksDB itself costs per record at `keys` cycling keys, without Spark and
    without the backend's Python layer: one rocksdict multi-get per 100 keys and one
    WriteBatch per 6 250 puts, with the backend's own options, against a dict's get and
    set. The per-record path pays at least the first two for every record whose key
    is not in the write-back cache (at 1 M cycling keys: every record)."""
    from rocksdict import Rdict, WriteBatch

    from barrierflow.state.rocksdb_options import db_options, write_options

    workdir = tempfile.mkdtemp(prefix="barrierflow-bench-floor-")
    try:
        db = Rdict(workdir, db_options(EmbeddedRocksDBStateBackend()))
        db.set_write_options(write_options())
        db_keys = [b"\0\1\0\0" + f"key-{(i * 2654435761) % keys}".encode() for i in range(keys)]
        value = b"\1" + (5).to_bytes(8, "big")

        def put_all() -> None:
            for start in range(0, keys, 6250):
                batch = WriteBatch(raw_mode=True)
                for db_key in db_keys[start : start + 6250]:
                    batch.put(db_key, value)
                db.write(batch)

        put_all()  # every key stored once, as after the first cycle
        started = time.process_time()
        for start in range(0, keys, 100):
            db.get(db_keys[start : start + 100])
        got = time.process_time() - started
        started = time.process_time()
        put_all()
        put = time.process_time() - started
        db.close()
        counts = dict.fromkeys(db_keys, 5)
        started = time.process_time()
        for db_key in db_keys:
            counts[db_key] = counts[db_key] + 1
        heap = time.process_time() - started
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    per = 1_000_000 / keys
    print(
        f"floor at {keys:,} keys, CPU s per million records: rocksdict multi-get "
        f"{got * per:.2f} + batched put {put * per:.2f}, dict get+set {heap * per:.2f}; "
        f"load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--keys", default="10000", help="key counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--backends", default="hashmap", help="hashmap,changelog,rocksdb")
    parser.add_argument("--keys-drawn", default="cycle", help="cycle and/or zipf, comma-separated")
    parser.add_argument("--write-cache-entries", type=int, default=None)
    parser.add_argument("--intervals", default="0,1000", help="checkpoint intervals, ms")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="only print RocksDB's own cost per record at each key count (no Spark)",
    )
    args = parser.parse_args()
    if args.floor:
        for keys in (int(k) for k in args.keys.split(",")):
            floor(keys)
        return
    backends = args.backends.split(",")
    if unknown := set(backends) - {"hashmap", "changelog", "rocksdb"}:
        raise SystemExit(f"unknown backends {sorted(unknown)}: use hashmap, changelog, rocksdb")
    drawn_kinds = args.keys_drawn.split(",")
    if unknown := set(drawn_kinds) - {"cycle", "zipf"}:
        raise SystemExit(f"unknown --keys-drawn {sorted(unknown)}: use cycle and/or zipf")
    obtain_spark(None, 4)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        f", load average {os.getloadavg()[0]:.1f}"
    )
    cache = args.write_cache_entries
    # One small job first: Spark's Python daemon starts (and imports) with the first job,
    # which would otherwise be counted in the first configuration's CPU.
    workdir = tempfile.mkdtemp(prefix="barrierflow-bench-")
    try:
        run_once(20_000, 100, None, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for keys in (int(k) for k in args.keys.split(",")):
        for drawn in drawn_kinds:
            measure(args.records, keys, drawn, backends, args.intervals, args.repeat, cache)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
