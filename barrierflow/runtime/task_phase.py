"""TaskPhase: where one attempt of a `StreamTask` stands, and the moves it may make.

One enum instead of flags (issue 23), so a phase the task cannot be in is not written down,
and every allowed move is in one table (`ALLOWED_MOVES`). A move the table does not allow
raises `IllegalTaskPhaseTransitionError` naming both phases: a bug in the task, not in the job.

===================  ==========================================================================
from                 to
===================  ==========================================================================
RUNNING              INPUT_ENDED (a source read its last record, or a stop with savepoint
                     ended it), FINISHING (a task without a source heard the final checkpoint
                     complete), TORN_DOWN
INPUT_ENDED          INPUT_REPORTED (EndOfInput sent once the chain held nothing back),
                     TORN_DOWN
INPUT_REPORTED       FINISHING (the final checkpoint completed), TORN_DOWN
FINISHING            FINISHED (chain closed, partitions ended, TaskFinished sent), TORN_DOWN
FINISHED             TORN_DOWN
TORN_DOWN            RUNNING (`StreamTask.restart`: the next attempt in this process)
===================  ==========================================================================

>>> TaskPhase.RUNNING.to(TaskPhase.INPUT_ENDED)
<TaskPhase.INPUT_ENDED: 'input ended'>
>>> TaskPhase.RUNNING.to(TaskPhase.FINISHED)
Traceback (most recent call last):
...
barrierflow.errors.IllegalTaskPhaseTransitionError: a task cannot move from running to finished
"""

from __future__ import annotations

import enum

from barrierflow.errors import IllegalTaskPhaseTransitionError

__all__ = ["ALLOWED_MOVES", "TaskPhase"]


class TaskPhase(enum.Enum):
    """The phase of a task's current attempt; mailbox thread only."""

    RUNNING = "running"
    """Prepared and processing: registering, deploying, restoring, then its mailbox loop."""
    INPUT_ENDED = "input ended"
    """Its source reads nothing more; EndOfInput waits until the chain holds nothing back."""
    INPUT_REPORTED = "input reported"
    """EndOfInput went to the JobMaster; the task waits for the final checkpoint."""
    FINISHING = "finishing"
    """The final checkpoint completed: the loop waits for every input's end, then ends."""
    FINISHED = "finished"
    """The chain closed, every output partition ended, TaskFinished sent."""
    TORN_DOWN = "torn down"
    """Chain aborted unless closed, channels and data server closed (any end of an attempt)."""

    def to(self, new: TaskPhase) -> TaskPhase:
        """`new`, if `ALLOWED_MOVES` lets this phase move there; else raise."""
        if new not in ALLOWED_MOVES[self]:
            raise IllegalTaskPhaseTransitionError(
                f"a task cannot move from {self.value} to {new.value}"
            )
        return new

    @property
    def source_ended(self) -> bool:
        """Whether a source task's source reads nothing more in this phase."""
        return self is not TaskPhase.RUNNING

    @property
    def final_checkpoint_done(self) -> bool:
        """Whether the final checkpoint completed: nothing more is processed."""
        return self in (TaskPhase.FINISHING, TaskPhase.FINISHED)


_P = TaskPhase

ALLOWED_MOVES: dict[TaskPhase, frozenset[TaskPhase]] = {
    _P.RUNNING: frozenset({_P.INPUT_ENDED, _P.FINISHING, _P.TORN_DOWN}),
    _P.INPUT_ENDED: frozenset({_P.INPUT_REPORTED, _P.TORN_DOWN}),
    _P.INPUT_REPORTED: frozenset({_P.FINISHING, _P.TORN_DOWN}),
    _P.FINISHING: frozenset({_P.FINISHED, _P.TORN_DOWN}),
    _P.FINISHED: frozenset({_P.TORN_DOWN}),
    _P.TORN_DOWN: frozenset({_P.RUNNING}),
}
"""Every move a task's phase may make (the table in the module docstring)."""
