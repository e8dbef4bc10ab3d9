"""The operator's side of `CheckpointedFunction`: restore a user function's operator list
state before `open`, and snapshot it at every barrier. Mailbox thread only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from barrierflow.core.functions import (
    CheckpointedFunction,
    FunctionInitializationContext,
    FunctionSnapshotContext,
    OperatorStateStore,
)
from barrierflow.runtime.operators.base import OperatorContext, RestoredState
from barrierflow.state.operator_list_state import OperatorListStateStore


@dataclass(frozen=True)
class _InitializationContext(FunctionInitializationContext):
    store: OperatorListStateStore
    restored: bool

    def is_restored(self) -> bool:
        return self.restored

    def get_operator_state_store(self) -> OperatorStateStore:
        return self.store


@dataclass(frozen=True)
class _SnapshotContext(FunctionSnapshotContext):
    checkpoint_id: int

    def get_checkpoint_id(self) -> int:
        return self.checkpoint_id


class FunctionOperatorState:
    """The operator list state of an operator's user function, if it is a
    `CheckpointedFunction` (else it does nothing and snapshots None).

    The operator's operator state is this function's list state: every old subtask's
    snapshot reaches each new subtask, which takes its share (`OperatorListStateStore`).
    """

    def __init__(self, function: Any) -> None:
        self._function = function if isinstance(function, CheckpointedFunction) else None
        self._store: OperatorListStateStore | None = None
        self._parallelism = 1

    def initialize(self, context: OperatorContext | None, restored: RestoredState | None) -> None:
        """Restore the store and call the function's `initialize_state` (before `open`)."""
        if self._function is None:
            return
        assert context is not None, "operator used before setup()"
        self._parallelism = context.parallelism
        snapshots = [(old, state) for old, state in (restored.operator if restored else ())]
        self._store = OperatorListStateStore.restored(
            snapshots, context.subtask_index, context.parallelism
        )
        self._function.initialize_state(_InitializationContext(self._store, restored is not None))

    def snapshot(self, checkpoint_id: int) -> Any:
        """The function's lists after its `snapshot_state`, or None without a function."""
        if self._function is None:
            return None
        assert self._store is not None, "snapshot before initialize"
        self._function.snapshot_state(_SnapshotContext(checkpoint_id))
        return self._store.snapshot(self._parallelism)
