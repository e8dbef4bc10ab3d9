"""How one attempt of a stream task ends, and so whether its process may run the next one."""

from __future__ import annotations

import enum


class TaskCancelled(Exception):
    """The JobMaster cancelled this task, or is gone."""


class AttemptEnded(Exception):
    """The JobMaster ended this attempt to roll the job back in place (msg.EndAttempt)."""


class AttemptEnd(enum.Enum):
    """How `StreamTask.run` ended an attempt, which says whether the process may run another."""

    FINISHED = "finished"
    CANCELLED = "cancelled"
    """Cancelled, or the JobMaster is gone: the process ends."""
    FAILED = "failed"
    """Failed and reported it: the JobMaster decides whether the next attempt runs here."""
    ENDED = "ended"
    """Ended by the JobMaster (msg.EndAttempt): a msg.RestartTask or a msg.CancelTask follows."""
