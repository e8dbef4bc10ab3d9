"""The failures of a chaos run injected into a running job, one at a time, as the plan says:
each aimed at a RUNNING job that completed a checkpoint since the previous recovery."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from barrierflow.api.environment import ENDED_STATES, JobClient
from barrierflow.chaos.comparison import FailureRecord
from barrierflow.chaos.plan import PlannedFailure
from barrierflow.errors import ChaosError

RECOVERY_TIMEOUT_S = 180.0
"""How long a failure may take to recover before chaos stops injecting."""


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
