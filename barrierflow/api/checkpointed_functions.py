"""Which operators host a `CheckpointedFunction`: wrappers that pass its checkpointing
through, and the refusal where an operator cannot host it.

A user function reaches its operator either as itself (map, filter, flat_map, process,
keyed process, keyed reduce, co-process, window functions) or inside a wrapper the API
adds (co_map, co_flat_map, all-window functions). A wrapper of a `CheckpointedFunction`
must be one too, or the operator never sees the function's operator list state. Where
no operator can host it (async I/O, joins, co-group), the job is refused when it is
defined, naming the function, instead of running with state that is never initialised.
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import (
    CheckpointedFunction,
    FunctionInitializationContext,
    FunctionSnapshotContext,
)
from barrierflow.errors import JobDefinitionError

SUPPORTED = (
    "map, flat_map, filter, process, key_by(...).process/reduce, connect(...).process/map/"
    "flat_map, and window functions (reduce, aggregate, process, apply; one per window)"
)
"""Where a CheckpointedFunction keeps operator list state (for error messages)."""


class DelegatedCheckpointing(CheckpointedFunction):
    """Mixed into an API wrapper whose user function (`self.function`) is a
    `CheckpointedFunction`: the operator's calls reach the user function."""

    function: Any

    def initialize_state(self, context: FunctionInitializationContext) -> None:
        self.function.initialize_state(context)

    def snapshot_state(self, context: FunctionSnapshotContext) -> None:
        self.function.snapshot_state(context)


def refuse_checkpointed(function: Any, where: str) -> None:
    """Raise JobDefinitionError when `function` is a CheckpointedFunction, which `where`
    (e.g. "an interval join's process function") cannot host."""
    if isinstance(function, CheckpointedFunction):
        raise JobDefinitionError(
            f"{type(function).__name__} is a CheckpointedFunction, but {where} cannot keep "
            f"operator list state (it would never be initialised or checkpointed). "
            f"CheckpointedFunction is supported in {SUPPORTED}"
        )


def one_checkpointed(functions: tuple[Any, ...], where: str) -> None:
    """Refuse more than one CheckpointedFunction among the functions of one operator."""
    checkpointed = [f for f in functions if isinstance(f, CheckpointedFunction)]
    if len(checkpointed) > 1:
        names = " and ".join(type(f).__name__ for f in checkpointed)
        raise JobDefinitionError(
            f"{names} are both CheckpointedFunctions in one {where}; an operator hosts the "
            "operator list state of one function: keep the state in one of them"
        )
