"""Cleaning up a job's sinks on the driver: a restore with nothing after it.

A run that ends for good without finishing (cancelled, failed, crashed, stopped by a
signal) leaves two-phase-commit leftovers behind: transactions prepared for checkpoints
that never completed (PostgreSQL prepared transactions, which hold row locks and block
VACUUM), staged part files, pending commits of the last completed checkpoint whose
notification never arrived. Every sink's restore already resolves exactly these: it commits
what the restored checkpoint lists as pending and undoes the rest its subtask owns. So once
the tasks are gone, the driver does, for every sink and every subtask, what a restore of the
newest completed checkpoint (or savepoint) would do: the sink operator is built with the
same `SinkContext` (a deployment of its own), given that checkpoint's state for the subtask
(none on a fresh start), restored, and then aborted, which aborts the transaction the
restore began and closes the sink. `barrierflow cleanup` runs the same after a driver that
was killed.

A sink that fails is reported in one line (its uid, the subtask, the error) and the others
go on: leftovers of a failed cleanup are resolved by the next run or `barrierflow cleanup`.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from pyspark import cloudpickle

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.checkpoint.history import CheckpointHistoryFile
from barrierflow.checkpoint.lease import CheckpointLease, this_process
from barrierflow.checkpoint.lineage import job_lineage
from barrierflow.checkpoint.metadata import restore_assignment
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.cluster.jobmaster.job_restore import JobRestore
from barrierflow.cluster.jobmaster.job_settings import JobSettings
from barrierflow.cluster.jobmaster.restore_point import RestorePoint
from barrierflow.graph.job_graph import ChainedOperator, JobGraph, JobVertex, SubtaskId
from barrierflow.runtime.operator_chain import restored_state
from barrierflow.runtime.operators.base import OperatorContext, StreamOperator, restore_operator
from barrierflow.state.key_groups import key_group_range_for_subtask

log = logging.getLogger(__name__)

__all__ = ["SinkCleanup", "clean_up_sinks", "clean_up_stopped_job"]


@dataclass(frozen=True)
class SinkCleanup:
    """What one cleanup did: the sinks it resolved and one line per sink that failed."""

    restored: str
    """What it restored, as the log says it: `checkpoint 7 from file:///...`, or `nothing
    (no completed checkpoint)`."""
    cleaned: tuple[str, ...]
    """The uids of the sinks every subtask of which was cleaned up."""
    failures: tuple[str, ...]
    """One line per sink that was not: its name, uid, first failing subtask and error."""


def clean_up_sinks(
    graph: JobGraph,
    point: RestorePoint | None,
    abandoned_above: int | None,
    *,
    lineage: str,
    deployment_id: str,
    attempt: int,
    clock: Clock = SYSTEM_CLOCK,
    log_failures: bool = True,
) -> SinkCleanup:
    """Resolve every sink's leftovers as a restore of `point` (None: a fresh start) would,
    abandoning the commits of `lineage` above `abandoned_above`, for every subtask.

    `deployment_id` names this cleanup's own deployment (no task ever had it), so every
    staging area of the job's deployments counts as a leftover. Assumes no task of the job
    runs any more: a live task could prepare or stage something after the sweep. Never
    raises for a sink's failure: it is in the result's `failures` (and logged, one line).
    """
    restored = point.describe() if point is not None else "nothing (no completed checkpoint)"
    cleaned, failures = [], []
    for vertex in graph.vertices:
        for op in _sinks_of(vertex):
            failure = _clean_up_sink(
                graph, vertex, op, point, abandoned_above, lineage, deployment_id, attempt, clock
            )
            if failure is None:
                cleaned.append(op.uid)
            else:
                failures.append(failure)
            if failure is not None and log_failures:
                log.warning(
                    "job '%s': could not clean up %s; its leftovers stay until the next run or "
                    "`barrierflow cleanup`", graph.job_name, failure,
                )  # fmt: skip
    return SinkCleanup(restored, tuple(cleaned), tuple(failures))


def clean_up_stopped_job(graph: JobGraph, settings: JobSettings) -> SinkCleanup:
    """`barrierflow cleanup`: resolve what a run of the job that cannot clean up any more (its
    driver was killed) left in its sinks, as the next run's first restore would, without
    running the job. Holds the job's lease meanwhile, so it is refused while a run holds it
    (JobAlreadyRunningError naming that run) and no run starts during it. Failing sinks are
    in the result, not logged."""
    storage = FileSystemCheckpointStorage(settings.checkpoint_storage, graph.job_name)
    run_id = uuid.uuid4().hex[:8]
    lease = CheckpointLease(
        storage.job_dir,
        this_process(uuid.uuid4().hex, run_id, graph.job_name),
        expiry_ms=settings.lease_expiry_ms,
    )
    lease.acquire()
    try:
        storage.prepare()
        lineage = job_lineage(storage.job_dir)
        history = CheckpointHistoryFile(storage.job_dir)
        restoring = JobRestore(graph, settings, storage, history)
        restoring.run_first_checkpoint_id = max(
            storage.next_checkpoint_id(), history.first_unused_id()
        )
        point = restoring.choose()
        return clean_up_sinks(
            graph,
            point,
            restoring.abandoned_above,
            lineage=lineage,
            deployment_id=f"{run_id}-cleanup",
            attempt=0,
            log_failures=False,
        )
    finally:
        lease.release()


def _sinks_of(vertex: JobVertex) -> list[ChainedOperator]:
    return [op for op in vertex.operators if op.transformation.sink is not None]


def _clean_up_sink(
    graph: JobGraph,
    vertex: JobVertex,
    op: ChainedOperator,
    point: RestorePoint | None,
    abandoned_above: int | None,
    lineage: str,
    deployment_id: str,
    attempt: int,
    clock: Clock,
) -> str | None:
    """Restore, then abort, every subtask of one sink; the line naming its first failing
    subtask (the others are still cleaned up), or None."""
    reader = SubtaskStateReader()
    failure: str | None = None
    for index in range(vertex.parallelism):
        subtask = SubtaskId(vertex.vertex_id, index)
        # each subtask gets its own copy of the sink, as each task unpickles its own
        transformation = cloudpickle.loads(cloudpickle.dumps(op.transformation))
        operator: StreamOperator = transformation.make_operator(op.uid)
        context = OperatorContext(
            subtask_index=index,
            parallelism=vertex.parallelism,
            max_parallelism=graph.max_parallelism,
            key_group_range=key_group_range_for_subtask(
                graph.max_parallelism, vertex.parallelism, index
            ),
            attempt=attempt,
            deployment_id=deployment_id,
            processing_time=clock.epoch_millis,
            clock=clock,
            job_name=graph.job_name,
            restored_checkpoint_id=point.checkpoint_id if point is not None else None,
            lineage=lineage,
            abandoned_above=abandoned_above,
        )
        operator.setup(context, operator.output)
        try:
            restore = None
            if point is not None:
                assignment = restore_assignment(graph, point.metadata, point.folder, subtask)
                restore = assignment.get(op.uid)
            restore_operator(operator, restored_state(reader, restore))
        except Exception as error:
            failure = failure or (
                f"sink '{op.name}' (uid {op.uid}), subtask {index + 1} of {vertex.parallelism}: "
                f"{type(error).__name__}: {error}"
            )
        finally:
            try:
                operator.abort()  # the transaction the restore began, and the sink's close
            except Exception as error:
                log.info("job '%s': closing sink '%s' (subtask %d) after its cleanup: %s",
                         graph.job_name, op.uid, index, error)  # fmt: skip
    return failure
