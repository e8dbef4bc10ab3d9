"""What the HTTP layer may do to a running job: savepoints, stop, cancel.

The narrow interface the REST endpoint declares and the JobMaster implements (structurally:
it never imports this module's users); the endpoint and the job registry talk to a job only
through it, and read only the JobMaster's read models (jobmaster/views.py).
"""

from __future__ import annotations

from typing import Protocol

from barrierflow.cluster.jobmaster.views import SavepointOperation


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
