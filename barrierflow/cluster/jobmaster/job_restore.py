"""The JobMaster's restore side: what each attempt restores, and what a restore failure means.

restore_point.py decides (pure); this carries its decisions out for one job: it lists the
job's completed checkpoints (for a job started from a savepoint, only this run's), reads and
checks the chosen `_metadata`, checks it against the job's operators (state of a removed
operator refused unless allowed, logged once per restore point), applies the restore mode
(claim: the folder is deleted once this run's retained checkpoints subsume it; no-claim in
the job's own folder: retention must not delete it), and turns a failure at restore into a
fallback, a repeat that fails the job, or the restart strategy's decision. JobMaster thread
only.
"""

from __future__ import annotations

import logging
from typing import Any

from barrierflow import _fs
from barrierflow.checkpoint.history import CheckpointHistoryFile
from barrierflow.checkpoint.metadata import check_compatible, shared_files
from barrierflow.checkpoint.stats import CheckpointStats, CheckpointStatsStatus
from barrierflow.checkpoint.storage import (
    FileSystemCheckpointStorage,
    check_files,
    load_metadata,
    restore_folder,
)
from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailure
from barrierflow.cluster.jobmaster.job_settings import JobSettings
from barrierflow.cluster.jobmaster.restore_point import (
    Candidate,
    FallBack,
    GiveUp,
    RestoreMode,
    RestorePoint,
    RestorePointChooser,
)
from barrierflow.core.restart_strategies import RestartDecision
from barrierflow.errors import CheckpointStorageError, StateRestoreError
from barrierflow.graph.job_graph import JobGraph

log = logging.getLogger(__name__)


