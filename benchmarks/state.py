"""Keyed state backends compared: snapshot pause, checkpoint cost, throughput, memory.

    python benchmarks/state.py [--keys 1000000,10000000] [--backends hashmap,rocksdb]
        [--seconds 5] [--rounds 12] [--incremental] [--job] [--records N] [--json]
        [--json-out FILE]

1. Backend level, each backend and key count in a fresh child process (so its peak RSS is
   its own): one backend holding every key group (0-127 of max parallelism 128) fills N
   keys of a ValueState (keys `key-<i>`, value 1) through the batched path (`put_many`,
   100,000 keys a call): the fill builds the state, it is not a figure of per-record speed
   (the loop below measures that), and 10 M per-record calls into RocksDB took over half an
   hour on a loaded machine. RocksDB then compacts once (`compact_range` on the backend's
   database), so the full checkpoint, the denominator of the percentages below, is the
   state's compacted size and not the fill's leftover L0 files. Then a snapshot the way a
   task takes it: the synchronous `snapshot()` (the pause at the barrier), then
   `write(folder)` (the asynchronous part, timed alone here) into a local folder; bytes
   are the returned section plus the files written below the folder. Then `--rounds`
   checkpoints each after a different 1 % of the keys changed (round r: keys i with
   i % 100 == r % 100, written in one `put_many`), each completed before the next, as a
   job's 1 s checkpoints would be: per checkpoint the bytes uploaded, the state's whole
   size it names, and its pause; their mean and max as % of the full checkpoint (`full`
   when the backend writes everything each time; `--incremental` asks the rocksdb backend
   for incremental checkpoints, where compactions make the uploads uneven: take rounds
   enough to include them). Then the keyed-count loop runs over the N keys (keys spread
   as in `keyed_count.py`, in batches of 100 handed first to the backend's `prefetch`
   when it has one, as the keyed operators do) for `--seconds` without snapshots, and
   again with a snapshot taken every 1 s (once the previous write has finished: one
   checkpoint at a time) whose write runs on a second thread, as the task's uploader
   does: records/s of both, and the longest gap between two batches of 100 records of the
   loop while a write runs (the stall the write causes through the GIL; the snapshot's
   own pause is not in it), next to the longest gap without snapshots. Also records per
   CPU second of the process (all its threads), which another process's load changes
   less than records/s on a shared machine. Peak RSS: the child's `ru_maxrss`.
2. Job level (`--job`): the keyed running count of `keyed_count.py` (parallelism 2,
   `--records` generated records over N keys, key_by + reduce, a filter in front of an
   exactly-once FileSink) on real Spark, with each backend (`env.set_state_backend`),
   without checkpoints and with 1 s exactly-once checkpoints: events/s from all tasks
   running to the job's end, the ratio ckpt/none, the checkpoints' synchronous and
   asynchronous durations and state size from the job's checkpoint statistics, and the
   peak RSS of the Python task processes (sampled every 200 ms; Python workers are not
   reused, so each task's process is its own).

Prints the machine, then a table; `--json` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

MAX_PARALLELISM = 128
FILL_CHUNK = 100_000
"""Keys per `put_many` call of the fill."""
BATCH = 100
"""Records between two clock reads of the throughput loop (the stall's resolution)."""
BACKENDS = ("hashmap", "rocksdb")


# -- the machine --------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """What the figures were measured on: nexmark.py's description of the machine (this
    folder is the script's, so it imports), with the versions of the state's libraries."""
    from importlib import metadata

    from nexmark import machine as described

    info = described()
    for module in ("pyspark", "rocksdict"):
        try:
            info[module] = metadata.version(module)
        except metadata.PackageNotFoundError:
            info[module] = None
    return info


# -- backend level (in a child process) ---------------------------------------------------


def make_backend(name: str, workdir: str, incremental: bool) -> Any:
    """The job's backend as a task builds it: `create_keyed_backend` over all key groups."""
    from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend, HashMapStateBackend
    from barrierflow.state.key_groups import KeyGroupRange

    key_groups = KeyGroupRange(0, MAX_PARALLELISM - 1)
    try:
        from barrierflow.state.backends import create_keyed_backend
    except ImportError:  # before the factory: the heap backend only
        if name != "hashmap":
            raise SystemExit(f"no state backend factory for {name!r}") from None
        from barrierflow.state.heap_backend import HeapKeyedStateBackend

        return HeapKeyedStateBackend(key_groups, MAX_PARALLELISM)
    settings = (
        HashMapStateBackend()
        if name == "hashmap"
        else EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=incremental)
    )
    return create_keyed_backend(
        settings,
        key_groups,
        MAX_PARALLELISM,
        local_dir=os.path.join(workdir, "db"),
        **({"changelog": True} if changelog_on() else {}),
    )


