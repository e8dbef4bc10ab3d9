"""What grows with the subtask count: JobMaster messages per checkpoint, data connections per
task, barrier-stage start time and checkpoint duration; measured, then extrapolated.

    python benchmarks/cluster_scale.py [--subtasks 2,4,8,16,32] [--checkpoints K]
        [--interval-ms MS] [--rate R] [--extrapolate 100,200,500] [--repeat R]

For each subtask count n, a job of n subtasks runs on one `local[max n]` session (reused):
a paced generator (R records/s in all) chained to a map, `key_by`, a running count chained to
a `FileSink` — two vertices of parallelism n/2, an all-to-all (hash) edge between them, as in
every keyed job. Per count it prints:

- start: from `execute_async` (the session already up) to every subtask's stream task
  registered with the JobMaster (`registered`), and to the job RUNNING (`running`: every task
  deployed, restored, its channels connected). The barrier stage is submitted in between;
- messages per checkpoint: every RPC message the driver sends to or receives from a task
  (counted on the driver's side of every RPC connection, by type) between the completion of
  checkpoint 2 and of checkpoint 2+K, divided by K;
- data connections per task: from the job graph (the TaskDescriptors the tasks are deployed
  with): input channels plus output channels of one subtask, the most any subtask has, and
  the job's total. Every channel is one TCP connection; each task also holds one RPC
  connection to the JobMaster (not counted here);
- checkpoint duration: the median and the worst of the K checkpoints (trigger to `_metadata`
  written), and the median start delay (trigger to the last task's barrier).

Each count runs `--repeat` times and the run that started fastest is shown (the machine is
shared). Then it extrapolates to the `--extrapolate` counts: messages per checkpoint and connections
are computed from the protocol and the job graph (exact, no run needed), and checked against
the measured counts; the times are least-squares fits over the measured counts (a line, and
a parabola too where 4 or more counts curve upwards), to be read as a trend: on this machine every
added subtask is two more processes on the same 2 cores, so the times measure contention as
much as coordination.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.graph.job_graph import JobGraph

WARM_UP_CHECKPOINTS = 2
"""Checkpoints completed before counting: the first ones overlap deployment and warm-up."""
POLL_S = 0.005
START_TIMEOUT_S = 600.0


# ---- counting the driver's RPC messages --------------------------------------------------------


class MessageCounter:
    """Counts every message the driver's RPC connections send and receive, by type.

    Every JobMaster<->task message goes through a `multiprocessing.connection.Connection` on
    the driver (the RPC endpoint wraps each admitted socket in one; data channels live in the
    task processes only), so wrapping the class's send/recv in this process counts exactly
    the JobMaster's traffic, without a counter in the runtime.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()

    def install(self) -> None:
        send, recv = Connection.send, Connection.recv
        counter = self

        def counting_send(conn: Connection, obj: object) -> None:
            send(conn, obj)
            with counter._lock:
                counter.sent[type(obj).__name__] += 1

        def counting_recv(conn: Connection) -> object:
            obj = recv(conn)
            with counter._lock:
                counter.received[type(obj).__name__] += 1
            return obj

        Connection.send = counting_send  # type: ignore[method-assign]
        Connection.recv = counting_recv  # type: ignore[method-assign]

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self._lock:
            return Counter(self.sent), Counter(self.received)


# ---- the job -----------------------------------------------------------------------------------


class Word:
    """Record i: one of 1000 keys, deterministic."""

    def __call__(self, index: int) -> tuple[str, int]:
        return (f"k{(index * 2654435761) % 1000}", 1)


def build(env: StreamExecutionEnvironment, parallelism: int, rate: float, out: str) -> None:
    env.set_parallelism(parallelism)
    source = DataGeneratorSource(Word(), 10**9, records_per_second=rate, num_splits=parallelism)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
        .map(lambda pair: pair)
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .filter(lambda pair: pair[1] % 10_000 == 0)
        .sink_to(FileSink.for_rows(out))
    )


def environment(parallelism: int, interval_ms: int, rate: float, workdir: str):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(interval_ms)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(workdir, "checkpoints"))
    build(env, parallelism, rate, os.path.join(workdir, "out"))
    return env


# ---- connections from the job graph (exact) ----------------------------------------------------


@dataclass(frozen=True)
class Connections:
    per_task_max: int
    per_task_mean: float
    total: int


