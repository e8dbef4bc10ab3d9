"""The logical pipeline a user builds: one Transformation per API call."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from barrierflow.connectors.base import Sink, Source
from barrierflow.runtime.partitioners import Partitioner

_ids = itertools.count()

VIRTUAL_KINDS = frozenset({"partition", "union", "side_output"})
"""Transformation kinds that become no operator."""


@dataclass(eq=False)
class Transformation:
    """A node of the logical pipeline.

    `kind` is "source", "operator", "sink", or one of the virtual kinds, which
    become no operator: "partition" only sets the partitioner of the edge into the
    next operator, "union" merges its inputs into the next operator's one input,
    and "side_output" selects the side output `side_output` of its input operator.
    Operators are described by class and arguments and built per subtask, so
    every subtask gets its own copy of the user function.
    """

    kind: str
    name: str
    inputs: list[Transformation]
    operator_class: type | None = None
    operator_args: tuple[Any, ...] = ()
    operator_options: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the operator class, set after the API call (e.g. `dead_letters`
    by `with_dead_letters()`)."""
    source: Source | None = None
    sink: Sink | None = None
    partitioner: Partitioner | None = None
    uid: str | None = None
    parallelism: int | None = None
    side_output: str | None = None
    """The OutputTag id a "side_output" node selects."""
    two_inputs: bool = False
    """An "operator" with two logical inputs (connect, joins): `inputs[0]` feeds its first
    input, `inputs[1]` its second, each possibly a union of several streams."""
    chaining: str = "always"
    """How the operator chains: "always" (to its upstream when nothing redistributes in
    between), "head" (`start_new_chain`: begins a chain), "never" (`disable_chaining`)."""
    slot_sharing_group: str | None = None
    """PyFlink's slot sharing group, kept as a name: one Spark task slot per subtask here."""
    max_parallelism: int | None = None
    """The operator's own upper bound for its parallelism (`set_max_parallelism`)."""
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def is_virtual(self) -> bool:
        """Whether this node only shapes the edges around it (no operator of its own)."""
        return self.kind in VIRTUAL_KINDS

    def make_operator(self, uid: str) -> Any:
        assert self.operator_class is not None
        return self.operator_class(uid, self.name, *self.operator_args, **self.operator_options)
