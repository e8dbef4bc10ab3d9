"""Turns the user's transformations into a JobGraph: resolves partitioners,
parallelism and uids, and chains forward-connected operators of equal parallelism."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from barrierflow.errors import JobDefinitionError
from barrierflow.graph.job_graph import (
    DEFAULT_AUTO_WATERMARK_INTERVAL_MS,
    ChainedOperator,
    JobEdge,
    JobGraph,
    JobVertex,
)
from barrierflow.graph.transformation import Transformation
from barrierflow.runtime.partitioners import ForwardPartitioner, Partitioner, RebalancePartitioner


def build_job_graph(
    job_name: str,
    transformations: list[Transformation],
    default_parallelism: int,
    max_parallelism: int,
    auto_watermark_interval_ms: int = DEFAULT_AUTO_WATERMARK_INTERVAL_MS,
    chaining: bool = True,
    job_parameters: dict[str, str] | None = None,
) -> JobGraph:
    """`chaining=False`: no operator chains to another (`env.disable_operator_chaining()`)."""
    nodes = [t for t in _with_ancestors(transformations) if not t.is_virtual]
    if not any(t.kind == "sink" for t in nodes):
        raise JobDefinitionError("the job has no sink: add sink_to(...) or print() to a stream")
    inputs = {t.id: _inputs_of(t) for t in nodes}
    reachable = _reachable_from_sinks(nodes, inputs)
    nodes = [t for t in nodes if t.id in reachable]

    parallelism = {t.id: t.parallelism or default_parallelism for t in nodes}
    for t in nodes:
        if parallelism[t.id] > max_parallelism:
            raise JobDefinitionError(
                f"operator '{t.name}' has parallelism {parallelism[t.id]}, above the max "
                f"parallelism {max_parallelism}; raise it with env.set_max_parallelism()"
            )
        if t.max_parallelism is not None and parallelism[t.id] > t.max_parallelism:
            raise JobDefinitionError(
                f"operator '{t.name}' has parallelism {parallelism[t.id]}, above its own max "
                f"parallelism {t.max_parallelism} (set_max_parallelism)"
            )
    uids = _assign_uids(nodes, inputs)
    consumers: dict[int, list[int]] = defaultdict(list)
    edge_partitioner: dict[tuple[int, int, str | None, int], Partitioner] = {}
    for t in nodes:
        for upstream, partitioner, side_output, target_input in inputs[t.id]:
            if side_output is None:
                consumers[upstream.id].append(t.id)
            edge_partitioner[(upstream.id, t.id, side_output, target_input)] = _resolve_partitioner(
                upstream, t, partitioner, parallelism
            )

    # Chain: t joins its single upstream's vertex when nothing redistributes in between.
    # Side outputs and unions always cross an edge: a chain is a line of main outputs.
    vertex_of: dict[int, int] = {}
    chains: list[list[Transformation]] = []
    for t in nodes:  # creation order is a topological order
        ups = inputs[t.id]
        if len(ups) == 1 and not t.two_inputs:
            upstream, partitioner, side_output, _ = ups[0]
            explicit = partitioner is not None
            chainable = (
                chaining
                and t.chaining == "always"
                and upstream.chaining != "never"
                and not explicit
                and side_output is None
                and upstream.kind != "sink"
                and len(consumers[upstream.id]) == 1
                and parallelism[upstream.id] == parallelism[t.id]
                and chains[vertex_of[upstream.id]][-1] is upstream
            )
            if chainable:
                vertex_of[t.id] = vertex_of[upstream.id]
                chains[vertex_of[t.id]].append(t)
                continue
        vertex_of[t.id] = len(chains)
        chains.append([t])

    vertices = [
        JobVertex(
            vertex_id=i,
            parallelism=parallelism[chain[0].id],
            operators=[ChainedOperator(uids[t.id], t.name, t) for t in chain],
        )
        for i, chain in enumerate(chains)
    ]
    edges: list[JobEdge] = []
    for t in nodes:
        for upstream, _, side_output, target_input in inputs[t.id]:
            if vertex_of[upstream.id] == vertex_of[t.id] and side_output is None:
                continue
            edge = JobEdge(
                len(edges),
                vertex_of[upstream.id],
                vertex_of[t.id],
                edge_partitioner[(upstream.id, t.id, side_output, target_input)],
                source_operator=chains[vertex_of[upstream.id]].index(upstream),
                side_output=side_output,
                target_input=target_input,
            )
            edges.append(edge)
            vertices[edge.source_vertex].outputs.append(edge)
            vertices[edge.target_vertex].inputs.append(edge)
    return JobGraph(
        job_name,
        max_parallelism,
        vertices,
        edges,
        auto_watermark_interval_ms,
        dict(job_parameters or {}),
    )


_Input = tuple[Transformation, Partitioner | None, str | None, int]
"""An operator's physical input: upstream operator, explicit partitioner, side output id,
and the operator input it feeds (0, or 1 for the second input of a two-input operator)."""


def _inputs_of(t: Transformation) -> list[_Input]:
    """The physical inputs of `t`; a two-input operator keeps which logical input each feeds."""
    if t.two_inputs:
        if len(t.inputs) != 2:
            raise JobDefinitionError(f"'{t.name}' needs exactly two inputs, got {len(t.inputs)}")
        return [
            (up, partitioner, side, index)
            for index, logical in enumerate(t.inputs)
            for up, partitioner, side in _physical_inputs(logical)
        ]
    return [
        (up, partitioner, side, 0)
        for i in t.inputs
        for up, partitioner, side in _physical_inputs(i)
    ]


def _physical_inputs(
    t: Transformation, partitioner: Partitioner | None = None
) -> list[tuple[Transformation, Partitioner | None, str | None]]:
    """Resolve virtual nodes: the last partition before an operator decides the edge, a
    union contributes each of its inputs, a side-output node names the producer's output."""
    side_output = None
    while t.kind in ("partition", "side_output"):
        if t.kind == "partition":
            partitioner = partitioner or t.partitioner
        elif side_output is None:
            side_output = t.side_output
        t = t.inputs[0]
    if t.kind == "union":
        if side_output is not None:
            raise JobDefinitionError("get_side_output() needs an operator, not a union")
        return [p for i in t.inputs for p in _physical_inputs(i, partitioner)]
    return [(t, partitioner, side_output)]


