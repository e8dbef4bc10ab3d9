"""A job's checkpoint folder read from outside the job: the completed checkpoints still on
disk and the history of finished checkpoints with their statistics.

A running job shows its checkpoints through its REST endpoint; once it stopped (or from
another machine) only its folder `<checkpoint dir>/<job name>/` is left. `read_checkpoints`
reads it at any URI the checkpoint storage takes, without Spark: `barrierflow checkpoints`
prints it, and a user's script can read the same values. Public as `barrierflow.jobs`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from barrierflow import _fs
from barrierflow.checkpoint.history import HISTORY_FILE, CheckpointHistoryFile
from barrierflow.checkpoint.history_codec import HistoryRecord, encode_record
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.errors import BarrierflowError

__all__ = ["JobCheckpoints", "RetainedCheckpoint", "checkpoint_summary", "read_checkpoints"]


@dataclass(frozen=True)
class RetainedCheckpoint:
    """A completed checkpoint still on disk (its `_metadata` written)."""

    checkpoint_id: int
    is_final: bool
    """Taken as the job finished (its sources ended)."""
    operators: int
    """How many operators its metadata holds state for."""
    path: str


@dataclass(frozen=True)
class JobCheckpoints:
    """What a job's checkpoint folder holds: `retained` by id, `history` oldest first (each
    a `HistoryRecord`: the job run's id and the checkpoint's `CheckpointStats`)."""

    job_name: str
    folder: str
    retained: tuple[RetainedCheckpoint, ...]
    history: tuple[HistoryRecord, ...]
    history_location: str
    """The history file, which keeps the last `history_limit` finished checkpoints."""
    history_limit: int


def read_checkpoints(checkpoint_dir: str | os.PathLike[str], job_name: str) -> JobCheckpoints:
    """The checkpoints of `job_name` under `checkpoint_dir` (a path or URI). Raises
    BarrierflowError naming the folder when it holds no such job (and the jobs it holds)
    or a file that cannot be read as a checkpoint's; OSError when storage fails."""
    storage = FileSystemCheckpointStorage(os.fspath(checkpoint_dir), job_name)
    try:
        _require_job_folder(storage, job_name)
    except OSError as error:
        raise BarrierflowError(f"cannot read {os.fspath(checkpoint_dir)}: {error}") from error
    history = CheckpointHistoryFile(storage.job_dir)
    entries = tuple(history.read_entries())
    retained = []
    for checkpoint_id in storage.completed_checkpoint_ids():
        metadata = storage.load_metadata(checkpoint_id)
        retained.append(
            RetainedCheckpoint(
                checkpoint_id,
                bool(metadata.get("is_final", False)),
                len(metadata.get("operators", {})),
                str(storage.checkpoint_dir(checkpoint_id)),
            )
        )
    return JobCheckpoints(
        job_name,
        str(storage.job_dir),
        tuple(retained),
        entries,
        str(history.location),
        history.limit,
    )


def checkpoint_summary(record: HistoryRecord, *, details: bool = False) -> dict[str, Any]:
    """A history record as JSON-ready values, the shape of the REST endpoint's checkpoint
    entries; without `details`, the per-subtask figures are left out."""
    summary = encode_record(record.stats, job_id=record.job_id)
    if not details:
        del summary["tasks"]
    return summary


def _require_job_folder(storage: FileSystemCheckpointStorage, job_name: str) -> None:
    """A clear error when the checkpoint folder holds no folder for `job_name` (naming
    those it holds)."""
    if _fs.is_dir(storage.job_dir):
        return
    if not _fs.is_dir(storage.root):
        raise BarrierflowError(f"checkpoint folder {storage.root} does not exist")
    jobs = [
        name
        for name in _fs.list_dir(storage.root)
        if any(
            n == HISTORY_FILE or n.startswith("chk-")
            for n in _fs.list_dir(storage.root.child(name))
        )
    ]
    known = f"; it holds the jobs: {', '.join(jobs)}" if jobs else "; it holds no jobs"
    raise BarrierflowError(f"no job '{job_name}' in {storage.root}{known}")
