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
its own, killed whole at each driver failure and followed by a rerun (`DriverRuns`,
drivers.py). The plan is plan.py's, the injector injector.py's, the verdict comparison.py's:
this module runs the two runs.

Both runs restart at once and without limit (a fixed delay of 0), whatever the job's own
strategy. Afterwards every sink that can say what it committed (`Sink.committed_output`;
`FileSink` can) is read in both runs and the two are compared as multisets: records the
failure-free run committed more often are lost, records the chaos run committed more
often are duplicated.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barrierflow.api.environment import JobClient, StreamExecutionEnvironment
from barrierflow.api.job_file import command_line_settings, run_job_file
from barrierflow.chaos.comparison import (
    FailureRecord,
    SinkComparison,
    committed_outputs,
    compare_runs,
    verdict_lines,
)
from barrierflow.chaos.drivers import DriverRuns
from barrierflow.chaos.injector import FailureInjector
from barrierflow.chaos.plan import PlannedFailure, plan_failures
from barrierflow.chaos.run_placement import RunPlacement, check_run
from barrierflow.core.restart_strategies import RestartStrategies
from barrierflow.errors import ChaosError, ConfigurationError

MARKER = ".barrierflow-chaos"
"""Marks a work folder as chaos's own, so a later run may clear its run folders."""


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
        comparisons, skipped = compare_runs(committed_outputs(reference.jobs), outputs)
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
