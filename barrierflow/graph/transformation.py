"""The logical pipeline a user builds: one Transformation per API call."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from barrierflow.connectors.base import Sink, Source
from barrierflow.graph.partitioners import Partitioner

_ids = itertools.count()


@dataclass(eq=False)
class Transformation:
    """A node of the logical pipeline.

    `kind` is "source", "operator", "sink" or "partition". A partition node is
    virtual: it only sets the partitioner of the edge into the next operator.
    Operators are described by class and arguments and built per subtask, so
    every subtask gets its own copy of the user function.
    """

    kind: str
    name: str
    inputs: list[Transformation]
    operator_class: type | None = None
    operator_args: tuple[Any, ...] = ()
    source: Source | None = None
    sink: Sink | None = None
    partitioner: Partitioner | None = None
    uid: str | None = None
    parallelism: int | None = None
    id: int = field(default_factory=lambda: next(_ids))

    def make_operator(self, uid: str) -> Any:
        assert self.operator_class is not None
        return self.operator_class(uid, self.name, *self.operator_args)
