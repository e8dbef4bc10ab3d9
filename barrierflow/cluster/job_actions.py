"""What a running job lets its endpoints do to it: savepoints, stop, cancel.

The JobMaster implements `JobActions`; the REST endpoint and the job registry talk to a
job only through it. `SavepointOperation` is what a triggered savepoint (or a stop with
savepoint) reports while it runs and once it ended, polled by its trigger id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

SavepointStatus = Literal["IN_PROGRESS", "COMPLETED", "FAILED"]


@dataclass(frozen=True)
class SavepointOperation:
    """One savepoint the job was asked for (Flink's asynchronous operation result)."""

    trigger_id: str
    status: SavepointStatus
    location: str | None = None
    """The savepoint's folder (a URI) once COMPLETED."""
    failure: str | None = None
    """Why it FAILED, in one line."""
    stops_job: bool = False
    """A stop with savepoint: the job ends FINISHED once it completed."""


class JobActions(Protocol):
    """The actions of one running job. Any thread may call them; they never block on the job."""

    def trigger_savepoint(self, target_dir: str | None) -> str:
        """Start a savepoint into `target_dir` (None: the job's default); its trigger id."""
        ...

    def stop_with_savepoint(self, target_dir: str | None, drain: bool) -> str:
        """Stop the sources, take a savepoint, commit, end FINISHED; its trigger id."""
        ...

    def savepoint_operation(self, trigger_id: str) -> SavepointOperation | None:
        """The state of a triggered savepoint; None for an unknown trigger id."""
        ...

    def request_cancel(self, reason: str = "cancelled by the user") -> None:
        """Cancel the job (it ends CANCELED)."""
        ...
