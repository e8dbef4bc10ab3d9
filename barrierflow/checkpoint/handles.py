"""State handles: where a subtask's checkpointed state lives, as typed values.

A task acknowledges a checkpoint with a `SubtaskStateHandle`; the JobMaster turns
the handles of all subtasks into the checkpoint's metadata, and, when restoring,
the metadata back into an `OperatorRestore` per operator of each new subtask.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OperatorRestore:
    """What one operator restores from: its files in the checkpoint."""

    keyed: list[tuple[str, int, int]] = field(default_factory=list)
    """(file URI, offset, length) of each keyed snapshot overlapping this subtask."""
    operator: list[tuple[int, str, int, int]] = field(default_factory=list)
    """(old subtask index, file URI, offset, length) of every old subtask's operator state."""
    timers: list[tuple[str, int, int]] = field(default_factory=list)
    """(file URI, offset, length) of each timer snapshot overlapping this subtask."""
