"""The job's savepoint and stop-with-savepoint operations, from request to end.

A request (`JobMaster.trigger_savepoint`, `stop_with_savepoint`; any thread) publishes its
operation by trigger id at once (IN_PROGRESS) and posts a mail. On the JobMaster thread the
mail is refused (as in Flink, only a RUNNING job takes one; one stop at a time; the folder
must be writable), or carried out: a savepoint triggers at once into a new folder proven
writable; a stop tells the sources to stop, its savepoint is the final checkpoint, and its
operation ends with the job (COMPLETED when the job ended FINISHED, FAILED with the cause
when the attempt failed instead). How a savepoint's checkpoint runs is checkpoint_actions.py.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import uuid
from collections.abc import Callable

from barrierflow import _fs
from barrierflow.checkpoint import coordinator as cc
from barrierflow.checkpoint.storage import make_writable_dir
from barrierflow.cluster.jobmaster.attempt import Attempt
from barrierflow.cluster.jobmaster.checkpoint_actions import SavepointRequest
from barrierflow.cluster.jobmaster.job_view import JobPublisher
from barrierflow.cluster.jobmaster.views import JobStatus, SavepointOperation
from barrierflow.cluster.mails import Mail, SavepointRequested
from barrierflow.errors import CheckpointStorageError

log = logging.getLogger(__name__)


class SavepointRequests:
    """The savepoint operations of one job. JobMaster thread only, but `request` (any).

    Guarantees every requested operation ends COMPLETED or FAILED exactly once (the
    JobMaster fails what is left when the job ends), and that at most one stop is under
    way. Assumes the JobMaster reports how each requested savepoint ended
    (`savepoint_ended`) and how the attempt of a stop ended (`attempt_failed`,
    `job_finished`).
    """

    def __init__(
        self,
        job_id: str,
        job_name: str,
        publisher: JobPublisher,
        default_root: Callable[[], _fs.Location],
        post: Callable[[Mail], None],
    ) -> None:
        """`default_root`: where a savepoint goes when the request names no folder."""
        self._job_id = job_id
        self._job_name = job_name
        self._publisher = publisher
        self._default_root = default_root
        self._post = post
        self.stop: SavepointRequest | None = None
        """The stop with savepoint under way (at most one)."""
        self._stop_location: str | None = None
        """Where the stop's savepoint went, once it completed (the job then finishes)."""
        self._stop_failure: str | None = None
        """Why the stop's savepoint failed (the attempt then fails over)."""

    # ---- any thread ----------------------------------------------------------------------------

    def request(self, target_dir: str | None, *, stop: bool, drain: bool, ended: bool) -> str:
        """Publish the operation and post its mail; its trigger id at once. `ended`: the
        JobMaster has ended (nobody will take the mail: it fails now)."""
        trigger_id = uuid.uuid4().hex
        self._publisher.publish_operation(
            SavepointOperation(trigger_id, "IN_PROGRESS", stops_job=stop)
        )
        self._post(SavepointRequested(trigger_id, target_dir, stop, drain))
        state = self._publisher.status.state
        if ended or state.is_terminal:
            self._publisher.fail_operations(f"the job has ended ({state})")
        return trigger_id

    # ---- the JobMaster thread ------------------------------------------------------------------

    def on_requested(self, mail: SavepointRequested, attempt: Attempt | None) -> None:
        """Trigger the savepoint, or tell the sources to stop; or fail the operation at once
        (the job does not run, a stop is under way, the folder is not writable)."""
        kind = "a stop with savepoint" if mail.stop else "a savepoint"
        refusal = self._refusal(kind, attempt)
        if refusal is None:
            try:
                folder = self._new_folder(mail.target_dir)
            except CheckpointStorageError as error:
                refusal = str(error)
        if refusal is not None:
            log.warning("job '%s': %s refused: %s", self._job_name, kind, refusal)
            self._publisher.publish_operation(
                SavepointOperation(mail.trigger_id, "FAILED", failure=refusal, stops_job=mail.stop)
            )
            return
        request = SavepointRequest(mail.trigger_id, folder, mail.stop, mail.drain)
        assert attempt is not None and attempt.checkpoints is not None
        if mail.stop:
            log.info(
                "job '%s': stopping with a savepoint into %s%s",
                self._job_name,
                folder,
                " (draining)" if mail.drain else "",
            )
            self.stop, self._stop_location, self._stop_failure = request, None, None
            attempt.stop_sources(request)
        else:
            log.info("job '%s': savepoint into %s", self._job_name, folder)
            attempt.checkpoints.trigger_savepoint(request)

    def _refusal(self, kind: str, attempt: Attempt | None) -> str | None:
        """Why the job cannot take `kind` now, or None (as Flink, only a running job can)."""
        state = self._publisher.status.state
        if state is not JobStatus.RUNNING or attempt is None or attempt.checkpoints is None:
            return f"the job is {state}: {kind} is taken only while it is RUNNING"
        if self.stop is not None:
            return f"{kind} was refused: a stop with savepoint is under way"
        if attempt.checkpoints.coordinator.status is not cc.CoordinatorStatus.RUNNING:
            return f"the job is finishing (its input ended): {kind} is taken only while it runs"
        return None

    def _new_folder(self, target_dir: str | None) -> _fs.Location:
        """A new `<target>/savepoint-<job id[:6]>-<12 hex>/`, proven writable."""
        root = _fs.location(target_dir) if target_dir else self._default_root()
        folder = root.child(f"savepoint-{self._job_id[:6]}-{secrets.token_hex(6)}")
        try:
            make_writable_dir(folder, "the savepoint folder")
        except CheckpointStorageError:
            with contextlib.suppress(OSError):
                _fs.delete_dir(folder)
            raise
        return folder

    def savepoint_ended(
        self, request: SavepointRequest, location: str | None, failure: str | None
    ) -> None:
        """A requested savepoint completed (`location`) or failed (checkpoint_actions.py). A
        stop's operation ends with the job instead: FINISHED, or the failure's failover."""
        if request.stop:
            self._stop_location, self._stop_failure = location, failure
            return
        if location is not None:
            log.info("job '%s': savepoint completed: %s", self._job_name, location)
            operation = SavepointOperation(request.trigger_id, "COMPLETED", location=location)
        else:
            log.warning("job '%s': %s", self._job_name, failure)
            operation = SavepointOperation(request.trigger_id, "FAILED", failure=failure)
        self._publisher.publish_operation(operation)

    def attempt_failed(self, summary: str) -> None:
        """The attempt failed: a stop under way fails (its sources resume in the next attempt,
        if any), with its savepoint's failure if that came first."""
        if self.stop is not None:
            self._stop_ended(None, self._stop_failure or summary)

    def job_finished(self) -> None:
        """The job ended FINISHED: a stop under way completes (if its savepoint did)."""
        if self.stop is not None:
            self._stop_ended(self._stop_location, "the job finished before its savepoint")

    def _stop_ended(self, location: str | None, failure: str) -> None:
        stop, self.stop = self.stop, None
        assert stop is not None
        if location is not None:
            operation = SavepointOperation(
                stop.trigger_id, "COMPLETED", location=location, stops_job=True
            )
        else:
            failure = f"stop with savepoint failed: {failure}"
            log.warning("job '%s': %s", self._job_name, failure)
            operation = SavepointOperation(
                stop.trigger_id, "FAILED", failure=failure, stops_job=True
            )
        self._publisher.publish_operation(operation)