class JobRestore:
    """Chooses and checks each attempt's restore point. JobMaster thread only.

    Guarantees what `choose` returns matches the job's operators, and that a claimed
    folder is deleted once, only after `retained_checkpoints` of this run's own
    checkpoints completed. Assumes the settings' restore path was given before it was
    made, and that `run_first_checkpoint_id` is set before the first `choose`.
    """

    def __init__(
        self,
        graph: JobGraph,
        settings: JobSettings,
        storage: FileSystemCheckpointStorage,
        history: CheckpointHistoryFile,
    ) -> None:
        self._graph = graph
        self._settings = settings
        self._storage = storage
        self._history = history
        restore = settings.savepoint_restore
        self.chooser = RestorePointChooser(
            Candidate(restore_folder(restore.path)) if restore is not None else None
        )
        self.point: RestorePoint | None = None
        """What the current (or the last) attempt restores."""
        self.abandoned_above: int | None = None
        """Above which checkpoint id restoring `point` abandons the commits of the job's
        lineage (SinkContext.abandoned_above): the id of one of the job's own checkpoints or
        savepoints; for the savepoint the user named, only this run's own later commits (its
        ids start at `run_first_checkpoint_id`), never an earlier run's.

        None when the restore abandons nothing: a fresh start, or no checkpoint or savepoint
        of the folder above that id ever completed (only a completed one was committed), as
        at every restore but a fallback. That spares sinks their search (FileSink lists its
        whole output folder) at ordinary restores. Set by `choose`, with `point`."""
        self.run_first_checkpoint_id = 1
        """Checkpoints of this run have ids from here on (those of earlier runs are below)."""
        self._said_skipped: set[str] = set()
        self._said_incomplete: set[int] = set()
        """Folders without `_metadata` already named in the log."""
        """Restore points whose non-restored state was logged (once each)."""
        self._claimed: RestorePoint | None = None
        self._refused: StateRestoreError | None = None
        self._fallbacks_allowed: set[str] = set()
        """Restore points a fallback to which went on with duplicates allowed (warned once)."""
        """A fallback refused (`_check_fallback`): every later choice fails the same way, so
        nothing (a sink cleanup at the job's end included) acts as if it had fallen back."""
        """A savepoint restored in claim mode, deleted once this run's checkpoints subsume it."""

    @property
    def from_savepoint(self) -> bool:
        """The job starts from a savepoint (or retained checkpoint) the user named."""
        return self.chooser.savepoint is not None

    def choose(self) -> RestorePoint | None:
        """What the next attempt restores (restore_point.py): the newest intact candidate,
        logged when it falls back past a damaged one. Raises when none is left."""
        if self._refused is not None:
            raise self._refused
        name, storage = self._graph.job_name, self._storage
        ids = storage.completed_checkpoint_ids()
        restore = self._settings.savepoint_restore
        if restore is not None:  # only this run's checkpoints come before the savepoint
            ids = [n for n in ids if n >= self.run_first_checkpoint_id]
        # the job's own savepoints count too (a rerun after a stop continues from its savepoint)
        savepoints = self._history.completed_savepoints(
            self.run_first_checkpoint_id if restore else 1
        )
        candidates = self.chooser.candidates(ids, storage.checkpoint_dir, savepoints)
        choice = self.chooser.choose(candidates, load_checked)
        above = completed = None
        if choice.point is not None:
            above = self._above(choice.point)
            completed = self._completed_above(above)
            if choice.damaged or completed is True:
                # a fallback: past damaged candidates, or past one whose _metadata is gone
                self._check_fallback(choice.damaged, choice.point)
        # unknown (None) whether one completed above: sinks look
        self.abandoned_above = None if above is None or completed is False else above
        if choice.note is not None:
            log.warning("job '%s': %s", name, choice.note)
        point = self.point = choice.point
        self._say_incomplete(point)
        if point is None:
            return None
        log.info("job '%s': restoring %s", name, point.describe())
        where = point.candidate.describe()
        skipped = check_compatible(
            self._graph,
            point.metadata,
            where,
            allow_non_restored_state=restore is not None and restore.allow_non_restored_state,
        )
        if skipped and point.folder.uri not in self._said_skipped:
            self._said_skipped.add(point.folder.uri)
            log.warning(
                "job '%s': %s holds state of operators not in this job, not restored "
                "(allowed): %s", name, where, ", ".join(skipped),
            )  # fmt: skip
        if point.candidate.user_given and restore is not None:
            if restore.restore_mode is RestoreMode.CLAIM:
                self._claimed = point
            elif point.folder.uri == storage.checkpoint_dir(point.checkpoint_id).uri:
                storage.protected.add(point.checkpoint_id)  # no-claim: retention must not delete
                storage.shared.keep(name for name, _ in shared_files(point.metadata))
        return point

    def _above(self, point: RestorePoint) -> int:
        if point.candidate.user_given:
            return self.run_first_checkpoint_id - 1
        return point.checkpoint_id

    def _completed_above(self, checkpoint_id: int) -> bool | None:
        """Whether a checkpoint or savepoint of the job's folder above `checkpoint_id`
        completed: its folder holds `_metadata` (intact or not), or the history records it
        completed (a `_metadata` lost since). None when either cannot be read now."""
        try:
            if any(n > checkpoint_id for n in self._storage.completed_checkpoint_ids()):
                return True
            entries = self._history.read_entries()
        except CheckpointStorageError:
            return None
        return any(
            entry.stats.checkpoint_id > checkpoint_id
            and entry.stats.status is CheckpointStatsStatus.COMPLETED
            for entry in entries
        )

    def _check_fallback(self, damaged: tuple[str, ...], point: RestorePoint) -> None:
        """A fallback to `point` past the `damaged` candidates: every sink must take back
        what those committed, unless duplicates were allowed (then a warning). Raises
        StateRestoreError in one line naming the damaged checkpoint, the sinks and the
        choices."""
        refusing = sinks_refusing_fallback(self._graph)
        if not refusing or point.folder.uri in self._fallbacks_allowed:
            return
        target = point.candidate.describe()
        sinks = ", ".join(refusing)
        gone = f"a checkpoint above {target} completed but its _metadata is gone"
        what = "; ".join(damaged) or gone
        if self._settings.allow_fallback_duplicates:
            self._fallbacks_allowed.add(point.folder.uri)  # said once per restore point
            log.warning(
                "job '%s': %s; falling back to %s with duplicates allowed: %s commit(s) "
                "again the output committed after it", self._graph.job_name, what, target,
                sinks,
            )  # fmt: skip
            return
        self._refused = StateRestoreError(
            f"{what}; falling back to {target} would commit the output committed after it "
            f"twice, since {sinks} cannot take it back: restore a savepoint with "
            "--from-savepoint PATH, or rerun with --allow-fallback-duplicates to accept "
            "duplicates"
        )
        raise self._refused

    def _say_incomplete(self, point: RestorePoint | None) -> None:
        """Name, once, each folder of an earlier run newer than the restore point that lacks
        `_metadata`: a checkpoint that never completed, or one whose `_metadata` was lost."""
        above = -1 if point is None else point.checkpoint_id
        for n in self._storage.incomplete_checkpoint_ids():
            if above < n < self.run_first_checkpoint_id and n not in self._said_incomplete:
                self._said_incomplete.add(n)
                log.warning(
                    "job '%s': %s has no _metadata (it never completed, or its _metadata was "
                    "lost): not restored", self._graph.job_name, self._storage.checkpoint_dir(n),
                )  # fmt: skip

    def failure_decision(
        self, ran: bool, failure: AttemptFailure
    ) -> RestartDecision | GiveUp | None:
        """For an attempt that failed while restoring (`ran`: every task ran, so it did not):
        fall back at once past a damaged checkpoint, or give up on a repeated restore
        failure. None: the restart strategy decides."""
        if ran or self.point is None:
            return None  # it ran (or restored nothing): not a failure at restore
        decision = self.chooser.restore_failed(self.point, failure.cause, failure.summary)
        if isinstance(decision, FallBack):
            # not the job's failure: no restart counted, no delay (the fallback is logged when
            # the next attempt chooses its restore point)
            return RestartDecision(True, 0, "falling back to an older checkpoint")
        return decision if isinstance(decision, GiveUp) else None

    def release_claimed(self, completed: list[CheckpointStats]) -> None:
        """Claim mode: the restored folder belongs to the job, and goes once this run's newest
        `retained` checkpoints (of `completed`) no longer include it, as a subsumed
        checkpoint would."""
        claimed = self._claimed
        own = [s for s in completed if not s.is_savepoint]
        if claimed is None or len(own) < self._settings.retained_checkpoints:
            return
        self._claimed = None
        name, what = self._graph.job_name, claimed.candidate.describe()
        try:  # with the shared files it referenced (incremental checkpoints)
            self._storage.release_restored(claimed.folder, claimed.metadata)
        except (OSError, StateRestoreError) as error:
            log.warning("job '%s': cannot delete the claimed %s: %s", name, what, error)
            return
        log.info("job '%s': deleted the claimed %s (subsumed by checkpoint %d)",
                 name, what, own[-1].checkpoint_id)  # fmt: skip


def sinks_refusing_fallback(graph: JobGraph) -> list[str]:
    """The job's sinks that cannot take back output (`Sink.survives_fallback`), each as
    `'name' (uid ..., what it is)`."""
    refusing = []
    for vertex in graph.vertices:
        for op in vertex.operators:
            sink = op.transformation.sink
            if sink is not None and not sink.survives_fallback():
                refusing.append(f"'{op.name}' (uid {op.uid}, {sink.describe()})")
    return refusing


def load_checked(folder: _fs.Location) -> dict[str, Any]:
    """A restore candidate's `_metadata`, after a cheap check that its state files exist and
    are long enough (a missing file costs no deployment)."""
    metadata = load_metadata(folder)
    check_files(folder, metadata)
    return metadata