def changelog_on() -> bool:
    """`--changelog`: the heap backend's changelog checkpoints (set for the children too)."""
    return os.environ.get("BARRIERFLOW_BENCH_CHANGELOG") == "1"


class _Written:
    """A backend whose `snapshot()` still returns the bytes (serialized at the barrier)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def write(self, side_files: Any) -> bytes:
        return self.data

    def release(self) -> None:
        pass


def take_snapshot(backend: Any, checkpoint_id: int) -> tuple[Any, float]:
    """The synchronous part and its duration in ms."""
    started = time.perf_counter()
    snapshot = backend.snapshot(checkpoint_id)
    pause = (time.perf_counter() - started) * 1000
    if isinstance(snapshot, bytes):
        snapshot = _Written(snapshot)
    return snapshot, pause


def folder_bytes(folder: str) -> int:
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(folder)
        for name in names
    )


def write_snapshot(snapshot: Any, folder: str) -> tuple[int, float]:
    """`write(folder, shared)` then `release()`: bytes uploaded (the section, the files in
    `folder`, and what an incremental write added to the job's `shared/` folder) and ms."""
    uploaded, _, took = write_snapshot_sizes(snapshot, folder)
    return uploaded, took


def write_snapshot_sizes(snapshot: Any, folder: str) -> tuple[int, int, float]:
    """`write_snapshot`'s bytes uploaded, the bytes of the whole state the checkpoint names
    (uploaded or referenced in `shared/`), and ms."""
    from barrierflow import _fs

    os.makedirs(folder)
    shared = os.path.join(os.path.dirname(folder), "shared")
    started = time.perf_counter()
    try:
        section = snapshot.write(_fs.location(folder), _fs.location(shared))
    finally:
        snapshot.release()
    took = (time.perf_counter() - started) * 1000
    files = getattr(snapshot, "shared_files", list)()
    own = len(section) + folder_bytes(folder)
    uploaded = own + sum(size for _, size, new in files if new)
    return uploaded, own + sum(size for _, size, _ in files), took


def fill(state: Any, keys: int) -> None:
    """N keys `key-<i>` with value 1, `FILL_CHUNK` a `put_many` call (see the docstring)."""
    for start in range(0, keys, FILL_CHUNK):
        chunk = [f"key-{i}" for i in range(start, min(keys, start + FILL_CHUNK))]
        state.put_many(chunk, [1] * len(chunk))


def compact(backend: Any) -> None:
    """RocksDB: one full compaction, so the full checkpoint is the compacted state. A
    snapshot taken and dropped first writes what the backend still holds in memory (its
    write-back cache, the memtable) into RocksDB's files."""
    db = getattr(backend, "_db", None)
    if db is not None:
        backend.snapshot(0).release()
        db.compact_range(None, None)


def change_rounds(backend: Any, state: Any, keys: int, rounds: int, workdir: str) -> list[dict]:
    """`rounds` checkpoints (ids 2, 3, ...), each after a different 1 % of the keys changed
    and each completed before the next: bytes uploaded, state bytes, pause and write ms."""
    sequence = []
    for index in range(rounds):
        changed = [f"key-{i}" for i in range(index % 100, keys, 100)]
        state.put_many(changed, [index + 2] * len(changed))
        checkpoint_id = index + 2
        snapshot, pause = take_snapshot(backend, checkpoint_id)
        uploaded, state_bytes, took = write_snapshot_sizes(
            snapshot, os.path.join(workdir, f"chk-{checkpoint_id}")
        )
        backend.notify_checkpoint_complete(checkpoint_id)
        sequence.append(
            {"uploaded": uploaded, "state": state_bytes, "sync_ms": pause, "write_ms": took}
        )
    return sequence


def keyed_count_loop(
    backend: Any, state: Any, keys: int, seconds: float, workdir: str | None
) -> dict[str, Any]:
    """Run the keyed count for `seconds`; with `workdir`, checkpoint every 1 s meanwhile."""
    set_key, value, update = backend.set_current_key, state.value, state.update
    writer: threading.Thread | None = None
    written: list[tuple[int, float]] = []
    pauses: list[float] = []
    longest_gap_writing = longest_gap_idle = 0.0
    records = 0
    index = 0
    cpu_started = time.process_time()
    started = last = time.perf_counter()
    next_snapshot = started + 1.0
    deadline = started + seconds
    give_up = started + 10 * seconds
    prefetch = backend.prefetch if getattr(backend, "prefetches", False) else None
    while True:
        batch = [f"key-{((index + i) * 2654435761) % keys}" for i in range(BATCH)]
        index += BATCH
        if prefetch is not None:  # as the keyed operators do per batch (keyed.batch_keys)
            prefetch(batch)
        for key in batch:
            set_key(key)
            update(value() + 1)
        records += BATCH
        now = time.perf_counter()
        gap = now - last
        writing = writer is not None and writer.is_alive()
        if writing:
            longest_gap_writing = max(longest_gap_writing, gap)
        else:
            longest_gap_idle = max(longest_gap_idle, gap)
        last = now
        if workdir is not None and not writing and now >= next_snapshot:
            if pauses:  # as the task is told (ids 1 and 2 were the first two checkpoints)
                backend.notify_checkpoint_complete(len(pauses) + 2)
            snapshot, pause = take_snapshot(backend, len(pauses) + 3)
            pauses.append(pause)
            folder = os.path.join(workdir, f"chk-{len(pauses)}")
            writer = threading.Thread(
                target=lambda s=snapshot, f=folder: written.append(write_snapshot(s, f)),
                name="snapshot-upload",
            )
            writer.start()
            last = time.perf_counter()  # the pause is reported on its own, not as a stall
            next_snapshot = last + 1.0
        if now >= deadline and (workdir is None or len(written) >= 2 or now > give_up):
            break
    elapsed = time.perf_counter() - started
    if writer is not None:
        writer.join()
    cpu = time.process_time() - cpu_started  # every thread's, the last write's included
    figures: dict[str, Any] = {
        "records_per_second": records / elapsed,
        "records_per_cpu_second": records / cpu,
        "longest_gap_ms": longest_gap_idle * 1000,
    }
    if workdir is not None:
        figures.update(
            checkpoints=len(pauses),
            sync_ms=pauses,
            write_ms=[took for _, took in written],
            longest_gap_while_writing_ms=longest_gap_writing * 1000,
        )
    return figures


def backend_figures(
    name: str,
    keys: int,
    seconds: float,
    workdir: str,
    incremental: bool = False,
    rounds: int = 12,
) -> dict[str, Any]:
    """Every backend-level figure of one backend at `keys` keys (run in a fresh process)."""
    from barrierflow.core.state_descriptors import ValueStateDescriptor

    backend = make_backend(name, workdir, incremental)
    state = backend.get_value_state(ValueStateDescriptor("count"))
    figures: dict[str, Any] = {"backend": name, "keys": keys}

    started = time.perf_counter()
    fill(state, keys)
    figures["fill_records_per_second"] = keys / (time.perf_counter() - started)
    started = time.perf_counter()
    compact(backend)
    figures["compact_ms"] = (time.perf_counter() - started) * 1000
    figures["rss_after_fill_mib"] = current_rss_mib()

    sequence_dir = os.path.join(workdir, "sequence")
    snapshot, figures["full_sync_ms"] = take_snapshot(backend, 1)
    full_bytes, figures["full_write_ms"] = write_snapshot(
        snapshot, os.path.join(sequence_dir, "chk-1")
    )
    figures["full_bytes"] = full_bytes
    backend.notify_checkpoint_complete(1)

    sequence = change_rounds(backend, state, keys, rounds, sequence_dir)
    figures["sequence"] = sequence
    percents = [round_["uploaded"] / full_bytes * 100 for round_ in sequence]
    figures["changed_bytes"] = sequence[0]["uploaded"] if sequence else 0
    figures["changed_mean_percent"] = statistics.fmean(percents) if percents else 0.0
    figures["changed_max_percent"] = max(percents, default=0.0)
    figures["changed_sync_ms_median"] = statistics.median(r["sync_ms"] for r in sequence)
    figures["changed_sync_ms_max"] = max(r["sync_ms"] for r in sequence)
    figures["changed_kind"] = "incremental" if incremental and name != "hashmap" else "full"
    if name == "hashmap" and changelog_on():
        figures["changed_kind"] = "changelog"
    shutil.rmtree(sequence_dir, ignore_errors=True)

    figures["no_snapshots"] = keyed_count_loop(backend, state, keys, seconds, None)
    checkpoints = os.path.join(workdir, "checkpoints")
    figures["snapshots_1s"] = keyed_count_loop(backend, state, keys, seconds, checkpoints)
    figures["ratio"] = (
        figures["snapshots_1s"]["records_per_second"]
        / figures["no_snapshots"]["records_per_second"]
    )
    getattr(backend, "dispose", lambda: None)()  # the pre-protocol heap backend has none
    figures["cpu_ratio"] = (
        figures["snapshots_1s"]["records_per_cpu_second"]
        / figures["no_snapshots"]["records_per_cpu_second"]
    )
    figures["load_average_1m"] = os.getloadavg()[0]
    figures["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def current_rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_child(
    name: str, keys: int, seconds: float, timeout: float, incremental: bool, rounds: int = 12
) -> dict[str, Any]:
    """`backend_figures` in a fresh Python process; an error is one line in its figures."""
    workdir = tempfile.mkdtemp(prefix="barrierflow-state-bench-")
    line = [sys.executable, __file__, "--child", name, "--keys", str(keys)]
    line += ["--seconds", str(seconds), "--workdir", workdir, "--rounds", str(rounds)]
    line += ["--incremental"] if incremental else []
    try:
        done = subprocess.run(line, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"backend": name, "keys": keys, "error": f"timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for output in reversed(done.stdout.splitlines()):
        if output.startswith("RESULT "):
            return json.loads(output[len("RESULT ") :])
    reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return {"backend": name, "keys": keys, "error": f"exit {done.returncode}: {reason[:300]}"}


# -- job level ----------------------------------------------------------------------------


class KeyOf:
    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, index: int) -> tuple[str, int]:
        return (f"key-{(index * 2654435761) % self.keys}", 1)


class RssSampler:
    """Peak RSS of the Python task processes (Spark's Python workers), sampled every 200 ms.

    The workers are children of the JVM that runs the driver's SparkContext: this process's
    descendants whose command line runs pyspark's daemon or worker.
    """

    def __init__(self) -> None:
        import psutil

        self._me = psutil.Process()
        self._stop = threading.Event()
        self.peak_mib = 0.0
        self.peak_total_mib = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            total = 0.0
            for child in self._me.children(recursive=True):
                try:
                    if not any(part.startswith("pyspark.") for part in child.cmdline()):
                        continue  # not `python -m pyspark.daemon` (the JVM names pyspark too)
                    rss = child.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                total += rss
                self.peak_mib = max(self.peak_mib, rss)
            self.peak_total_mib = max(self.peak_total_mib, total)


def job_run(
    backend: str,
    records: int,
    keys: int,
    checkpoint_ms: int | None,
    workdir: str,
    incremental: bool = False,
) -> dict[str, Any]:
    from barrierflow import (
        EmbeddedRocksDBStateBackend,
        HashMapStateBackend,
        StreamExecutionEnvironment,
        WatermarkStrategy,
    )
    from barrierflow.connectors.datagen import DataGeneratorSource
    from barrierflow.connectors.files import FileSink

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_state_backend(
        HashMapStateBackend()
        if backend == "hashmap"
        else EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=incremental)
    )
    if checkpoint_ms:
        env.enable_checkpointing(checkpoint_ms)
    if changelog_on():
        env.enable_changelog_state_backend(True)
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
    with RssSampler() as sampler:
        job = env.execute_async(f"state-bench-{backend}-{checkpoint_ms}")
        if not job.wait_until_running(timeout=300):
            raise SystemExit(f"job did not start: {job.get_job_status()}")
        started = time.monotonic()
        result = job.wait()
        elapsed = time.monotonic() - started
    figures: dict[str, Any] = {
        "events_per_second": records / elapsed,
        "task_peak_rss_mib": sampler.peak_mib,
        "tasks_peak_total_rss_mib": sampler.peak_total_mib,
    }
    periodic = [c for c in result.checkpoints if not c.is_final]
    if periodic:
        figures["checkpoints"] = len(periodic)
        for name, of in (
            ("duration_ms", lambda c: c.duration_ms),
            ("sync_duration_ms", lambda c: c.max_sync_ms),
            ("async_duration_ms", lambda c: c.max_async_ms),
            ("state_size", lambda c: c.state_bytes),
            ("persisted_size", lambda c: c.persisted_bytes),
            ("checkpointed_size", lambda c: c.checkpointed_bytes),
        ):
            values = [of(c) for c in periodic]
            figures[f"checkpoint_{name}_median"] = statistics.median(values)
            figures[f"checkpoint_{name}_max"] = max(values)
    return figures


