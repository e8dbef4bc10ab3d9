"""The exactly-once self-check: the same job file run without and with injected failures.

`barrierflow chaos job.py --failures N` runs the job file twice in this process, as
`barrierflow run` would, each run in its own folder (`<workdir>/reference` and
`<workdir>/chaos`): every `FileSink` path is rebased under the run's `outputs/`, a
`PostgresSink` writes the run's own copy of its table (`<table>__chaos`), and the
checkpoints go to its `checkpoints/` (`run_placement.py`), so the job file is used as written.
The first run has no failures and reads generator sources at full speed (their rate only
paces a run so failures fit in it). During the second, a `FailureInjector` makes N failures at
random moments drawn from a seeded `random.Random`:

- a failure is aimed only at a job that is RUNNING and has completed a checkpoint since
  the previous recovery (so every failure tests a restore, and the job makes progress),
  then waits a random gap of up to `max_gap_s`, and hits a random subtask;
- its kind is one of `FAILURE_KINDS` (`JobClient.inject_failure`), each kind given about
  the same share of the N failures, in random order;
- its recovery time runs from the injection to the job RUNNING again under a later
  attempt (every task restored and its channels connected; sources emit from then on).

The kinds restore and storage arm the restore that follows the failure
(cluster/chaos_faults.py); with the kind driver, the chaos run runs in driver processes of
its own, killed whole at each driver failure and followed by a rerun (`DriverRuns`).

Both runs restart at once and without limit (a fixed delay of 0), whatever the job's own
strategy. Afterwards every sink that can say what it committed (`Sink.committed_output`;
`FileSink` can) is read in both runs and the two are compared as multisets: records the
failure-free run committed more often are lost, records the chaos run committed more
often are duplicated.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import random
import select
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barrierflow.api.environment import (
    ENDED_STATES,
    FAILURE_KINDS,
    JobClient,
    StreamExecutionEnvironment,
)
from barrierflow.api.job_file import command_line_settings, run_job_file
from barrierflow.chaos.processes import kill_process_tree
from barrierflow.chaos.run_placement import RunPlacement, check_run
from barrierflow.cluster.spark.session import SparkOptions
from barrierflow.core.restart_strategies import RestartStrategies
from barrierflow.errors import ChaosError, ConfigurationError

RECOVERY_TIMEOUT_S = 180.0
"""How long a failure may take to recover before chaos stops injecting."""
MARKER = ".barrierflow-chaos"
"""Marks a work folder as chaos's own, so a later run may clear its run folders."""
SHOWN = 5
"""How many lost and duplicated records the report names."""


# ---- the plan (pure) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedFailure:
    kind: str
    """One of FAILURE_KINDS."""
    gap_s: float
    """How long after the job became eligible (RUNNING, a checkpoint since the last recovery)."""
    target: int
    """Picks the subtask: `subtasks[target % len(subtasks)]`."""


def plan_failures(
    count: int, kinds: Sequence[str], seed: int, max_gap_s: float
) -> list[PlannedFailure]:
    """`count` failures from `seed`: each kind `count // len(kinds)` or one more times, in a
    random order, each with a random gap in [0, max_gap_s] and a random target.

    >>> plan = plan_failures(4, ["exception", "kill"], seed=7, max_gap_s=0.5)
    >>> sorted(Counter(p.kind for p in plan).items())
    [('exception', 2), ('kill', 2)]
    >>> plan == plan_failures(4, ["exception", "kill"], seed=7, max_gap_s=0.5)
    True
    """
    unknown = [kind for kind in kinds if kind not in FAILURE_KINDS]
    if unknown or not kinds:
        raise ConfigurationError(
            f"unknown failure kinds {unknown or kinds}; the kinds are {', '.join(FAILURE_KINDS)}"
        )
    rng = random.Random(seed)
    order = [kinds[i % len(kinds)] for i in range(count)]
    rng.shuffle(order)
    return [PlannedFailure(kind, rng.uniform(0, max_gap_s), rng.randrange(2**31)) for kind in order]


# ---- the comparison (pure) ---------------------------------------------------------------------


