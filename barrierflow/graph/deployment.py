"""Cutting a job graph into what each subtask is deployed with: one TaskDescriptor each."""

from __future__ import annotations

from barrierflow.graph.job_graph import JobGraph
from barrierflow.runtime.deployment import (
    InputChannelDescriptor,
    OperatorDescriptor,
    OutputEdgeDescriptor,
    SubtaskId,
    TaskDescriptor,
)


def build_task_descriptors(graph: JobGraph) -> dict[SubtaskId, TaskDescriptor]:
    """The descriptor of every subtask of `graph` (what the JobMaster ships to the tasks)."""
    return {subtask: task_descriptor(graph, subtask) for subtask in graph.all_subtasks()}


def task_descriptor(graph: JobGraph, subtask: SubtaskId) -> TaskDescriptor:
    """What `subtask` needs of `graph`: its chain, its channels in and out, peer names."""
    vertex = graph.vertex(subtask.vertex_id)
    chain_length = len(vertex.operators)
    inputs = tuple(
        InputChannelDescriptor(edge_id, upstream, operator_input)
        for (edge_id, upstream), operator_input in zip(
            graph.input_channels(subtask), graph.input_channel_inputs(subtask), strict=True
        )
    )
    outputs = tuple(
        OutputEdgeDescriptor(
            edge.edge_id,
            edge.partitioner,
            tuple(graph.output_channels(subtask, edge)),
            edge.source_operator + chain_length
            if edge.source_operator < 0
            else edge.source_operator,
            edge.side_output,
        )
        for edge in vertex.outputs
    )
    return TaskDescriptor(
        subtask=subtask,
        vertex_name=vertex.name,
        parallelism=vertex.parallelism,
        max_parallelism=graph.max_parallelism,
        operators=tuple(
            OperatorDescriptor(op.uid, op.name, op.transformation) for op in vertex.operators
        ),
        inputs=inputs,
        outputs=outputs,
        vertex_names={v.vertex_id: v.name for v in graph.vertices},
        auto_watermark_interval_ms=graph.auto_watermark_interval_ms,
        job_name=graph.job_name,
        job_parameters=graph.job_parameters,
    )