def connections(graph: JobGraph) -> Connections:
    """Data channels (= TCP connections) in and out of each subtask, as deployed."""
    per_task = []
    for descriptor in build_task_descriptors(graph).values():
        outputs = sum(len(edge.targets) for edge in descriptor.outputs)
        per_task.append(len(descriptor.inputs) + outputs)
    return Connections(max(per_task), statistics.fmean(per_task), sum(per_task) // 2)


def expected_messages(graph: JobGraph) -> int:
    """RPC messages per checkpoint by the protocol: a TriggerCheckpoint to each source
    subtask, an AcknowledgeCheckpoint from every subtask, a NotifyCheckpointComplete to
    every subtask."""
    return len(list(graph.source_subtasks())) + 2 * len(list(graph.all_subtasks()))


# ---- one run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    subtasks: int
    registered_s: float
    running_s: float
    messages: float
    by_type: dict[str, float]
    expected_messages: int
    connections: Connections
    duration_ms: float
    worst_ms: float
    start_delay_ms: float


def run_once(
    subtasks: int, counter: MessageCounter, checkpoints: int, interval_ms: int, rate: float
) -> Figures:
    parallelism = subtasks // 2
    workdir = tempfile.mkdtemp(prefix="barrierflow-scale-")
    try:
        env = environment(parallelism, interval_ms, rate, workdir)
        graph = env.get_job_graph(f"scale-{subtasks}")
        ids = [(s.vertex_id, s.subtask_index) for s in graph.all_subtasks()]
        assert len(ids) == subtasks, (len(ids), subtasks)
        started = time.monotonic()
        client = env.execute_async(f"scale-{subtasks}")
        registered = wait_until(lambda: all(_registered(client, *i) for i in ids), client)
        if not client.wait_until_running(timeout=START_TIMEOUT_S):
            raise SystemExit(
                f"{subtasks} subtasks: the job did not start ({client.get_job_status()})"
            )
        running = time.monotonic() - started
        if not client.wait_for_completed_checkpoints(WARM_UP_CHECKPOINTS, timeout=START_TIMEOUT_S):
            raise SystemExit(f"{subtasks} subtasks: no checkpoint completed")
        sent_0, received_0 = counter.snapshot()
        if not client.wait_for_completed_checkpoints(
            WARM_UP_CHECKPOINTS + checkpoints, timeout=START_TIMEOUT_S
        ):
            raise SystemExit(f"{subtasks} subtasks: only {client.completed_checkpoints} completed")
        sent_1, received_1 = counter.snapshot()
        client.stop_with_savepoint(
            False, os.path.join(workdir, "savepoints"), timeout=START_TIMEOUT_S
        ).result()
        result = client.wait(START_TIMEOUT_S)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    counted = (sent_1 - sent_0) + (received_1 - received_0)
    measured = [
        c for c in result.checkpoints if not c.is_final and c.checkpoint_id > WARM_UP_CHECKPOINTS
    ][:checkpoints]
    durations = [c.duration_ms for c in measured]
    return Figures(
        subtasks,
        registered - started,
        running,
        sum(counted.values()) / checkpoints,
        {kind: n / checkpoints for kind, n in sorted(counted.items())},
        expected_messages(graph),
        connections(graph),
        statistics.median(durations),
        max(durations),
        statistics.median(c.max_start_delay_ms for c in measured),
    )


def warm_up(subtasks: int, interval_ms: int, rate: float) -> tuple[float, float]:
    """Start the largest job once and cancel it, so every count below starts on Spark's reused
    Python workers (barrierflow already imported); returns its cold (registered, running)."""
    workdir = tempfile.mkdtemp(prefix="barrierflow-scale-")
    try:
        env = environment(subtasks // 2, interval_ms, rate, workdir)
        ids = [(s.vertex_id, s.subtask_index) for s in env.get_job_graph().all_subtasks()]
        started = time.monotonic()
        client = env.execute_async("scale-warm-up")
        registered = wait_until(lambda: all(_registered(client, *i) for i in ids), client)
        client.wait_until_running(timeout=START_TIMEOUT_S)
        running = time.monotonic()
        client.cancel()
        with contextlib.suppress(Exception):  # cancelled: the end asked for
            client.wait(START_TIMEOUT_S)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return registered - started, running - started


def _registered(client, vertex_id: int, subtask_index: int) -> bool:
    try:
        client.task_process(vertex_id, subtask_index)
    except KeyError:
        return False
    return True


def wait_until(condition: Callable[[], bool], client) -> float:
    """The monotonic time `condition` first held (polled every POLL_S, bounded)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline or client.get_job_status() in ("FAILED", "CANCELED"):
            raise SystemExit(f"the tasks did not register ({client.get_job_status()})")
        time.sleep(POLL_S)
    return time.monotonic()


# ---- fits --------------------------------------------------------------------------------------


def fit(xs: Sequence[float], ys: Sequence[float], degree: int) -> list[float]:
    """Least-squares polynomial coefficients, lowest power first (normal equations)."""
    size = degree + 1
    matrix = [[sum(x ** (i + j) for x in xs) for j in range(size)] for i in range(size)]
    vector = [sum(y * x**i for x, y in zip(xs, ys, strict=True)) for i in range(size)]
    for column in range(size):  # Gauss-Jordan with partial pivoting
        pivot = max(range(column, size), key=lambda row: abs(matrix[row][column]))
        matrix[column], matrix[pivot] = matrix[pivot], matrix[column]
        vector[column], vector[pivot] = vector[pivot], vector[column]
        for row in range(size):
            if row != column:
                factor = matrix[row][column] / matrix[column][column]
                pairs = zip(matrix[row], matrix[column], strict=True)
                matrix[row] = [a - factor * b for a, b in pairs]
                vector[row] -= factor * vector[column]
    return [vector[i] / matrix[i][i] for i in range(size)]


def evaluate(coefficients: Sequence[float], x: float) -> float:
    return sum(c * x**i for i, c in enumerate(coefficients))


def describe(coefficients: Sequence[float], unit: str) -> str:
    terms = [f"{coefficients[0]:.3g}"]
    if len(coefficients) > 1:
        terms.append(f"{coefficients[1]:.3g}·n")
    if len(coefficients) > 2:
        terms.append(f"{coefficients[2]:.3g}·n²")
    return f"{' + '.join(terms)} {unit}".replace("+ -", "- ").strip()


# ---- main --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subtasks", default="2,4,8,16,32", help="even counts, comma-separated")
    parser.add_argument("--checkpoints", type=int, default=5, help="K, counted per count")
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=2000.0, help="records/s, all sources")
    parser.add_argument("--extrapolate", default="100,200,500")
    parser.add_argument("--repeat", type=int, default=2, help="runs per count; the fastest shown")
    args = parser.parse_args()
    counts = [int(n) for n in args.subtasks.split(",")]
    if any(n < 2 or n % 2 for n in counts):
        parser.error("subtask counts must be even (two vertices of n/2 subtasks)")
    targets = [int(n) for n in args.extrapolate.split(",")]

    obtain_spark(f"local[{max(counts)}]", max(counts))
    counter = MessageCounter()
    counter.install()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, local[{max(counts)}]; checkpoints every "
        f"{args.interval_ms} ms, {args.checkpoints} counted per subtask count, "
        f"{args.rate:.0f} records/s",
        flush=True,
    )
    print(
        f"{'subtasks':>8} {'registered':>10} {'running':>8} {'msgs/chk':>9} {'(protocol)':>10} "
        f"{'conn/task':>9} {'total':>6} {'chk median':>10} {'chk worst':>9} {'start delay':>11}",
        flush=True,
    )
    cold = warm_up(max(counts), args.interval_ms, args.rate)
    print(
        f"warm-up at {max(counts)} subtasks (new Python workers, not measured below): registered "
        f"{cold[0]:.2f} s, running {cold[1]:.2f} s",
        flush=True,
    )
    figures: list[Figures] = []
    for n in counts:
        runs = [
            run_once(n, counter, args.checkpoints, args.interval_ms, args.rate)
            for _ in range(args.repeat)
        ]
        f = min(runs, key=lambda r: r.running_s)  # the run the shared machine disturbed least
        figures.append(f)
        print(
            f"{n:>8} {f.registered_s:>9.2f}s {f.running_s:>7.2f}s {f.messages:>9.1f} "
            f"{f.expected_messages:>10} {f.connections.per_task_max:>9} {f.connections.total:>6} "
            f"{f.duration_ms:>8.0f}ms {f.worst_ms:>7.0f}ms {f.start_delay_ms:>9.0f}ms",
            flush=True,
        )
        by_type = ", ".join(f"{kind} {per:.1f}" for kind, per in f.by_type.items())
        print(f"{'':>8} messages per checkpoint by type: {by_type}", flush=True)

    print()
    print("extrapolated (messages and connections from the protocol and the job graph; times")
    print("fitted over the measured counts, n = subtasks):")
    xs = [f.subtasks for f in figures]
    fits = {}
    for name, ys in (
        ("registered (s)", [f.registered_s for f in figures]),
        ("running (s)", [f.running_s for f in figures]),
        ("checkpoint median (ms)", [f.duration_ms for f in figures]),
    ):
        fits[name] = [fit(xs, ys, 1)]
        if len(xs) >= 4 and (parabola := fit(xs, ys, 2))[2] > 0:
            fits[name].append(parabola)  # only a convex one: a concave fit is noise here
        shown = "; ".join(describe(c, "") for c in fits[name])
        print(f"  {name}: {shown}")
    print(
        f"{'subtasks':>8} {'msgs/chk':>9} {'conn/task':>9} {'total':>7} "
        f"{'registered':>16} {'running':>16} {'chk median':>18}"
    )
    for n in targets:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_max_parallelism(max(128, n))
        build(env, n // 2, args.rate, tempfile.gettempdir())
        graph = env.get_job_graph("scale-paper")
        c = connections(graph)
        cells = []
        for name in ("registered (s)", "running (s)", "checkpoint median (ms)"):
            values = [evaluate(coefficients, n) for coefficients in fits[name]]
            cells.append(" / ".join(f"{v:.0f}" if v >= 100 else f"{v:.1f}" for v in values))
        print(
            f"{n:>8} {expected_messages(graph):>9} {c.per_task_max:>9} {c.total:>7} "
            f"{cells[0]:>16} {cells[1]:>16} {cells[2]:>18}"
        )
    print("(times: line / parabola where the measured counts curve upwards)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
