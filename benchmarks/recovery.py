"""Time from a failure to the first record processed again, per failure kind, next to PyFlink.

    python benchmarks/recovery.py [--failures N] [--kinds exception,kill,executor]
        [--rate R] [--pyflink PYTHON] [--peers DIR] [--pyflink-runs K]
        [--pyflink-workers process,thread]

barrierflow: for each failure kind a job runs (parallelism 2, 1 s checkpoints, a fixed-delay
restart strategy with delay 0): a throttled generator of the integers 0..n-1 (R records/s),
a marking map chained to it, key_by(x % 100), a running count per key emitting
`(key, count, x)`, and a `FileSink`. N failures of the kind are injected one after another
with `JobClient.inject_failure`, each once the job is RUNNING again and has completed a
checkpoint since the previous recovery; each hits the next subtask in turn (source and count
tasks alike). The kinds:

- exception: the task raises on its mailbox thread, as a user function would; the job rolls
  back in place (same processes, same Spark job);
- kill: SIGKILL of the stream task's process; its Spark task starts a new one, in place;
- executor: SIGKILL of the Spark task (its Python worker); a new Spark barrier stage.

The figure, "failure -> first record processed again", runs from the wall-clock time
(`time.time()`) just before the failure is injected, on the driver, to the earliest wall-clock
time at which the marking map of any subtask sees its first record in a later attempt (the
source re-emits from the restored checkpoint). All processes run on this machine, so the
clocks are one. After the last failure the source is released to full speed, the job ends,
and the committed output is checked: every x exactly once, and for each key the counts
1..n_k without gaps or repeats. Each kind also prints how many Spark jobs the job used
(1: every recovery kept the barrier stage's slots).

PyFlink, in the same run (only if a PyFlink interpreter and the peers' scripts are found):
`peers/flink/recovery.py` at parallelism 2 in each worker mode asked, each run one job with
one failure, repeated K times (a PyFlink job takes 15-30 s to start and run, so 10 failures
per mode would not fit in a few minutes). Its job is the same shape (number sequence -> map
-> key_by(x % 100) -> count in keyed state -> FileSink, 1 s checkpoints) and its figure is
defined the same way, with two differences: the failure time is taken in the user function
just before it raises (ours is taken before the injection reaches the task, so ours includes
that delivery), and its restart strategy is fixed-delay with a 1 s delay that the script does
not let us change (ours: 0). Its figure is printed as measured and with the 1 s taken off
(an estimate of what a 0 s delay would give), and the ratios of its median to each kind's
median both ways. Its failure is an exception in user code, so barrierflow's `exception`
kind is the like-for-like row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.api.environment import JobClient
from barrierflow.cluster.spark.session import obtain_spark
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.core.functions import MapFunction, RuntimeContext

KEYS = 100
CHECKPOINT_MS = 1000
SECONDS_PER_FAILURE = {"exception": 3.0, "kill": 3.0, "executor": 5.0}
"""A generous estimate of one failure's cycle (checkpoint wait + recovery), to size the input.
Its keys are the kinds this benchmark compares with PyFlink (`barrierflow chaos` measures
the others: restore, storage, driver; docs/architecture.md §7)."""
KINDS = tuple(SECONDS_PER_FAILURE)
FLINK_RESTART_DELAY_S = 1.0
"""peers/flink/recovery.py restarts with fixed-delay, 1 s (not configurable from outside)."""
FLINK_INPUT = {
    "process": (20_000, 15_000),
    "loopback": (20_000, 15_000),
    "thread": (80_000, 60_000),
}
"""Worker mode -> (--n, --fail-at) for one PyFlink run at parallelism 2: its second subtask
reads n/2..n-1, so the failure falls mid-way through that subtask's share, seconds after the
start (after a checkpoint), never on its first record."""
FLINK_RUN_TIMEOUT_S = 120
"""One PyFlink run takes 10-20 s here; some process-mode runs never restart (tasks stay
SCHEDULED after the failure): those are ended and counted as timed out."""


class Identity:
    """`i -> i`, picklable."""

    def __call__(self, index: int) -> int:
        return index


class ReleasableClock:
    """`time.monotonic` until the release file exists, then a thousand times faster: the
    throttled source paces the job while failures are injected, then runs to its end at full
    speed (its catch-up is bounded per poll, so it never emits more than it has)."""

    def __init__(self, release_file: str) -> None:
        self.release_file = release_file
        self._released_at: float | None = None

    def __call__(self) -> float:
        now = time.monotonic()
        if self._released_at is None:
            if not os.path.exists(self.release_file):
                return now
            self._released_at = now
        return self._released_at + (now - self._released_at) * 1000


class MarkFirstRecord(MapFunction):
    """Chained to the source: writes the wall-clock time of the first record each subtask
    sees in each attempt to `<marks>/attempt-<a>-<subtask>`."""

    def __init__(self, marks: str) -> None:
        self.marks = marks

    def open(self, runtime_context: RuntimeContext) -> None:
        attempt = runtime_context.get_attempt_number()
        subtask = runtime_context.get_index_of_this_subtask()
        self.mark = Path(self.marks, f"attempt-{attempt}-{subtask}")
        self.pending = True

    def map(self, value):
        if self.pending:
            self.pending = False
            now = time.time()
            partial = self.mark.with_suffix(".partial")
            partial.write_text(repr(now))
            partial.rename(self.mark)  # the driver never reads a half-written mark
        return value


def first_record_after(marks: Path, attempt: int, timeout: float) -> float | None:
    """The earliest mark of any attempt after `attempt`, waiting up to `timeout` for one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        times = [
            float(p.read_text())
            for p in marks.glob("attempt-*-*")
            if p.suffix != ".partial" and int(p.name.split("-")[1]) > attempt
        ]
        if times:
            return min(times)
        time.sleep(0.002)
    return None