def _with_ancestors(transformations: list[Transformation]) -> list[Transformation]:
    """The steps and every step upstream of them, in creation order: a stream defined before
    an earlier `execute()` (which cleared the environment's steps) feeds the new job again,
    as Flink's graph generator walks back through a step's inputs."""
    found = {t.id: t for t in transformations}
    stack = list(transformations)
    while stack:
        for upstream in stack.pop().inputs:
            if upstream.id not in found:
                found[upstream.id] = upstream
                stack.append(upstream)
    return sorted(found.values(), key=lambda t: t.id)


def _reachable_from_sinks(nodes, inputs) -> set[int]:
    by_id = {t.id: t for t in nodes}
    seen: set[int] = set()
    stack = [t.id for t in nodes if t.kind == "sink"]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(up.id for up, _, _, _ in inputs[by_id[node].id])
    return seen


def _resolve_partitioner(upstream, downstream, partitioner, parallelism) -> Partitioner:
    same = parallelism[upstream.id] == parallelism[downstream.id]
    if partitioner is None:
        return ForwardPartitioner() if same else RebalancePartitioner()
    if isinstance(partitioner, ForwardPartitioner) and not same:
        raise JobDefinitionError(
            f"forward() from '{upstream.name}' (parallelism {parallelism[upstream.id]}) to "
            f"'{downstream.name}' (parallelism {parallelism[downstream.id]}) needs equal "
            "parallelism; use rebalance() instead"
        )
    return partitioner


def _assign_uids(nodes, inputs) -> dict[int, str]:
    """Given uids must be unique; others derive from position in the pipeline, so the same
    job code gets the same uids in every run (set uid() to survive pipeline changes)."""
    uids: dict[int, str] = {}
    given: dict[str, str] = {}
    siblings: dict[tuple, int] = defaultdict(int)
    for t in nodes:
        if t.uid is not None:
            if t.uid in given:
                raise JobDefinitionError(
                    f"uid '{t.uid}' is used by both '{given[t.uid]}' and '{t.name}'; "
                    "uids must be unique"
                )
            given[t.uid] = t.name
            uids[t.id] = t.uid
            continue
        upstream_uids = tuple(uids[up.id] for up, _, _, _ in inputs[t.id])
        side_outputs = tuple(side for _, _, side, _ in inputs[t.id] if side is not None)
        cls = t.operator_class.__name__ if t.operator_class else t.kind
        signature: tuple = (t.kind, cls, upstream_uids)
        if side_outputs:  # only then: uids of jobs without side outputs stay as they were
            signature += (side_outputs,)
        position = siblings[signature]
        siblings[signature] += 1
        digest = hashlib.sha256(repr((signature, position)).encode()).hexdigest()[:12]
        uids[t.id] = f"{t.kind}-{digest}"
    return uids
