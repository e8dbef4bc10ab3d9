"""Preparing a job before its first attempt: source splits, sinks, and code that can ship."""

from __future__ import annotations

from pyspark import cloudpickle

from barrierflow.cluster.jobmaster.user_code import register_user_modules_by_value
from barrierflow.connectors.base import SourceSplit
from barrierflow.errors import BarrierflowError
from barrierflow.graph.job_graph import JobGraph, SubtaskId


def create_splits(graph: JobGraph) -> dict[SubtaskId, list[SourceSplit]]:
    """Every source's splits, dealt round-robin to its subtasks."""
    assigned: dict[SubtaskId, list[SourceSplit]] = {}
    for vertex in graph.vertices:
        if not vertex.is_source:
            continue
        source = vertex.operators[0].transformation.source
        splits = source.create_splits()
        for subtask in vertex.subtasks():
            assigned[subtask] = splits[subtask.subtask_index :: vertex.parallelism]
    return assigned


def prepare_sinks(graph: JobGraph) -> None:
    """Let every sink check and create its destination before any task runs."""
    for vertex in graph.vertices:
        for op in vertex.operators:
            if op.transformation.sink is not None:
                op.transformation.sink.prepare()


def shippable_graph(graph: JobGraph) -> JobGraph:
    """Fail on the driver, with the operator's name, if user code cannot be shipped."""
    register_user_modules_by_value()
    for vertex in graph.vertices:
        for op in vertex.operators:
            try:
                cloudpickle.dumps(op.transformation)
            except Exception as error:
                raise BarrierflowError(
                    f"operator '{op.name}' (uid {op.uid}) cannot be sent to the tasks: {error}"
                ) from error
    return graph
