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


Section = tuple[int, int]
"""(offset, length) of a section in the body of a subtask's state file."""


@dataclass(frozen=True)
class OperatorStateHandle:
    """Where one operator's snapshot sits in its subtask's state file (None: not taken)."""

    keyed: Section | None = None
    operator: Section | None = None
    timers: Section | None = None


@dataclass(frozen=True)
class SubtaskStateHandle:
    """What a subtask acknowledges: its state file of one checkpoint and what it holds."""

    file: str
    """The file's name, relative to the checkpoint's folder."""
    subtask: int
    """The subtask index that wrote it."""
    key_group_range: tuple[int, int]
    """(start, end), inclusive: the key groups of its keyed state and timers."""
    operators: dict[str, OperatorStateHandle] = field(default_factory=dict)
    """By operator uid."""
    channel_state: Section | None = None
    """In-flight data of an unaligned checkpoint, or None."""


def section_as_list(section: Section | None) -> list[int] | None:
    """A section as metadata and state-file headers store it: [offset, length]."""
    return None if section is None else list(section)
