"""How a job and each of its attempts start: the JobMaster's preparation and deployment.

One of the JobMaster's roles (job_master.py), an object of its own: `prepare` takes the
checkpoint folder's lease, prepares sources, sinks and storage, connects Spark and starts the
RPC and REST endpoints; `start_attempt` chooses what the attempt restores and deploys it, in
the kept task processes after a roll-back in place, else as a new Spark job (barrier stage);
the lease is renewed on the scheduler. It sees the JobMaster only as a `StartHost`
(hosts.py), makes each attempt through the factory it is given, and keeps its own state: the
sources' splits, the task descriptors, the lease's next renewal. JobMaster thread only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark import cloudpickle

from barrierflow._scheduler import ScheduledAction
from barrierflow.checkpoint.lineage import job_lineage
from barrierflow.checkpoint.metadata import is_savepoint
from barrierflow.cluster.executor.task_logs import JobLogs
from barrierflow.cluster.jobmaster.failover import FailoverDecider
from barrierflow.cluster.jobmaster.job_preparation import (
    create_splits,
    prepare_sinks,
    shippable_graph,
)
from barrierflow.cluster.jobmaster.shared_storage import check_job_storage
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.cluster.rest.server import resolve_rest_port
from barrierflow.cluster.rest.startup import start_rest_endpoint
from barrierflow.errors import (
    CheckpointStorageError,
    CheckpointStorageUnavailableError,
    LeaseLostError,
    StateRestoreError,
)
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime.task import TaskSettings

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.attempt import Attempt
    from barrierflow.cluster.jobmaster.hosts import StartHost
    from barrierflow.cluster.jobmaster.restore_point import RestorePoint
    from barrierflow.cluster.mails import TaskConnection
    from barrierflow.cluster.rest.job_actions import JobActions
    from barrierflow.connectors.base import SourceSplit
    from barrierflow.graph.job_graph import SubtaskId
    from barrierflow.runtime.deployment import TaskDescriptor

    Splits = dict[SubtaskId, list[SourceSplit]]

log = logging.getLogger("barrierflow.cluster.jobmaster.job_master")  # the JobMaster's log

AttemptFactory = Callable[
    [int, "Splits", "RestorePoint | None", "dict[int, TaskConnection] | None"], "Attempt"
]
"""Makes an attempt over the JobMaster: (its number, the sources' splits, what it restores,
the kept connections of a roll-back in place or None)."""


class JobStart:
    """The JobMaster's start of a job and of each attempt."""

    def __init__(self, master: StartHost, new_attempt: AttemptFactory, actions: JobActions) -> None:
        self.master = master
        self._new_attempt = new_attempt
        self._actions = actions
        """What the REST endpoint acts through (the JobMaster)."""
        self._splits: Splits = {}
        self._descriptors: dict[SubtaskId, TaskDescriptor] = {}
        self._lease_renewal: ScheduledAction | None = None

    def prepare(self) -> None:
        """Take the folder's lease, prepare sources, sinks and storage, connect Spark, start
        the RPC and REST endpoints, and start attempt 0."""
        master = self.master
        graph, settings, storage, restoring = (
            master.graph, master.settings, master.storage, master.restoring
        )  # fmt: skip
        rest_port = resolve_rest_port(settings.rest_port, os.environ)
        try:
            master.logs = JobLogs(master.log_dir, master.partitions)
        except OSError as error:
            log.warning("job '%s' keeps no log files: %s", graph.job_name, error)
        master.lease.acquire()  # first: a refused second start leaves no trace in the folder
        self._splits = create_splits(graph)
        prepare_sinks(graph)
        storage.prepare()
        try:  # before any task deploys: no upload of this run can be in shared/ yet
            storage.open_shared_state()
        except CheckpointStorageError as error:  # files stay: swept at a later start
            log.warning("job '%s': shared checkpoint files not swept: %s",
                        graph.job_name, error)  # fmt: skip
        master.lineage = job_lineage(storage.job_dir)
        master.first_checkpoint_id = master.history.first_unused_id()
        restoring.run_first_checkpoint_id = master.next_checkpoint_id()
        if restoring.from_savepoint:
            point = restoring.choose()  # a missing, damaged or refused one fails now
            if point is not None:  # ids go on above the snapshot, whatever the folder holds
                master.first_checkpoint_id = max(master.first_checkpoint_id,
                                                 point.checkpoint_id + 1)  # fmt: skip
                restoring.run_first_checkpoint_id = master.next_checkpoint_id()
        self._descriptors = build_task_descriptors(shippable_graph(graph))
        runner = master.runner = master.connect_runner(
            settings.master, len(master.partitions), graph.job_name, master.mailbox.put
        )
        if master.logs is not None:
            runner.log_to(master.log_dir)
        check_job_storage(graph, settings, runner.executor_hosts)
        addresses = runner.addresses
        master.publisher.spark_ui = getattr(runner, "spark_ui_url", None)
        master.rpc = master.start_rpc(
            addresses.rpc_bind, master.secret, master.mailbox.put, job_id=master.job_id
        )
        master.publisher.publish_view()
        publisher, metrics = master.publisher, master.metrics
        master.rest = start_rest_endpoint(
            graph.job_name,
            master.job_id,
            addresses.rpc_bind,
            rest_port,
            lambda: publisher.view,
            actions=self._actions,
            token=master.action_token,
            get_metrics=lambda: metrics.snapshot,
        )
        if master.rest is not None:
            publisher.publish(rest_url=master.rest.url)
        master.failover = FailoverDecider(
            settings.restart_strategy.new_tracker(), master.repeated_failures
        )
        self.renew_lease()  # names the REST address; still ours after Spark's start?
        self.start_attempt(0)

    def renew_lease(self) -> None:
        """Renew the lease (raises LeaseLostError if another run took it) and schedule the
        next renewal."""
        master = self.master
        master.lease.renew(master.rest.url if master.rest is not None else None)
        if self._lease_renewal is not None:  # renewed early: the next one counts from now
            self._lease_renewal.cancel()
        self._lease_renewal = master.scheduler.schedule(
            master.settings.lease_renew_interval_ms, self._on_lease_renewal, "renew the lease"
        )

    def stop_renewing_lease(self) -> None:
        """No more renewals (the JobMaster closes; it releases the lease)."""
        if self._lease_renewal is not None:
            self._lease_renewal.cancel()

    def _on_lease_renewal(self) -> None:
        try:
            self.renew_lease()
        except LeaseLostError as lost:
            self._lease_lost(lost)

    def _lease_lost(self, error: LeaseLostError) -> None:
        """Another run took the folder over: stop every task at once and fail, touching
        nothing more (no cleanup: the folder and the sinks' leftovers are the other run's)."""
        master = self.master
        if master.attempt is not None:
            master.stop_attempt()
        if master.restart is not None:
            master.restart.cancel()
        master.failing_over.leave_stage(str(error))
        master.ending.fail_job(error)

    def start_attempt(self, number: int) -> None:
        """Start attempt `number`: in place in the kept tasks after a roll-back, else as a
        new Spark job."""
        master = self.master
        master.restart = None
        rollback, master.rollback = master.rollback, None
        try:
            latest = master.restoring.choose()
        except CheckpointStorageUnavailableError as error:  # not damage: wait for the storage
            if rollback is not None:
                rollback.stop(str(error))
            master.failing_over.restore_unreadable(number, error)
            return
        except (StateRestoreError, CheckpointStorageError) as error:
            if number == 0:
                raise  # the job cannot start: run() raises it as it is
            if rollback is not None:
                rollback.stop(str(error))
            master.ending.fail_job(error)
            return
        if latest is not None:
            master.stats_tracker.report_restored(
                latest.checkpoint_id,
                master.clock.epoch_millis(),
                external_path=latest.folder.uri,
                is_savepoint=is_savepoint(latest.metadata),
            )
        runner, rpc = master.runner, master.rpc
        assert runner is not None and rpc is not None
        addresses = runner.addresses
        settings = master.settings.task_settings(
            master.job_id,
            number,
            f"{master.run_id}-{number}",
            master.secret,
            (addresses.rpc_advertised, rpc.address[1]),
            addresses.task_bind,
            master.storage.job_dir.uri,
            master.partitions,
            lineage=master.lineage,
        )
        restored_from = latest.checkpoint_id if latest else None
        master.metrics.attempt_started(number)
        if rollback is not None:  # the same processes register again
            master.publisher.publish(
                state=JobStatus.DEPLOYING, attempt=number, restored_from=restored_from
            )
            master.attempt = self._new_attempt(number, self._splits, latest, rollback.connections)
            rollback.restart(settings)
            return
        master.publisher.publish(
            state=JobStatus.DEPLOYING, attempt=number, processes={}, restored_from=restored_from
        )
        master.attempt = self._new_attempt(number, self._splits, latest, None)
        master.stage = number
        runner.submit(self._payload(settings), master.spark_group(number), number)

    def _payload(self, settings: TaskSettings) -> bytes:
        """What every Spark task of an attempt unpacks (task_entry.py)."""
        return cloudpickle.dumps((self._descriptors, settings))
