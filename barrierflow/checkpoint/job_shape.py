"""What checkpoint metadata reads of a job graph, as protocols: the checkpoint package sits
below graph/, so it names the few attributes it uses instead of importing `JobGraph`.

`barrierflow.graph.job_graph.JobGraph` and `SubtaskId` satisfy these structurally.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Subtask:
...     vertex_id: int
...     subtask_index: int
>>> isinstance(Subtask(0, 1), SubtaskRef)
True
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable


class OperatorShape(Protocol):
    """One chained operator: its stable uid and its display name."""

    @property
    def uid(self) -> str: ...

    @property
    def name(self) -> str: ...


class VertexShape(Protocol):
    """One job vertex: its parallelism and its chain of operators, head first."""

    @property
    def parallelism(self) -> int: ...

    @property
    def operators(self) -> Sequence[OperatorShape]: ...


@runtime_checkable
class SubtaskRef(Hashable, Protocol):
    """One parallel instance of a vertex; ordered, and usable as a dict key."""

    @property
    def vertex_id(self) -> int: ...

    @property
    def subtask_index(self) -> int: ...


class JobShape(Protocol):
    """The job as checkpoint metadata sees it: names, parallelism and operator uids."""

    @property
    def job_name(self) -> str: ...

    @property
    def max_parallelism(self) -> int: ...

    @property
    def vertices(self) -> Sequence[VertexShape]: ...

    def vertex(self, vertex_id: int) -> VertexShape: ...

    def operator_uids(self) -> Sequence[str]: ...
