"""When the next checkpoint may be triggered (Flink's `CheckpointRequestDecider`)."""

from __future__ import annotations

import enum


class TriggerRequest(enum.Enum):
    """A request the decider let through; savepoints never pass through the decider."""

    PERIODIC = "the checkpoint interval elapsed"
    FINAL = "every bounded input ended: one last checkpoint, with is_final"


class CheckpointRequestDecider:
    """Chooses whether a waiting trigger request may fire now. Mailbox thread only.

    Guarantees that a periodic or final checkpoint triggers only while fewer than
    `max_concurrent` checkpoints are pending (savepoints included, as in Flink), that
    a periodic trigger fires no earlier than its interval and no earlier than
    `min_pause_ms` after the last checkpoint completed or was aborted, and that a
    request which has to wait is kept, not dropped. Assumes the caller reports every
    end (`checkpoint_ended`) and asks (`choose`) on every tick and whenever a pending
    checkpoint ends.

    How requests queue. Triggering is synchronous here: the TriggerCheckpoint
    action is the whole trigger step, and the JobMaster sends it before it takes
    its next mail. So unlike Flink no request ever waits for another one that is
    "being triggered"; requests wait only for a free slot or for the min pause, and
    at most one waits at a time:
    - the periodic request: while it waits, the interval does not pile up more of
      them; once it fires at t, the next one is due at t + interval;
    - the final request, which replaces periodic triggering for good: it waits for a
      free slot only (no interval, no min pause), and after a failed final
      checkpoint it is requested again, due after the min pause.
    Savepoints bypass the decider: they ignore max concurrent and the min pause, so
    they never wait and always go ahead of a waiting periodic checkpoint (which then
    also waits for the savepoint, since a pending savepoint holds a slot).

    >>> decider = CheckpointRequestDecider(interval_ms=100, min_pause_ms=30, max_concurrent=1)
    >>> decider.start_periodic(now_ms=0)
    >>> decider.choose(now_ms=99, pending=0), decider.choose(now_ms=100, pending=0)
    (None, <TriggerRequest.PERIODIC: 'the checkpoint interval elapsed'>)
    >>> decider.checkpoint_ended(now_ms=190)
    >>> decider.next_trigger_ms  # interval from 100, but min pause from 190
    220
    """

    def __init__(self, *, interval_ms: int, min_pause_ms: int, max_concurrent: int) -> None:
        self._interval_ms = interval_ms
        self._min_pause_ms = min_pause_ms
        self._max_concurrent = max_concurrent
        self._next_periodic_ms: int | None = None
        """When the periodic request is due; None while periodic triggering is off."""
        self._final_due_ms: int | None = None
        """When the waiting final request is due; None while none waits."""
        self._last_end_ms: int | None = None
        """When the last checkpoint completed or was aborted; None before the first."""

    @property
    def next_trigger_ms(self) -> int | None:
        """The earliest time a waiting request may fire (it may also wait for a slot)."""
        if self._final_due_ms is not None:
            return self._final_due_ms
        if self._next_periodic_ms is None:
            return None
        if self._last_end_ms is None:
            return self._next_periodic_ms
        return max(self._next_periodic_ms, self._last_end_ms + self._min_pause_ms)

    def start_periodic(self, now_ms: int) -> None:
        """The first periodic request is due one interval from now."""
        self._next_periodic_ms = now_ms + self._interval_ms

    def request_final(self, now_ms: int) -> None:
        """Periodic triggering ends; the final request waits for a free slot only."""
        self._next_periodic_ms = None
        self._final_due_ms = now_ms

    def retry_final(self, now_ms: int) -> None:
        """The final checkpoint failed at now_ms: request it again after the min pause."""
        self._next_periodic_ms = None
        self._final_due_ms = now_ms + self._min_pause_ms

    def stop(self) -> None:
        """No request fires any more."""
        self._next_periodic_ms = None
        self._final_due_ms = None

    def checkpoint_ended(self, now_ms: int) -> None:
        """A checkpoint or savepoint completed or was aborted: the min pause starts."""
        self._last_end_ms = now_ms

    def choose(self, now_ms: int, pending: int) -> TriggerRequest | None:
        """The request to trigger now, given `pending` checkpoints and savepoints; or None."""
        if pending >= self._max_concurrent:
            return None
        if self._final_due_ms is not None:
            if now_ms < self._final_due_ms:
                return None
            self._final_due_ms = None
            return TriggerRequest.FINAL
        due = self.next_trigger_ms
        if due is None or now_ms < due:
            return None
        self._next_periodic_ms = now_ms + self._interval_ms
        return TriggerRequest.PERIODIC
