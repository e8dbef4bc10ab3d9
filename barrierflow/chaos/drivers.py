"""The kind driver: the chaos run in driver processes of its own (`python -m
barrierflow.chaos.child`), each killed whole at its planned driver failure and followed by
a rerun that restores the newest checkpoint."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from barrierflow.api.environment import JobClient
from barrierflow.api.job_file import command_line_settings
from barrierflow.chaos.comparison import FailureRecord, committed_outputs
from barrierflow.chaos.injector import RECOVERY_TIMEOUT_S
from barrierflow.chaos.plan import PlannedFailure, driver_shares
from barrierflow.chaos.processes import kill_process_tree
from barrierflow.cluster.spark.session import SparkOptions
from barrierflow.errors import ChaosError

if TYPE_CHECKING:
    from barrierflow.chaos.check import ChaosCheck


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