def job_figures(
    backends: list[str], records: int, keys: int, incremental: bool
) -> list[dict[str, Any]]:
    from barrierflow.cluster.spark.session import SparkOptions, obtain_spark

    # A fresh Python worker per task: a reused one would carry an earlier run's heap.
    obtain_spark(None, 4, SparkOptions(conf={"spark.python.worker.reuse": "false"}))
    rows = []
    for backend in backends:
        row: dict[str, Any] = {"backend": backend, "keys": keys, "records": records}
        for label, interval in (("none", None), ("ckpt_1s", 1000)):
            workdir = tempfile.mkdtemp(prefix="barrierflow-state-job-")
            try:
                row[label] = job_run(backend, records, keys, interval, workdir, incremental)
            except Exception as error:  # one line per failed run; the others still run
                row[label] = {"error": f"{type(error).__name__}: {error}"[:300]}
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        if "events_per_second" in row["none"] and "events_per_second" in row["ckpt_1s"]:
            row["ratio"] = row["ckpt_1s"]["events_per_second"] / row["none"]["events_per_second"]
        rows.append(row)
    return rows


# -- output -------------------------------------------------------------------------------


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} MiB"


def _bytes(value: int) -> str:
    if value < 2**20:
        return f"{value / 2**10:,.0f} KiB"
    return f"{value / 2**20:,.1f} MiB"