def hashable(value: Any) -> Any:
    """A record as a value a Counter can hold: lists become tuples, dicts sorted item tuples.

    >>> hashable(["a", [1, 2], {"b": 1}])
    ('a', (1, 2), (('b', 1),))
    """
    if isinstance(value, list | tuple):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    if isinstance(value, set | frozenset):
        return frozenset(hashable(v) for v in value)
    return value


@dataclass(frozen=True)
class SinkComparison:
    """One sink's committed output in the two runs, as multisets."""

    sink: str
    reference_count: int
    chaos_count: int
    lost: Counter = field(default_factory=Counter)
    """Records the failure-free run committed more often (by how many more)."""
    duplicated: Counter = field(default_factory=Counter)
    """Records the chaos run committed more often (by how many more)."""

    @property
    def exactly_once(self) -> bool:
        return not self.lost and not self.duplicated


def compare_outputs(sink: str, reference: Iterable[Any], chaos: Iterable[Any]) -> SinkComparison:
    """Compare two committed outputs as multisets.

    >>> c = compare_outputs("out", [("a", 1), ("b", 1)], [("a", 1), ("a", 1)])
    >>> dict(c.lost), dict(c.duplicated), c.exactly_once
    ({('b', 1): 1}, {('a', 1): 1}, False)
    """
    before = Counter(hashable(r) for r in reference)
    after = Counter(hashable(r) for r in chaos)
    return SinkComparison(
        sink, sum(before.values()), sum(after.values()), before - after, after - before
    )


@dataclass(frozen=True)
class FailureRecord:
    """One injected failure, as the report shows it."""

    number: int
    at_s: float
    """Since the chaos run started."""
    kind: str
    task: str
    attempt: int
    """The attempt it hit."""
    recovery_ms: float | None
    """From the injection to RUNNING under a later attempt (restore: the attempt after the
    one that failed while restoring; driver: from the kill to RUNNING in the new driver);
    None: the job ended first."""

    def describe(self, total: int) -> str:
        """`failure 3/10 at 4.21 s: kill of 'Map' (1/2) in attempt 2, recovered in 1532 ms`"""
        recovered = (
            f"recovered in {self.recovery_ms:.0f} ms"
            if self.recovery_ms is not None
            else "the job ended before it recovered"
        )
        return (
            f"failure {self.number}/{total} at {self.at_s:.2f} s: {self.kind} of {self.task} "
            f"in attempt {self.attempt}, {recovered}"
        )


def verdict_lines(comparisons: Sequence[SinkComparison]) -> list[str]:
    """The report's last lines: a line per sink, examples of what differs, the verdict last.

    >>> for line in verdict_lines([compare_outputs("'out'", [1, 2, 2], [2, 2, 2])]):
    ...     print(line)
    sink 'out': 3 records without failures, 3 with; 1 lost, 1 duplicated
      lost (first 5): 1
      duplicated (first 5): 2 (1 more)
    exactly-once: FAILED (1 records lost, 1 duplicated)
    """
    lines = []
    for c in comparisons:
        lost, duplicated = sum(c.lost.values()), sum(c.duplicated.values())
        lines.append(
            f"sink {c.sink}: {c.reference_count} records without failures, "
            f"{c.chaos_count} with; {lost} lost, {duplicated} duplicated"
        )
        for what, counter in (("lost", c.lost), ("duplicated", c.duplicated)):
            if counter:
                shown = ", ".join(
                    repr(r) + (f" ({n} more)" if what == "duplicated" or n > 1 else "")
                    for r, n in sorted(counter.items(), key=repr)[:SHOWN]
                )
                lines.append(f"  {what} (first {SHOWN}): {shown}")
    lost = sum(sum(c.lost.values()) for c in comparisons)
    duplicated = sum(sum(c.duplicated.values()) for c in comparisons)
    if lost or duplicated:
        lines.append(f"exactly-once: FAILED ({lost} records lost, {duplicated} duplicated)")
    else:
        lines.append("exactly-once: OK")
    return lines


# ---- injecting failures into a running job -----------------------------------------------------


