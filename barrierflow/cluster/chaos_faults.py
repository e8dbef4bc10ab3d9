"""What `barrierflow chaos` arms for the restore of the next attempt (kinds restore, storage).

The kinds `exception`, `kill`, `executor` and `jvm` hit a running task. Two kinds hit the
lifecycle around a restore instead; `JobClient.inject_failure` fails the current attempt
(as `exception` does) and the JobMaster arms, here, what the next attempt meets:

- `restore`: the aimed subtask's next `DeployTask` says to fail while it restores
  (`fail_restore`): the task raises ChaosFailure after reading its channel state, before
  its operators restore. That attempt fails before it ran, the restart strategy decides
  (a ChaosFailure is no damage and says nothing about the input: no fallback, no
  "failed twice in a row", no repeated-failure count), and the attempt after it runs.
- `storage`: the next `_metadata` write below the job's folder fails (the checkpoint
  aborts; the checkpoint failure tolerance decides whether the attempt fails over), the
  next `READ_FAULTS` `_metadata` reads fail (the driver's restore retries them), and every
  subtask's next `DeployTask` arms `READ_FAULTS` faults on its state-file reads.

Every armed failure is used once. JobMaster thread only, but for the storage hook, which
any thread of the driver may call (checkpoint/chaos_faults.py).
"""

from __future__ import annotations

from barrierflow import _fs
from barrierflow.checkpoint.chaos_faults import TransientFaults
from barrierflow.checkpoint.storage import METADATA
from barrierflow.graph.job_graph import SubtaskId

READ_FAULTS = 2
"""Transient faults per armed read: fewer than the tries of checkpoint/retry.py's backoff,
so the retries absorb them (0.2 + 0.4 s of waiting)."""

ARMS = ("restore", "storage")
"""What `FailureInjectionRequested.arm` may name besides "" (nothing)."""


class ChaosArms:
    """The failures armed for the next deployment of each subtask, and the driver's storage
    faults below the job folder `job_dir`."""

    def __init__(self, job_dir: _fs.Location) -> None:
        self._fail_restore: dict[SubtaskId, str] = {}
        self._read_faults: set[SubtaskId] = set()
        self.storage = TransientFaults(
            lambda kind, loc: loc.name == METADATA and job_dir.holds(loc.uri)
        )
        """The driver's `_metadata` faults (installed at the first storage failure)."""

    def arm(self, what: str, subtask: SubtaskId, reason: str, subtasks: tuple[SubtaskId, ...]):
        """Arm `what` (one of ARMS, or "" for nothing) for the next deployment."""
        if what == "restore":
            self._fail_restore[subtask] = f"{reason}, while restoring"
        elif what == "storage":
            self.storage.install()
            self.storage.arm("write", 1)
            self.storage.arm("read", READ_FAULTS)
            self._read_faults.update(subtasks)
        elif what:
            raise ValueError(f"nothing to arm for {what!r}; the choices are {ARMS}")

    def at_deploy(self, subtask: SubtaskId) -> tuple[str | None, int]:
        """(why it fails while restoring, or None; its state-file read faults) for the
        `DeployTask` of `subtask`, disarmed."""
        faults = READ_FAULTS if subtask in self._read_faults else 0
        self._read_faults.discard(subtask)
        return self._fail_restore.pop(subtask, None), faults

    def close(self) -> None:
        self.storage.uninstall()
