"""The job graph: chained operators (vertices), edges with partitioners, and the
subtasks and channels they expand to at run time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from barrierflow.graph.transformation import Transformation
from barrierflow.runtime.deployment import SubtaskId
from barrierflow.runtime.operators.base import DEFAULT_AUTO_WATERMARK_INTERVAL_MS
from barrierflow.runtime.partitioners import Partitioner

__all__ = ["ChainedOperator", "JobEdge", "JobGraph", "JobVertex", "SubtaskId"]


@dataclass
class ChainedOperator:
    uid: str
    name: str
    transformation: Transformation

    def make_operator(self) -> Any:
        return self.transformation.make_operator(self.uid)


@dataclass
class JobEdge:
    edge_id: int
    source_vertex: int
    target_vertex: int
    partitioner: Partitioner
    source_operator: int = -1
    """Index in the source vertex's chain of the operator that feeds the edge (-1: the last)."""
    side_output: str | None = None
    """The OutputTag id of the side output the edge carries; None for the main output."""
    target_input: int = 0
    """Which input of the target vertex's first operator the edge feeds (0, or 1 for the
    second input of a two-input operator)."""


@dataclass
class JobVertex:
    vertex_id: int
    parallelism: int
    operators: list[ChainedOperator]
    inputs: list[JobEdge] = field(default_factory=list)
    outputs: list[JobEdge] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " -> ".join(op.name for op in self.operators)

    @property
    def is_source(self) -> bool:
        return self.operators[0].transformation.kind == "source"

    def subtasks(self) -> list[SubtaskId]:
        return [SubtaskId(self.vertex_id, i) for i in range(self.parallelism)]


@dataclass
class JobGraph:
    job_name: str
    max_parallelism: int
    vertices: list[JobVertex]
    """In topological order: every edge goes from a lower to a higher vertex id."""
    edges: list[JobEdge]
    auto_watermark_interval_ms: int = DEFAULT_AUTO_WATERMARK_INTERVAL_MS
    """How often sources and watermark assigners ask their generators for a watermark."""
    job_parameters: dict[str, str] = field(default_factory=dict)
    """The global job parameters (`ExecutionConfig.set_global_job_parameters`), which user
    functions read with `runtime_context.get_job_parameter(key, default)`."""

    def vertex(self, vertex_id: int) -> JobVertex:
        return self.vertices[vertex_id]

    def all_subtasks(self) -> list[SubtaskId]:
        return [s for v in self.vertices for s in v.subtasks()]

    def source_subtasks(self) -> list[SubtaskId]:
        return [s for v in self.vertices if v.is_source for s in v.subtasks()]

    def operator_uids(self) -> list[str]:
        return [op.uid for v in self.vertices for op in v.operators]

    def input_channels(self, subtask: SubtaskId) -> list[tuple[int, SubtaskId]]:
        """(edge id, upstream subtask) for every channel into `subtask`, in gate order."""
        channels = []
        for edge in self.vertex(subtask.vertex_id).inputs:
            upstream = self.vertex(edge.source_vertex)
            if edge.partitioner.is_pointwise:
                channels.append(
                    (edge.edge_id, SubtaskId(upstream.vertex_id, subtask.subtask_index))
                )
            else:
                channels.extend((edge.edge_id, s) for s in upstream.subtasks())
        return channels

    def input_channel_inputs(self, subtask: SubtaskId) -> list[int]:
        """For every channel of `input_channels(subtask)`, the operator input it feeds."""
        inputs = []
        for edge in self.vertex(subtask.vertex_id).inputs:
            width = (
                1 if edge.partitioner.is_pointwise else self.vertex(edge.source_vertex).parallelism
            )
            inputs.extend([edge.target_input] * width)
        return inputs

    def output_channels(self, subtask: SubtaskId, edge: JobEdge) -> list[SubtaskId]:
        """The downstream subtasks of `edge` that `subtask` sends to, in channel order."""
        downstream = self.vertex(edge.target_vertex)
        if edge.partitioner.is_pointwise:
            return [SubtaskId(downstream.vertex_id, subtask.subtask_index)]
        return downstream.subtasks()

    def describe(self) -> str:
        lines = []
        for v in self.vertices:
            outs = ", ".join(
                f"{e.partitioner!r} -> {e.target_vertex}"
                + (f" (side output {e.side_output})" if e.side_output else "")
                for e in v.outputs
            )
            lines.append(f"[{v.vertex_id}] {v.name} (parallelism {v.parallelism}) {outs}")
        return "\n".join(lines)