class FailureInjector:
    """Makes the planned failures in one running job, on its own thread (see the module)."""

    def __init__(
        self,
        client: JobClient,
        plan: Sequence[PlannedFailure],
        report: Callable[[str], None],
        recovery_timeout_s: float = RECOVERY_TIMEOUT_S,
        *,
        first_number: int = 1,
        total: int | None = None,
        started: float | None = None,
        on_driver: Callable[[int], None] | None = None,
        on_record: Callable[[FailureRecord], None] | None = None,
    ) -> None:
        """`first_number`, `total`, `started` (time.monotonic of the chaos run's start): how
        the report numbers and times this driver's share of a plan split across drivers.
        `on_driver(attempt)` carries out a planned driver failure (the last of this share):
        chaos/child.py asks the parent to kill this process."""
        self.client = client
        self.plan = list(plan)
        self.report = report
        self.recovery_timeout_s = recovery_timeout_s
        self.records: list[FailureRecord] = []
        self.error: BaseException | None = None
        self.first_number = first_number
        self.total = total if total is not None else len(self.plan)
        self.on_driver = on_driver
        self.on_record = on_record
        self._stop = threading.Event()
        self._started = started if started is not None else time.monotonic()
        self._thread = threading.Thread(target=self._run, name="barrierflow-chaos", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop injecting and wait for the thread (the job has ended)."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            self._inject_all()
        except BaseException as error:  # reported by the check, never lost on this thread
            self.error = error

    def _inject_all(self) -> None:
        client = self.client
        subtasks = [s for v in client.job_graph.vertices for s in v.subtasks()]
        checkpoints = 0
        """Completed checkpoints when the job last (re)started: a failure waits for one more."""
        for planned in self.plan:
            while True:
                if not self._wait_until_eligible(checkpoints):
                    return
                attempt = client.attempt
                if self._stop.wait(planned.gap_s):
                    return
                if client.get_job_status() == "RUNNING" and client.attempt == attempt:
                    break
                checkpoints = len(client.completed_checkpoints)  # it restarted by itself
            if planned.kind == "driver":
                if self.on_driver is None:
                    raise ChaosError("the failure kind driver needs a driver of its own")
                self.on_driver(client.attempt)
                return
            subtask = subtasks[planned.target % len(subtasks)]
            injected = time.monotonic()
            try:
                attempt = client.inject_failure(
                    planned.kind, subtask.vertex_id, subtask.subtask_index
                )
            except (KeyError, ProcessLookupError):  # the task just ended: nothing to hit
                continue
            # restore: the next attempt fails while restoring, the one after it recovers
            later = attempt + (2 if planned.kind == "restore" else 1)
            recovered = client.wait_until_running(later, timeout=self.recovery_timeout_s)
            now = time.monotonic()
            if not recovered and client.get_job_status() not in ENDED_STATES:
                raise ChaosError(
                    f"the job did not recover within {self.recovery_timeout_s:.0f} s "
                    f"from a {planned.kind} of {self._task_name(subtask)}"
                )
            record = FailureRecord(
                self.first_number + len(self.records),
                injected - self._started,
                planned.kind,
                self._task_name(subtask),
                attempt,
                (now - injected) * 1000 if recovered else None,
            )
            self.records.append(record)
            self.report(record.describe(self.total))
            if self.on_record is not None:
                self.on_record(record)
            if not recovered:
                return
            checkpoints = len(client.completed_checkpoints)

    def _wait_until_eligible(self, checkpoints: int) -> bool:
        """Wait until the job runs and completed a checkpoint beyond `checkpoints`; False if
        the job ended (or the injector was stopped) first."""
        client = self.client
        while not self._stop.is_set():
            if not client.wait_for_completed_checkpoints(checkpoints + 1, timeout=1.0):
                if client.get_job_status() in ENDED_STATES:
                    return False
                continue
            if client.wait_until_running(client.attempt, timeout=1.0):
                return True
            if client.get_job_status() in ENDED_STATES:
                return False
        return False

    def _task_name(self, subtask: Any) -> str:
        vertex = self.client.job_graph.vertex(subtask.vertex_id)
        return f"'{vertex.name}' ({subtask.subtask_index + 1}/{vertex.parallelism})"


# ---- the two runs ------------------------------------------------------------------------------


@dataclass
class _Run:
    """One run of the job file: the jobs it started and, in the chaos run, the injector."""

    name: str
    jobs: list[JobClient] = field(default_factory=list)
    injector: FailureInjector | None = None
    error: BaseException | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class ChaosResult:
    failures: list[FailureRecord]
    comparisons: list[SinkComparison]
    lines: list[str]
    """The verdict lines (the last one is `exactly-once: OK` or `exactly-once: FAILED ...`)."""
    job_error: str | None = None
    """The chaos run's job failed (the restart strategy cannot give up: a real defect)."""

    @property
    def exactly_once(self) -> bool:
        return self.job_error is None and all(c.exactly_once for c in self.comparisons)


@dataclass(frozen=True)
class ChaosCheck:
    """What `barrierflow chaos` was asked to do."""

    job_file: Path
    job_args: tuple[str, ...]
    failures: int
    kinds: tuple[str, ...]
    seed: int
    workdir: Path
    max_gap_s: float = 1.0
    parallelism: int | None = None
    master: str | None = None

    def run(self, report: Callable[[str], None]) -> ChaosResult:
        """Both runs, then the comparison; `report` gets each line as it happens."""
        plan = plan_failures(self.failures, self.kinds, self.seed, self.max_gap_s)
        master = self.master or os.environ.get("BARRIERFLOW_MASTER")
        if "jvm" in self.kinds and master is not None and _runs_in_driver_jvm(master):
            raise ChaosError(
                f"the failure kind jvm kills an executor JVM, and master {master} runs every "
                "task inside the driver's JVM: run on local-cluster[W,C,M] (executor JVMs on "
                "this machine) or a cluster master, or leave jvm out of --kinds"
            )
        if "driver" in self.kinds and not os.path.isdir("/proc/self"):
            raise ChaosError(
                "the failure kind driver kills a driver's process tree, which it finds in "
                "/proc: run it on Linux, or leave driver out of --kinds"
            )
        _prepare_workdir(self.workdir)
        report(f"run 1 of 2: without failures, in {self.workdir / 'reference'}")
        reference = self._run_once("reference", [], report)
        if reference.error is not None:
            raise ChaosError(
                f"the run without failures failed, so there is nothing to compare with: "
                f"{type(reference.error).__name__}: {reference.error}"
            ) from reference.error
        report(f"run 1 took {reference.seconds:.1f} s")
        report(
            f"run 2 of 2: {self.failures} failures ({', '.join(self.kinds)}; seed {self.seed}), "
            f"in {self.workdir / 'chaos'}"
        )
        if "driver" in self.kinds:
            drivers = DriverRuns(self, plan, report).run()
            records, error = drivers.records, drivers.error
            seconds, outputs = drivers.seconds, drivers.outputs
        else:
            chaos = self._run_once("chaos", plan, report)
            injector = chaos.injector
            records = injector.records if injector is not None else []
            if injector is not None and injector.error is not None:
                raise ChaosError(str(injector.error)) from injector.error
            seconds, outputs = chaos.seconds, {}
            error = None if chaos.error is None else f"{type(chaos.error).__name__}: {chaos.error}"
            if error is None:
                outputs = committed_outputs(chaos.jobs)
        report(f"run 2 took {seconds:.1f} s")
        if error is not None:
            lines = [f"the job failed under chaos: {error}", "exactly-once: FAILED (job failed)"]
            return ChaosResult(records, [], lines, job_error=error)
        comparisons, skipped = _compare_outputs(committed_outputs(reference.jobs), outputs)
        lines = [f"sink {name}: not compared (it cannot say what it committed)" for name in skipped]
        if len(records) < self.failures:
            lines.append(
                f"only {len(records)} of {self.failures} failures were injected before the job "
                "ended: give it more input (or a lower rate) for the check asked for"
            )
        return ChaosResult(records, comparisons, [*lines, *verdict_lines(comparisons)])

    def _run_once(
        self,
        name: str,
        plan: list[PlannedFailure],
        report: Callable[[str], None],
        *,
        full_speed: bool | None = None,
        injector_args: dict[str, Any] | None = None,
        on_job: Callable[[JobClient], None] | None = None,
        continued: bool = False,
    ) -> _Run:
        """One run of the job file in this process; `full_speed` (default: without a plan),
        `injector_args` (FailureInjector's keywords) and `on_job` (told of the file's first
        job) serve a driver of a run split across drivers (`run_driver`)."""
        run = _Run(name)

        def on_execute(env: StreamExecutionEnvironment, client: JobClient) -> None:
            if not env.get_checkpoint_config().is_checkpointing_enabled():
                client.cancel()
                raise ConfigurationError(
                    "barrierflow chaos needs a job with checkpointing: call "
                    "env.enable_checkpointing(interval_ms) in the job file"
                )
            run.jobs.append(client)
            if on_job is not None and len(run.jobs) == 1:
                on_job(client)
            if plan and run.injector is None:  # failures go into the file's first job
                run.injector = FailureInjector(client, plan, report, **(injector_args or {}))
                run.injector.start()

        fast = not plan if full_speed is None else full_speed
        placement = RunPlacement(self.workdir / name, full_speed=fast, continued=continued)
        settings = command_line_settings(
            parallelism=self.parallelism,
            master=self.master,
            restart_strategy=RestartStrategies.fixed_delay_restart(2 * self.failures + 10, 0),
            on_execute=on_execute,
            checkpoint_storage=placement.checkpoints,
        )
        started = time.monotonic()
        try:
            check = check_run(placement.root, full_speed=fast, continued=continued)
            with check, settings:
                run_job_file(self.job_file, self.job_args)
        except ConfigurationError:
            raise
        except SystemExit as exit_:  # the job file's own sys.exit: only a failure counts
            if exit_.code not in (None, 0):
                run.error = exit_
        except Exception as error:
            run.error = error
        finally:
            if run.injector is not None:
                run.injector.stop()
        run.seconds = time.monotonic() - started
        if not run.jobs and run.error is None:
            raise ChaosError(f"{self.job_file} started no job (it never called env.execute())")
        return run


# ---- the kind driver: the chaos run in driver processes of its own ------------------------------


@dataclass(frozen=True)
class DriverSpec:
    """What one driver of a chaos run split across drivers does (chaos/child.py reads it)."""

    check: ChaosCheck
    plan: list[PlannedFailure]
    """Its share of the plan: failures of other kinds, then at most one driver failure."""
    first_number: int
    total: int
    started: float
    """time.monotonic() at the chaos run's start (one clock for every process here)."""
    rerun: bool
    """It follows a killed driver: it says when the job runs again (`running`)."""
    output_file: str
    """Where it pickles its sinks' committed output if its run ends."""
    events_fd: int
    """The pipe it writes its events to, one JSON object per line."""
    spark_options: SparkOptions | None


def run_driver(spec: DriverSpec, send: Callable[..., None]) -> None:
    """Run the job file as one driver of the chaos run (in chaos/child.py's process), telling
    the parent by `send(event=..., ...)`: `failure` (a FailureRecord's fields), `running`
    (a rerun's job RUNNING again), `driver` (kill this process now), `error` (the check
    broke), `done` (the run ended: its error or None; the output pickled)."""

    def say_running(client: JobClient) -> None:
        running = client.wait_until_running(0, timeout=RECOVERY_TIMEOUT_S)
        send(event="running", running=running, restored_from=client.restored_from)

    def on_job(client: JobClient) -> None:
        if spec.rerun:
            threading.Thread(target=say_running, args=(client,), daemon=True).start()

    injector_args = {
        "first_number": spec.first_number,
        "total": spec.total,
        "started": spec.started,
        "on_driver": lambda attempt: send(event="driver", attempt=attempt, pid=os.getpid()),
        "on_record": lambda record: send(event="failure", **dataclasses.asdict(record)),
    }
    with command_line_settings(spark_options=spec.spark_options):
        run = spec.check._run_once(
            "chaos", spec.plan, lambda line: None, full_speed=False,
            injector_args=injector_args, on_job=on_job, continued=spec.rerun,
        )  # fmt: skip
    if run.injector is not None and run.injector.error is not None:
        send(event="error", text=str(run.injector.error))
        return
    error = None if run.error is None else f"{type(run.error).__name__}: {run.error}"
    if error is None:
        Path(spec.output_file).write_bytes(pickle.dumps(committed_outputs(run.jobs)))
    send(event="done", error=error)


@dataclass
class _Killed:
    """A driver killed by plan, until the next driver runs the job again."""

    number: int
    at_s: float
    attempt: int
    pid: int
    killed_at: float


@dataclass
class DriverRuns:
    """The chaos run as a chain of driver processes (`python -m barrierflow.chaos.child`):
    each runs the job file as `barrierflow run` would, with its share of the plan; at a
    driver failure it asks to be killed, this SIGKILLs its whole process tree (the driver,
    Spark's JVM, the Python workers and stream tasks: everything in its session, and every
    descendant), and the next driver runs the file again, restoring the folder's newest
    checkpoint. Its recovery time runs from the kill to the new driver's job RUNNING
    (Python and Spark start-up included). The last driver's run ends and pickles what its
    sinks committed."""

    check: ChaosCheck
    plan: list[PlannedFailure]
    report: Callable[[str], None]
    records: list[FailureRecord] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    outputs: dict[str, list[Any] | None] = field(default_factory=dict)

    def run(self) -> DriverRuns:
        from barrierflow.api.environment import command_line_defaults

        started = time.monotonic()
        shares = driver_shares(self.plan)
        killed: _Killed | None = None
        output = self.check.workdir / "chaos-committed.pickle"
        output.unlink(missing_ok=True)  # an earlier check's: never read as this one's
        for index, share in enumerate(shares):
            spec = DriverSpec(
                self.check, share, len(self.records) + 1 + (killed is not None),
                len(self.plan), started, killed is not None, str(output), -1,
                command_line_defaults.spark_options,
            )  # fmt: skip
            killed = self._drive(spec, killed, index)
            if killed is None:
                break
        if killed is not None:
            raise ChaosError("the last driver was killed by plan: nothing ran the job to its end")
        self.seconds = time.monotonic() - started
        if self.error is None:
            self.outputs = pickle.loads(output.read_bytes())
        return self

    def _drive(self, spec: DriverSpec, killed: _Killed | None, index: int) -> _Killed | None:
        """Run one driver until it ends (None) or is killed by plan (the kill)."""
        read_fd, write_fd = os.pipe()
        spec = dataclasses.replace(spec, events_fd=write_fd)
        spec_file = self.check.workdir / f"driver-{index + 1}.spec"
        spec_file.write_bytes(pickle.dumps(spec))
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "barrierflow.chaos.child", str(spec_file)],
                pass_fds=(write_fd,), start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(write_fd)
        events = _Lines(read_fd)
        try:
            while True:
                deadline = None if killed is None else killed.killed_at + RECOVERY_TIMEOUT_S
                event = events.next(deadline)
                if event is None:  # the pipe closed: the driver ended without saying `done`
                    code = child.wait()
                    raise ChaosError(
                        f"the chaos run's driver (pid {child.pid}) exited with status {code} "
                        "before its run ended (see its output above)"
                    )
                if event == "timeout":
                    assert killed is not None
                    kill_process_tree(child.pid)
                    raise ChaosError(
                        f"the job did not run again within {RECOVERY_TIMEOUT_S:.0f} s of "
                        f"killing its driver (pid {killed.pid})"
                    )
                kind = event.pop("event")
                if kind == "failure":
                    self._add(FailureRecord(**event))
                elif kind == "running" and killed is not None:
                    recovered = time.monotonic() if event["running"] else None
                    self._add(FailureRecord(
                        killed.number, killed.at_s, "driver", f"the driver (pid {killed.pid})",
                        killed.attempt,
                        None if recovered is None else (recovered - killed.killed_at) * 1000,
                    ))  # fmt: skip
                    if event["running"] and event["restored_from"] is None:
                        self.report("the new driver restored no checkpoint: it started afresh")
                    killed = None
                elif kind == "driver":
                    now = time.monotonic()
                    kill_process_tree(child.pid)
                    child.wait()
                    return _Killed(
                        len(self.records) + 1, now - spec.started, event["attempt"],
                        event["pid"], now,
                    )  # fmt: skip
                elif kind == "error":
                    raise ChaosError(event["text"])
                elif kind == "done":
                    self.error = event["error"]
                    child.wait()
                    return None
        finally:
            events.close()
            if child.poll() is None:
                kill_process_tree(child.pid)
                child.wait()

    def _add(self, record: FailureRecord) -> None:
        self.records.append(record)
        self.report(record.describe(len(self.plan)))


