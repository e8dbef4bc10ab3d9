"""A record that always fails: the same failure from the same restore point, again and again.

A user function that raises on one record, or a source that cannot decode one, fails the
job at the same place after every restore, and the restart strategy (without a limit by
default once checkpointing is on) would restart it for good. `RepeatedFailures` watches the
attempts' failures: the same failure (`AttemptFailure.signature`: task, exception type and
message) after restoring the same restore point, with no checkpoint completed in between,
`limit` times in a row, ends the job whatever the restart strategy says, in one line that
names the error, the task, the record's position when the task knew it, the restore point,
and what to do.

A failure without a signature (injected by chaos, a lost process or connection, an
unreachable system) neither counts nor breaks a streak: it says nothing about the input.
Pure: no clocks, files or logging; the JobMaster feeds it events and carries out its answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from barrierflow.errors import ConfigurationError

DEFAULT_LIMIT = 3
"""The same failure this many times in a row from one restore point fails the job."""

WHAT_TO_DO = (
    "route such records to a dead-letter output (`.with_dead_letters()` on the source, or on "
    "the map, flat_map, filter or process that raises, then "
    "`.get_side_output(DEAD_LETTERS)`) or fix the input"
)


@dataclass(frozen=True)
class Streak:
    """The failures in a row that are the same, from the same restore point."""

    restored: str | None
    """What the attempts restored ("checkpoint 7"); None: they started without a checkpoint."""
    signature: str
    count: int


class RepeatedFailures:
    """Counts the same failure in a row from one restore point. JobMaster thread only.

    Guarantees `failed` answers a reason to give up exactly when the `limit`-th failure in a
    row has the same signature and restore point as the ones before it, with no checkpoint
    completed (`progressed`) in between; never when `limit` is None or 0. Assumes it hears
    of every failure of the job's attempts, in order.
    """

    def __init__(self, limit: int | None = DEFAULT_LIMIT) -> None:
        self.limit = check_limit(limit)
        self.streak: Streak | None = None

    def progressed(self) -> None:
        """A checkpoint completed: the job moved past where it failed; start counting again."""
        self.streak = None

    def failed(self, restored: str | None, signature: str | None) -> str | None:
        """An attempt that restored `restored` failed with `signature` (None: a failure that
        says nothing about the input). The reason to fail the job instead of restarting, or
        None: the restart strategy decides."""
        if signature is None:
            return None
        streak = self.streak
        if streak is not None and (streak.restored, streak.signature) == (restored, signature):
            count = streak.count + 1
        else:
            count = 1
        self.streak = Streak(restored, signature, count)
        if not self.limit or count < self.limit:
            return None
        since = restored if restored is not None else "the start (no checkpoint)"
        return (
            f"the same failure {count} times in a row from {since}, no checkpoint completed in "
            f"between: a record that always fails; {WHAT_TO_DO}"
        )


def check_limit(limit: int | None) -> int | None:
    """`limit` if it is None or an int >= 0; raises ConfigurationError otherwise."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigurationError(
            f"the repeated failure limit must be an int >= 0 (0 or None: no limit), got {limit!r}"
        )
    return limit
