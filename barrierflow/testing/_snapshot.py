"""What a harness snapshot holds, and which part of it a new subtask restores.

The split is the runtime's (`checkpoint/metadata.restore_assignment`): a new subtask gets
the keyed and timer sections of every old subtask whose key-group range overlaps its own
(its backend and timer service keep only their own key groups of them) and every old
subtask's operator state (the function's lists redistribute as they say).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from barrierflow import _fs
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.state.key_groups import KeyGroupRange, key_group_range_for_subtask
from barrierflow.state.operator_state import decode_operator_state


@dataclass(frozen=True)
class SubtaskState:
    """One old subtask's part of a snapshot."""

    subtask_index: int
    key_group_range: KeyGroupRange
    keyed: bytes | None
    """Keyed state in the canonical "keyed-state" format (a savepoint's), or None."""
    timers: bytes | None
    """The timer service's "timers" envelope, or None without timers."""
    operator: Any
    """The user function's operator list state (decoded as a checkpoint file holds it)."""


@dataclass(frozen=True)
class HarnessSnapshot:
    """A snapshot of one or more subtasks of an operator, taken by `harness.snapshot()`.

    Restore it with `restore_from=` into a harness of any parallelism (the same max
    parallelism): `HarnessSnapshot.combine` joins the snapshots of every subtask first, as
    a checkpoint holds all of them.
    """

    max_parallelism: int
    parallelism: int
    subtasks: tuple[SubtaskState, ...]
    checkpoint_id: int = 0
    base: _fs.Location | None = None
    """The checkpoint folder native keyed sections resolve against (`from_savepoint`)."""

    @classmethod
    def from_savepoint(cls, path: str | Any, uid: str) -> HarnessSnapshot:
        """The state of operator `uid` in a savepoint or retained checkpoint of a job (a
        folder or its `_metadata`), to test a function against the state a job left:
        `restore_from=HarnessSnapshot.from_savepoint(folder, "my-uid")`. Native RocksDB and
        changelog sections restore as the job would restore them.

        StateRestoreError names the file if the folder cannot be read; KeyError lists the
        uids it holds if `uid` is not one of them.
        """
        from barrierflow.state_processor import load

        snapshot = load(path)
        operators = snapshot.metadata["operators"]
        if uid not in operators:
            raise KeyError(
                f"{snapshot.path} holds no state of operator {uid!r}; it holds "
                f"{', '.join(sorted(operators)) or 'none'}"
            )
        stored, files = operators[uid], SubtaskStateReader()

        def section(entry: dict[str, Any], name: str) -> bytes | None:
            where = entry.get(name)
            if where is None:
                return None
            return files.slice(snapshot.folder.child(entry["file"]).uri, *map(int, where))

        subtasks = []
        for entry in stored["subtasks"]:
            operator = section(entry, "operator")
            subtasks.append(
                SubtaskState(
                    int(entry["subtask"]),
                    KeyGroupRange(*map(int, entry["key_group_range"])),
                    section(entry, "keyed"),
                    section(entry, "timers"),
                    None if operator is None else decode_operator_state(operator),
                )
            )
        return cls(
            snapshot.max_parallelism,
            int(stored.get("parallelism", len(subtasks))),
            tuple(sorted(subtasks, key=lambda s: s.subtask_index)),
            snapshot.checkpoint_id,
            snapshot.folder,
        )

    @classmethod
    def combine(cls, snapshots: Iterable[HarnessSnapshot]) -> HarnessSnapshot:
        """One snapshot of the whole operator from the snapshots of its subtasks."""
        taken = list(snapshots)
        if not taken:
            raise ConfigurationError("combine() needs at least one snapshot")
        first = taken[0]
        for other in taken[1:]:
            if (other.max_parallelism, other.parallelism) != (
                first.max_parallelism,
                first.parallelism,
            ):
                raise ConfigurationError(
                    f"cannot combine snapshots of parallelism {first.parallelism} (max "
                    f"{first.max_parallelism}) and {other.parallelism} (max "
                    f"{other.max_parallelism}): take them from one operator's subtasks"
                )
        subtasks = [state for snapshot in taken for state in snapshot.subtasks]
        indexes = [state.subtask_index for state in subtasks]
        if len(set(indexes)) != len(indexes):
            raise ConfigurationError(f"combine() got a subtask twice: subtasks {sorted(indexes)}")
        return cls(
            first.max_parallelism,
            first.parallelism,
            tuple(sorted(subtasks, key=lambda s: s.subtask_index)),
            max(snapshot.checkpoint_id for snapshot in taken),
            first.base,
        )

    def restored_state(
        self, max_parallelism: int, parallelism: int, subtask_index: int
    ) -> RestoredState:
        """What subtask `subtask_index` of `parallelism` restores from this snapshot."""
        if max_parallelism != self.max_parallelism:
            raise StateRestoreError(
                f"the snapshot was taken with max parallelism {self.max_parallelism}, this "
                f"harness has {max_parallelism}; keyed state cannot be redistributed across them"
            )
        own = key_group_range_for_subtask(max_parallelism, parallelism, subtask_index)
        self._check_covers(own, parallelism, subtask_index)
        keyed, timers, operator = [], [], []
        for state in self.subtasks:
            overlaps = len(state.key_group_range.intersection(own)) > 0
            if state.keyed is not None and overlaps:
                keyed.append(state.keyed)
            if state.timers is not None and overlaps:
                timers.append(state.timers)
            if state.operator is not None:
                operator.append((state.subtask_index, state.operator))
        return RestoredState(keyed=keyed, operator=operator, timers=timers, base=self.base)

    def _check_covers(self, own: KeyGroupRange, parallelism: int, subtask_index: int) -> None:
        """Refuse a restore that would silently miss key groups no snapshot part holds."""
        held = {group for state in self.subtasks for group in state.key_group_range}
        missing = [group for group in own if group not in held]
        if missing:
            have = sorted(state.subtask_index for state in self.subtasks)
            raise ConfigurationError(
                f"subtask {subtask_index} of {parallelism} owns key groups {own.start}-"
                f"{own.end}, but the snapshot holds only subtasks {have} of "
                f"{self.parallelism} (key groups {missing[0]}-{missing[-1]} missing): "
                f"restore from HarnessSnapshot.combine(<every subtask's snapshot>)"
            )