@dataclass
class KindResult:
    kind: str
    times: list[float] = field(default_factory=list)
    spark_jobs: int = 0
    restarts: int = 0
    checks: list[str] = field(default_factory=list)
    exactly_once: bool = False
    note: str = ""


def check_output(rows: list, records: int) -> tuple[bool, list[str]]:
    """Every x in 0..records-1 exactly once; per key the counts 1..n_k, each once."""
    seen: dict[int, int] = {}
    per_key: dict[int, list[int]] = {}
    for key, count, x in rows:
        seen[x] = seen.get(x, 0) + 1
        per_key.setdefault(key, []).append(count)
    duplicated = sum(n - 1 for n in seen.values())
    missing = sum(1 for x in range(records) if x not in seen)
    foreign = sum(1 for x in seen if not 0 <= x < records)
    counts_ok = all(sorted(c) == list(range(1, len(c) + 1)) for c in per_key.values())
    ok = not duplicated and not missing and not foreign and counts_ok
    lines = [
        f"{len(rows):,} records committed for {records:,} generated: "
        f"{missing} lost, {duplicated} duplicated, {foreign} unknown",
        "per-key running counts 1..n without gaps or repeats: " + ("yes" if counts_ok else "NO"),
    ]
    return ok, lines


def run_kind(kind: str, failures: int, rate: int, spark) -> KindResult:
    workdir = Path(tempfile.mkdtemp(prefix=f"barrierflow-recovery-{kind}-"))
    marks = workdir / "marks"
    marks.mkdir()
    release = workdir / "release"
    records = int(rate * (10 + failures * SECONDS_PER_FAILURE[kind]))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(CHECKPOINT_MS)
    env.get_checkpoint_config().set_checkpoint_storage(str(workdir / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2 * failures + 10, 0))
    sink = FileSink.for_rows(str(workdir / "out"))
    source = DataGeneratorSource(
        Identity(), records, records_per_second=rate, clock=ReleasableClock(str(release))
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(MarkFirstRecord(str(marks)))
        .map(lambda x: (x % KEYS, 1, x))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
        .sink_to(sink)
    )
    job = env.execute_async(f"recovery-{kind}")
    result = KindResult(kind)
    subtasks = [s for v in job.job_graph.vertices for s in v.subtasks()]
    try:
        inject_all(job, kind, failures, subtasks, marks, result)
    finally:
        release.write_text("")
    outcome = job.wait(timeout=600)
    tracker = spark.sparkContext.statusTracker()
    result.spark_jobs = sum(
        len(tracker.getJobIdsForGroup(f"barrierflow-{job.get_job_id()}-{n}"))
        for n in range(outcome.restarts + 1)
    )
    result.restarts = outcome.restarts
    result.exactly_once, result.checks = check_output(sink.committed_output(), records)
    return result