def driver_shares(plan: Sequence[PlannedFailure]) -> list[list[PlannedFailure]]:
    """The plan cut after each driver failure: one share per driver process.

    >>> kinds = lambda shares: [[p.kind for p in share] for share in shares]
    >>> plan = [PlannedFailure(k, 0.0, 0) for k in ("kill", "driver", "driver", "storage")]
    >>> kinds(driver_shares(plan))
    [['kill', 'driver'], ['driver'], ['storage']]
    >>> kinds(driver_shares(plan[:2]))  # a last driver runs the job to its end
    [['kill', 'driver'], []]
    """
    shares: list[list[PlannedFailure]] = [[]]
    for planned in plan:
        shares[-1].append(planned)
        if planned.kind == "driver":
            shares.append([])
    return shares


class _Lines:
    """JSON objects, one per line, read from a pipe with a deadline."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    def next(self, deadline: float | None) -> dict[str, Any] | str | None:
        """The next object; "timeout" once `deadline` (time.monotonic) passed; None at EOF."""
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], wait)
            if not ready:
                return "timeout"
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        os.close(self._fd)


def _runs_in_driver_jvm(master: str) -> bool:
    """`local` and `local[N]` run tasks in the driver's JVM; `local-cluster[...]` does not.

    >>> [_runs_in_driver_jvm(m) for m in ("local[4]", "local", "local-cluster[2,2,1024]")]
    [True, True, False]
    """
    return master == "local" or master.startswith("local[")


def _prepare_workdir(workdir: Path) -> None:
    """An empty or new folder, or one of an earlier chaos check (its run folders cleared)."""
    import shutil

    if workdir.exists():
        entries = {p.name for p in workdir.iterdir()}
        if entries and MARKER not in entries:
            raise ChaosError(
                f"the work folder {workdir} is not empty and was not made by barrierflow chaos"
            )
        for run in ("reference", "chaos"):
            shutil.rmtree(workdir / run, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text(json.dumps({"made_by": "barrierflow chaos"}))


def _sinks(jobs: Sequence[JobClient]) -> dict[str, Any]:
    """Every sink of the run's jobs by a name that is the same in both runs."""
    sinks = {}
    for index, client in enumerate(jobs):
        prefix = f"job {index + 1} " if len(jobs) > 1 else ""
        for vertex in client.job_graph.vertices:
            for op in vertex.operators:
                if op.transformation.sink is not None:
                    sinks[f"{prefix}'{op.name}' (uid {op.uid})"] = op.transformation.sink
    return sinks


