"""Choosing what an attempt restores, and falling back past damaged checkpoints.

The candidates, newest first by checkpoint id: the retained completed checkpoints of the
job's folder and the job's savepoints its history records (a rerun after a stop with
savepoint resumes from that savepoint, not from the older checkpoint before it) or, for a
job started from a savepoint (`--from-savepoint`), the checkpoints and savepoints this run
completed and then that savepoint. The chooser reads each candidate's
`_metadata` through an injected loader and takes the first intact one; a candidate whose
files turn out damaged (at the driver, or when a task restores it) is marked so and never
chosen again in this run, and the next attempt falls back to the previous candidate, which
the JobMaster logs in one line naming the file. Never silently empty: with every candidate
damaged, the job fails with the cause. A savepoint the user named is never skipped: if it
is damaged the job fails at once. A restore failure that is not a damaged file (state the
job cannot take) goes through the restart strategy once; repeated at the same restore
point, it fails the job instead of looping. A fault of the storage (an S3 503, a timeout,
an I/O error that outlived the readers' retries: CheckpointStorageUnavailableError) is
never damage: nothing is marked, the restart strategy alone decides, and the next attempt
reads the same (newest) candidate again.

Pure: no files, clocks or logging; the JobMaster carries out its decisions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from barrierflow import _fs
from barrierflow.checkpoint.files import file_error, named_file
from barrierflow.checkpoint.metadata import is_savepoint
from barrierflow.errors import (
    CheckpointStorageError,
    CheckpointStorageUnavailableError,
    ConfigurationError,
    StateRestoreError,
)

__all__ = [
    "Candidate",
    "FallBack",
    "GiveUp",
    "RestoreMode",
    "RestorePoint",
    "RestorePointChooser",
    "Retry",
    "SavepointRestoreSettings",
]

MetadataLoader = Callable[[_fs.Location], dict[str, Any]]
"""Reads (and checks) the `_metadata` of a checkpoint folder; raises a file-naming error."""


class RestoreMode(enum.Enum):
    """Who owns a restored savepoint's or checkpoint's files afterwards (Flink's names)."""

    NO_CLAIM = "no-claim"
    """The user: the job never deletes or changes the folder (Flink's default)."""
    CLAIM = "claim"
    """The job: once newer checkpoints of the job subsume it, the folder is deleted."""


@dataclass(frozen=True)
class SavepointRestoreSettings:
    """Where a job starts from (Flink's `execution.savepoint.path`,
    `execution.savepoint.ignore-unclaimed-state`, `execution.savepoint-restore-mode`).

    >>> s = SavepointRestoreSettings.for_path("/sp/savepoint-ab12cd-0123456789ab", True, "claim")
    >>> (s.allow_non_restored_state, s.restore_mode.value)
    (True, 'claim')
    """

    path: str
    """A savepoint folder, a retained checkpoint folder (chk-N) or its `_metadata` file."""
    allow_non_restored_state: bool = False
    """Skip state of operators the job no longer has (logged) instead of refusing it."""
    restore_mode: RestoreMode = RestoreMode.NO_CLAIM

    @classmethod
    def for_path(
        cls,
        path: str,
        allow_non_restored_state: bool = False,
        restore_mode: str | RestoreMode = RestoreMode.NO_CLAIM,
    ) -> SavepointRestoreSettings:
        if not path:
            raise ConfigurationError("the savepoint path is empty")
        try:
            mode = RestoreMode(restore_mode)
        except ValueError:
            choices = ", ".join(m.value for m in RestoreMode)
            raise ConfigurationError(
                f"unknown restore mode {restore_mode!r}; choose from {choices}"
            ) from None
        return cls(str(path), allow_non_restored_state, mode)


@dataclass(frozen=True)
class Candidate:
    """A folder an attempt may restore from."""

    folder: _fs.Location
    checkpoint_id: int | None = None
    """The id of a checkpoint or savepoint of this job; None for a savepoint the user named."""
    savepoint: bool = False
    """A savepoint of this job (found in its history): skipped like a checkpoint if damaged."""

    @property
    def user_given(self) -> bool:
        return self.checkpoint_id is None

    def describe(self) -> str:
        """`checkpoint 7`, `savepoint 9` (one of the job's), or `savepoint file:///sp/...`
        (the one the user named)."""
        if self.checkpoint_id is None:
            return f"savepoint {self.folder}"
        return f"{'savepoint' if self.savepoint else 'checkpoint'} {self.checkpoint_id}"


@dataclass(frozen=True)
class RestorePoint:
    """The chosen candidate with its `_metadata`."""

    candidate: Candidate
    metadata: dict[str, Any]

    @property
    def checkpoint_id(self) -> int:
        return int(self.metadata["checkpoint_id"])

    @property
    def folder(self) -> _fs.Location:
        return self.candidate.folder

    def describe(self) -> str:
        """What is restored and from where, for the log: `savepoint 9 from file:///sp/...`."""
        kind = "savepoint" if is_savepoint(self.metadata) else "checkpoint"
        return f"{kind} {self.checkpoint_id} from {self.folder}"


@dataclass(frozen=True)
class Choice:
    """What `choose` decided: the point (None: start empty) and the line to log, if any."""

    point: RestorePoint | None
    note: str | None = None
    damaged: tuple[str, ...] = ()
    """The newer candidates found damaged by this choice, one line each (`checkpoint 7 is
    damaged (...)`): the choice falls back past them, abandoning what they committed."""


@dataclass(frozen=True)
class FallBack:
    """The restore point is damaged: restart at once from the previous candidate."""

    damaged: str
    """`checkpoint 7 is damaged (<file>: ...)`."""


@dataclass(frozen=True)
class Retry:
    """Not a damaged file: let the restart strategy decide."""


@dataclass(frozen=True)
class GiveUp:
    """Fail the job with this error (a damaged savepoint, or a restore failure repeated)."""

    error: BaseException


RestoreFailureDecision = FallBack | Retry | GiveUp
"""What the JobMaster does after an attempt failed while it restored."""


@dataclass
class RestorePointChooser:
    """Which checkpoint or savepoint each attempt restores. JobMaster thread only.

    Guarantees an attempt restores the newest candidate not known to be damaged, that a
    damaged candidate is reported once (in the line of the fallback that skips it), and that
    it never answers "start empty" after a damaged candidate. Assumes candidates are given
    newest first and that the loader raises errors naming the file (checkpoint/files.py).
    """

    savepoint: Candidate | None = None
    damaged: dict[str, str] = field(default_factory=dict)
    """Folder URI -> why it is damaged (the file and the error)."""
    _unreported: list[str] = field(default_factory=list)
    _last_failure: tuple[str, str] | None = None
    """(folder URI, summary) of the last restore failure that was not a damaged file."""

    def candidates(
        self,
        checkpoint_ids: Sequence[int],
        folder_of: Callable[[int], _fs.Location],
        savepoints: Mapping[int, _fs.Location] | None = None,
    ) -> list[Candidate]:
        """The candidates, newest first: the given completed checkpoints and the job's own
        `savepoints` (by checkpoint id) merged by id, then the savepoint the user named."""
        found = {
            n: Candidate(folder, n, savepoint=True) for n, folder in (savepoints or {}).items()
        }
        found.update((n, Candidate(folder_of(n), n)) for n in checkpoint_ids)  # one folder an id
        newest_first = [found[n] for n in sorted(found, reverse=True)]
        if self.savepoint is not None:
            newest_first.append(self.savepoint)
        return newest_first

    def choose(self, candidates: Sequence[Candidate], load: MetadataLoader) -> Choice:
        """The newest intact candidate (None if there were none at all). Raises
        StateRestoreError naming the files if every candidate is damaged, or if the savepoint
        the user named cannot be read, and lets CheckpointStorageUnavailableError through
        (the storage failed to answer: nothing is marked damaged, and the next attempt
        reads the same candidate again)."""
        for candidate in candidates:
            if candidate.folder.uri in self.damaged:
                continue
            try:
                metadata = load(candidate.folder)
            except CheckpointStorageUnavailableError as error:  # not damage: nothing marked
                unreadable = CheckpointStorageUnavailableError(
                    f"cannot read {candidate.describe()} now ({error})"
                )
                raise file_error(unreadable, named_file(error) or candidate.folder) from error
            except (CheckpointStorageError, StateRestoreError) as error:
                if candidate.user_given:
                    raise StateRestoreError(
                        f"cannot restore from {candidate.describe()}: {error}"
                    ) from error
                self._mark(candidate, error)
                continue
            damaged = tuple(self._unreported)
            return Choice(RestorePoint(candidate, metadata), self._note(candidate), damaged)
        if self._unreported or self.damaged:
            gone = "; ".join(self._unreported) or "every retained checkpoint is damaged"
            self._unreported = []
            raise StateRestoreError(
                f"{gone}; no intact checkpoint is left to restore from (start from a savepoint "
                "with --from-savepoint, or move the job's checkpoint folder away to start "
                "from empty state)"
            )
        return Choice(None)

    def restore_failed(
        self, point: RestorePoint, cause: BaseException | None, summary: str
    ) -> RestoreFailureDecision:
        """An attempt restoring `point` failed before it ran, with `cause` (`summary`)."""
        if cause is None or not _is_restore_error(cause):
            return Retry()  # not about state: the restart strategy decides, as for any failure
        file = named_file(cause)
        if file is not None and point.folder.holds(file):
            if point.candidate.user_given:
                error = StateRestoreError(
                    f"cannot restore from {point.candidate.describe()}: {cause}"
                )
                error.__cause__ = cause
                return GiveUp(error)
            return FallBack(self._mark(point.candidate, cause))
        failure = (point.folder.uri, summary)
        if failure == self._last_failure:
            error = StateRestoreError(
                f"restoring {point.candidate.describe()} failed twice in a row: {summary}"
            )
            error.__cause__ = cause
            return GiveUp(error)
        self._last_failure = failure
        return Retry()

    def _mark(self, candidate: Candidate, error: BaseException) -> str:
        line = f"{candidate.describe()} is damaged ({error})"
        self.damaged[candidate.folder.uri] = str(error)
        self._unreported.append(line)
        return line

    def _note(self, chosen: Candidate) -> str | None:
        if not self._unreported:
            return None
        line = f"{'; '.join(self._unreported)}; restoring from {chosen.describe()} instead"
        self._unreported = []
        return line


def _is_restore_error(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, is about reading or restoring state,
    and not a fault of the checkpoint storage (CheckpointStorageUnavailableError anywhere in
    the chain: the file may be sound, so the restart strategy alone decides)."""
    seen: set[int] = set()
    found = False
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, CheckpointStorageUnavailableError):
            return False
        if isinstance(current, (StateRestoreError, CheckpointStorageError)):
            found = True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return found