def inject_all(
    job: JobClient, kind: str, failures: int, subtasks: list, marks: Path, result: KindResult
) -> None:
    """Inject `failures` failures of `kind`, each after a recovery and a checkpoint."""
    for number in range(failures):
        attempt = job.attempt
        if not job.wait_until_running(attempt, timeout=120):
            result.note = f"the job was {job.get_job_status()} before failure {number + 1}"
            return
        done = len(job.completed_checkpoints)
        if not job.wait_for_completed_checkpoints(done + 1, timeout=60):
            result.note = f"no checkpoint completed before failure {number + 1}"
            return
        subtask = subtasks[number % len(subtasks)]
        failed_at = time.time()
        try:
            attempt = job.inject_failure(kind, subtask.vertex_id, subtask.subtask_index)
        except (KeyError, ProcessLookupError):
            result.note = f"the task had ended before failure {number + 1}"
            return
        first = first_record_after(marks, attempt, timeout=120)
        if first is None:
            result.note = f"no record was processed within 120 s after failure {number + 1}"
            return
        result.times.append(first - failed_at)
        print(
            f"  {kind} {number + 1}/{failures} (subtask {subtask.subtask_index + 1}/2 of vertex "
            f"{subtask.vertex_id}): first record again after {result.times[-1]:.3f} s",
            flush=True,
        )


# ---- PyFlink ----------------------------------------------------------------------------------


def default_pyflink() -> Path:
    root = os.environ.get("PEERS_ROOT") or os.path.expanduser("~/peers")
    return Path(root, "flink", "venv", "bin", "python")