def committed_outputs(jobs: Sequence[JobClient]) -> dict[str, list[Any] | None]:
    """What each sink of the run's jobs committed (None: it cannot say), by `_sinks` name."""
    outputs: dict[str, list[Any] | None] = {}
    for name, sink in _sinks(jobs).items():
        committed = sink.committed_output()
        outputs[name] = None if committed is None else list(committed)
    return outputs


def _compare_runs(
    reference: Sequence[JobClient], chaos: Sequence[JobClient]
) -> tuple[list[SinkComparison], list[str]]:
    """The comparison of every sink that can say what it committed, and the names of those
    that cannot."""
    return _compare_outputs(committed_outputs(reference), committed_outputs(chaos))


def _compare_outputs(
    before: dict[str, list[Any] | None], after: dict[str, list[Any] | None]
) -> tuple[list[SinkComparison], list[str]]:
    if before.keys() != after.keys():
        raise ChaosError(
            f"the two runs built different sinks ({sorted(before)} and {sorted(after)}): "
            "the job file must build the same job every time"
        )
    comparisons, skipped = [], []
    for name, committed in before.items():
        if committed is None:
            skipped.append(name)
            continue
        comparisons.append(compare_outputs(name, committed, after[name] or []))
    if not comparisons:
        raise ChaosError(
            "no sink of the job can say what it committed (FileSink, DeltaSink and "
            "PostgresSink can; a custom sink "
            "implements Sink.committed_output), so there is nothing to compare"
        )
    return comparisons, skipped
