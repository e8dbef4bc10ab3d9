"""Rolling a failed attempt back in place: the tasks' processes and Spark tasks stay.

When an attempt fails while every task's process and the Spark job are alive (an
exception in user code, a source or sink error, checkpoints failing beyond the
tolerance, a lost channel between live tasks), the JobMaster does not cancel the
Spark job. It ends the attempt on every task (EndAttempt: each tears down its
operator chain and channels and keeps its RPC connection), waits the restart
strategy's delay, and sends RestartTask with the next attempt's settings over the
same connections; the tasks register again under the new number and are deployed
and restored from the latest completed checkpoint like any attempt. The Spark job
and its slots are kept, so a roll-back costs no Spark job.

Anything of the ended attempt is refused by its number on both sides. If a task's
process or the Spark job is lost meanwhile, the roll-back is abandoned and the next
attempt takes the new-stage path (cancel the Spark job, submit a new barrier stage).
JobMaster thread only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from barrierflow.cluster.jobmaster.attempt import cancel_tasks
from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailure
from barrierflow.cluster.mails import TaskConnection
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.deployment import TaskSettings

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.attempt import Attempt

log = logging.getLogger(__name__)


def roll_back(
    attempt: Attempt,
    stage: int,
    failure: AttemptFailure,
    delay_ms: int,
    cancel_spark_job: Callable[[], None],
) -> InPlaceRollback | None:
    """End `attempt` on every task but keep the tasks and their Spark job (`stage`) for the
    next attempt; None (and nothing done) unless every task's process lives."""
    connections = attempt.live_tasks()
    if connections is None:
        return None
    rollback = InPlaceRollback(attempt.number, stage, connections, cancel_spark_job)
    try:
        attempt.halt()
    finally:
        rollback.end_attempt(f"rolling back: {failure.summary}", delay_ms)
    return rollback


class InPlaceRollback:
    """The tasks of an ended attempt, kept with their connections during the restart delay.

    Guarantees each task gets EndAttempt(number) before RestartTask(number + 1) on its
    connection, so a task never sees the next attempt while it runs the ended one.
    `broken` names what was lost once a process or the Spark job is gone.
    """

    def __init__(
        self,
        number: int,
        stage: int,
        connections: dict[int, TaskConnection],
        cancel_spark_job: Callable[[], None],
    ) -> None:
        self.number = number
        """The attempt that ended."""
        self.stage = stage
        """The attempt whose Spark job runs these tasks (its SparkJobEnded ends them all)."""
        self.connections = dict(connections)
        self.broken: str | None = None
        self._cancel_spark_job = cancel_spark_job

    def end_attempt(self, reason: str, restart_delay_ms: int) -> None:
        """Tell every task to end the attempt and wait for the next one."""
        for partition in sorted(self.connections):
            try:
                self.connections[partition].send(
                    msg.EndAttempt(self.number, reason, restart_delay_ms)
                )
            except OSError:
                self.broken = f"the connection to partition {partition} is closed"

    def connection_lost(self, conn: TaskConnection) -> None:
        if conn in self.connections.values():
            self.broken = "a task's process died during the roll-back"

    def spark_job_ended(self, stage: int) -> None:
        if stage == self.stage:
            self.broken = "the Spark job ended during the roll-back"

    def restart(self, settings: TaskSettings) -> None:
        """Start attempt `settings.attempt` in every task. A closed connection is left to its
        TaskConnectionLost mail, which fails the new attempt."""
        for partition in sorted(self.connections):
            with contextlib.suppress(OSError):
                self.connections[partition].send(msg.RestartTask(settings.attempt, settings))

    def stop(self, reason: str) -> None:
        """Cancel every kept task, close its connection and cancel the Spark job (the job ends,
        or the next attempt takes a new stage)."""
        try:
            cancel_tasks(self.connections, self.number, reason)
        finally:
            self._cancel_spark_job()
