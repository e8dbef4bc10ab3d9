"""The contract between a task and the operators of its chain.

Operators work on batches: a task hands each operator a list of records and
gets the list of its outputs, so Python pays one call per batch, not per record.
All methods run on the task's mailbox thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from barrierflow.state.key_groups import KeyGroupRange


@dataclass(frozen=True)
class OperatorContext:
    """Where an operator runs."""

    subtask_index: int
    parallelism: int
    max_parallelism: int
    key_group_range: KeyGroupRange
    attempt: int
    deployment_id: str


@dataclass(frozen=True)
class OperatorSnapshot:
    """The synchronous part of an operator's snapshot: already a copy, safe to upload later."""

    keyed: bytes | None = None
    operator: Any = None
    """msgpack-able operator state (source positions, sink transactions), or None."""


@dataclass
class RestoredState:
    """What a checkpoint holds for one operator, for one new subtask.

    `keyed` holds the keyed snapshots whose key-group range overlaps this subtask's;
    `operator` holds every old subtask's operator state as (old index, state), so the
    operator picks what is its own (sources take the union, sinks their share).
    """

    keyed: list[bytes] = field(default_factory=list)
    operator: list[tuple[int, Any]] = field(default_factory=list)


class StreamOperator:
    """One operator of a chain. Subclasses override what they need."""

    def __init__(self, uid: str, name: str) -> None:
        self.uid = uid
        self.name = name
        self.context: OperatorContext | None = None

    def setup(self, context: OperatorContext) -> None:
        self.context = context

    def initialize_state(self, restored: RestoredState | None) -> None:
        """Restore from a checkpoint (None: fresh start). Called once, before `open`."""

    def open(self) -> None:
        """Start user functions; runs after state is restored."""

    def process_batch(self, batch: list[Any]) -> list[Any]:
        raise NotImplementedError

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        """Copy this operator's state at the barrier of `checkpoint_id` (None: stateless)."""
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` is durable: commit side effects up to it."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` will never complete."""

    def close(self) -> None:
        """The job ended normally."""

    def abort(self) -> None:
        """The task is failing or cancelled: discard uncommitted side effects."""