def backend_table(rows: list[dict[str, Any]]) -> str:
    """Two Markdown tables: what a checkpoint costs, and the record loop's throughput."""
    costs = [
        "| backend | keys | fill rec/s (batched) | sync pause ms (full / median, max of the "
        "1 % rounds / max of the loop's) | write ms | full checkpoint | after 1 % changed: "
        "first, mean, max % of full (rounds) | peak RSS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sequences = []
    rates = [
        "| backend | keys | rec/s none | rec/s 1 s snapshots | ratio | rec/CPU-s none "
        "| rec/CPU-s 1 s snapshots | ratio | longest stall ms (none / writing) | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        start = f"| {row['backend']} | {row['keys']:,} |"
        if "error" in row:
            costs.append(f"{start} {row['error']} |" + " - |" * 5)
            continue
        none, ckpt = row["no_snapshots"], row["snapshots_1s"]
        sync_max = max(ckpt["sync_ms"], default=0.0)
        costs.append(
            f"{start} {row['fill_records_per_second']:,.0f} "
            f"| {row['full_sync_ms']:,.1f} / {row['changed_sync_ms_median']:,.1f}, "
            f"{row['changed_sync_ms_max']:,.1f} / {sync_max:,.1f} "
            f"| {row['full_write_ms']:,.0f} | {_bytes(row['full_bytes'])} "
            f"| {_bytes(row['changed_bytes'])}, {row['changed_mean_percent']:.1f} %, "
            f"{row['changed_max_percent']:.1f} % ({len(row['sequence'])}, "
            f"{row['changed_kind']}) | {_mib(row['peak_rss_mib'])} |"
        )
        uploaded = " ".join(
            f"{r['uploaded'] / row['full_bytes'] * 100:.1f}" for r in row["sequence"]
        )
        sequences.append(f"- {row['backend']} {row['keys']:,} keys: {uploaded}")
        rates.append(
            f"{start} {none['records_per_second']:,.0f} | {ckpt['records_per_second']:,.0f} "
            f"({ckpt['checkpoints']} snapshots) | {row['ratio']:.2f} "
            f"| {none['records_per_cpu_second']:,.0f} | {ckpt['records_per_cpu_second']:,.0f} "
            f"| {row['cpu_ratio']:.2f} "
            f"| {none['longest_gap_ms']:,.1f} / {ckpt['longest_gap_while_writing_ms']:,.1f} "
            f"| {row['load_average_1m']:.1f} |"
        )
    sequence = "uploaded per checkpoint after 1 % changed, % of the full checkpoint:\n"
    return "\n\n".join(["\n".join(costs), sequence + "\n".join(sequences), "\n".join(rates)])


def _rate(figures: dict[str, Any]) -> str:
    if "error" in figures:
        return figures["error"]
    return f"{figures['events_per_second']:,.0f}"


def _pair(figures: dict[str, Any], name: str) -> str:
    median = figures.get(f"checkpoint_{name}_median")
    if median is None:
        return "-"
    return f"{median:,.0f} / {figures[f'checkpoint_{name}_max']:,.0f}"


def job_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | keys | events/s none | events/s 1 s ckpt | ratio | sync ms (median / max) "
        "| async ms (median / max) | state size / checkpointed (max) | task peak RSS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        none, ckpt = row["none"], row["ckpt_1s"]

        size = ckpt.get("checkpoint_state_size_max")
        persisted = ckpt.get("checkpoint_checkpointed_size_max")
        peak = max(none.get("task_peak_rss_mib", 0.0), ckpt.get("task_peak_rss_mib", 0.0))
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "-"
        lines.append(
            f"| {row['backend']} | {row['keys']:,} | {_rate(none)} | {_rate(ckpt)} | {ratio} "
            f"| {_pair(ckpt, 'sync_duration_ms')} | {_pair(ckpt, 'async_duration_ms')} "
            f"| {'-' if size is None else _bytes(size)} / "
            f"{'-' if persisted is None else _bytes(persisted)} | {_mib(peak or None)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000000,10000000", help="key counts, comma-separated")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--seconds", type=float, default=5.0, help="per throughput phase")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per child")
    parser.add_argument(
        "--rounds", type=int, default=12, help="checkpoints after 1 %% of the keys changed"
    )
    parser.add_argument("--job", action="store_true", help="also run the Spark job level")
    parser.add_argument("--job-only", action="store_true", help="only the Spark job level")
    parser.add_argument("--job-keys", help="key counts of the job level (default: --keys)")
    parser.add_argument("--records", type=int, default=2_000_000, help="records per job run")
    parser.add_argument(
        "--incremental", action="store_true", help="rocksdb with incremental checkpoints"
    )
    parser.add_argument(
        "--changelog", action="store_true", help="hashmap with changelog checkpoints"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--json-out", help="also write the JSON object to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    keys = [int(k.replace("_", "")) for k in args.keys.split(",") if k.strip()]
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.changelog:
        os.environ["BARRIERFLOW_BENCH_CHANGELOG"] = "1"
    if args.child:
        gc.collect()
        figures = backend_figures(
            args.child, keys[0], args.seconds, args.workdir, args.incremental, args.rounds
        )
        print("RESULT " + json.dumps(figures))
        return 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    info = machine()
    if not args.json:
        print(
            f"machine: {info.get('cpu')}, {info['cores']} cores, {info.get('memory_gib')} GiB, "
            f"Python {info['python']}, pyspark {info['pyspark']}, rocksdict {info['rocksdict']}, "
            f"load average {info['load_average_1m_at_start']:.1f}"
        )
        if not args.job_only:
            print(f"backend level: key groups 0-127 of {MAX_PARALLELISM} in one backend")
    rows = []
    for count in [] if args.job_only else keys:
        for backend in backends:
            row = run_child(
                backend, count, args.seconds, args.timeout, args.incremental, args.rounds
            )
            rows.append(row)
            if not args.json:
                shown = row.get("error") or f"{row['fill_records_per_second']:,.0f} fill rec/s"
                print(f"  {backend} {count:,} keys: {shown}", flush=True)
    report: dict[str, Any] = {"machine": info, "backend_level": rows}
    if args.job or args.job_only:
        job_keys = [int(k) for k in (args.job_keys or args.keys).split(",") if k.strip()]
        report["job_level"] = [
            row
            for count in job_keys
            for row in job_figures(backends, args.records, count, args.incremental)
        ]
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(report, out, indent=1)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    if rows:
        print()
        print(backend_table(rows))
    if "job_level" in report:
        print(f"\njob level: keyed running count, parallelism 2, {args.records:,} records\n")
        print(job_table(report["job_level"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