def run_pyflink(python: Path, script_dir: Path, worker: str) -> dict:
    """One run of peers/flink/recovery.py at parallelism 2; its RESULT json, or an error."""
    n, fail_at = FLINK_INPUT[worker]
    environ = dict(os.environ)
    # the script derives PEERS_ROOT from <root>/flink/venv/bin/python when it is not set
    environ.setdefault("PEERS_ROOT", str(python.parents[3]))
    if worker == "thread":  # pemja needs the venv's packages on the path
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        environ["PYTHONPATH"] = purelib
    else:
        environ.pop("PYTHONPATH", None)
    command = [str(python), "recovery.py", "--n", str(n), "--fail-at", str(fail_at)]
    command += ["--par", "2", "--worker", worker]
    # its own session, so a run that hangs is ended with the JVM it started
    with subprocess.Popen(
        command,
        cwd=script_dir,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as run:
        try:
            stdout, stderr = run.communicate(timeout=FLINK_RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
            return {"error": f"timed out after {FLINK_RUN_TIMEOUT_S} s", "timed_out": True}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (stderr or stdout).strip().splitlines()[-3:]
    return {"error": f"exit {run.returncode}: " + " | ".join(tail)}


def pyflink_figures(args: argparse.Namespace) -> dict[str, list[dict]] | str:
    """Worker mode -> its runs' results, or why PyFlink was skipped."""
    python = Path(args.pyflink) if args.pyflink else default_pyflink()
    script_dir = Path(args.peers) / "flink"
    if not python.exists():
        return f"no PyFlink interpreter at {python} (--pyflink PYTHON, or set PEERS_ROOT)"
    if not (script_dir / "recovery.py").exists():
        return f"no {script_dir / 'recovery.py'} (--peers DIR)"
    print(f"PyFlink: {python}, {script_dir / 'recovery.py'}", flush=True)
    figures: dict[str, list[dict]] = {}
    for worker in args.pyflink_workers.split(","):
        figures[worker] = []
        for run in range(args.pyflink_runs):
            res = run_pyflink(python, script_dir, worker)
            figures[worker].append(res)
            if "failure_to_first_record_s" in res:
                shown = f"first record again after {res['failure_to_first_record_s']:.3f} s"
                shown += f", exactly-once {res.get('sink', {}).get('exactly_once')}"
            else:
                shown = res.get("error", "no recovery time in its result")
            print(f"  PyFlink {worker} run {run + 1}/{args.pyflink_runs}: {shown}", flush=True)
    return figures


# ---- the report --------------------------------------------------------------------------------


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", type=int, default=10, help="failures per kind")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--rate", type=int, default=4000, help="source records/s while failing")
    parser.add_argument("--pyflink", help="PyFlink's python (default $PEERS_ROOT/flink/venv)")
    parser.add_argument("--peers", default=str(repo.parent / "shared" / "peers"))
    parser.add_argument("--pyflink-runs", type=int, default=3, help="one failure per run")
    parser.add_argument("--pyflink-workers", default="process,thread")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        kinds_known = ", ".join(KINDS)
        parser.error(f"unknown kinds {unknown}; the kinds are {kinds_known}")
    started = time.monotonic()
    spark = obtain_spark("local[4]", 4)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(
        f"barrierflow: parallelism 2, {CHECKPOINT_MS} ms checkpoints, restart delay 0, "
        f"{args.rate} records/s, {args.failures} failures per kind; figure: failure -> first "
        "record processed again (earliest subtask, in a later attempt)",
        flush=True,
    )
    results = []
    for kind in kinds:
        print(f"{kind}:", flush=True)
        results.append(run_kind(kind, args.failures, args.rate, spark))
    flink = pyflink_figures(args)
    print()
    print(f"failure -> first record processed again (took {time.monotonic() - started:.0f} s)")
    print(f"{'':34} {'n':>3} {'median':>8} {'worst':>8}  Spark jobs  exactly-once")
    for r in results:
        if r.times:
            median, worst = statistics.median(r.times), max(r.times)
            figures = f"{len(r.times):>3} {median:>7.3f}s {worst:>7.3f}s"
        else:
            figures = f"{0:>3} {'-':>8} {'-':>8}"
        verdict = "OK" if r.exactly_once else "FAILED"
        print(f"barrierflow {r.kind:<22} {figures}  {r.spark_jobs:>10}  {verdict}")
        for line in r.checks:
            print(f"    {line}")
        if r.note:
            print(f"    stopped early: {r.note}")
    if isinstance(flink, str):
        print(f"PyFlink skipped: {flink}")
        return
    for worker, runs in flink.items():
        times = [r["failure_to_first_record_s"] for r in runs if "failure_to_first_record_s" in r]
        once = sum(1 for r in runs if r.get("sink", {}).get("exactly_once"))
        hung = sum(1 for r in runs if r.get("timed_out"))
        if not times:
            errors = "; ".join(r.get("error", "?") for r in runs)
            print(f"PyFlink {worker}: no figure ({errors})")
            continue
        median, worst = statistics.median(times), max(times)
        without = median - FLINK_RESTART_DELAY_S
        label = f"PyFlink 2.3 {worker}, 1 failure/run"
        print(
            f"{label:<34} {len(times):>3} {median:>7.3f}s {worst:>7.3f}s  {'-':>10}  "
            f"{once}/{len(runs)} runs OK"
        )
        if hung:
            print(f"    {hung} of {len(runs)} runs did not recover within {FLINK_RUN_TIMEOUT_S} s")
        print(f"    without its 1 s restart delay: median {without:.3f} s (an estimate)")
        for which, figure in (("as measured", median), ("without the delay", without)):
            ratios = ", ".join(
                f"{r.kind} {figure / statistics.median(r.times):.1f}x" for r in results if r.times
            )
            print(f"    PyFlink / barrierflow, medians, {which}: {ratios}")
    print(
        "PyFlink's failure time is taken in its user function as it raises; barrierflow's on "
        "the driver before it injects (so it includes the injection's delivery)."
    )


if __name__ == "__main__":
    sys.exit(main())
