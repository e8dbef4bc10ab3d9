"""How a job and each of its attempts start: the JobMaster's preparation and deployment.

A part of the JobMaster (job_master.py), by role: `_prepare` takes the checkpoint folder's
lease, prepares sources, sinks and storage, connects Spark and starts the RPC and REST
endpoints; `_start_attempt` chooses what the attempt restores and deploys it, in the kept
task processes after a roll-back in place, else as a new Spark job (barrier stage); the
lease is renewed on the scheduler. JobMaster thread only.
"""

from __future__ import annotations

import logging
import os

from pyspark import cloudpickle

from barrierflow.checkpoint.lineage import job_lineage
from barrierflow.checkpoint.metadata import is_savepoint
from barrierflow.cluster.executor.task_logs import JobLogs
from barrierflow.cluster.jobmaster.attempt import Attempt
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

log = logging.getLogger("barrierflow.cluster.jobmaster.job_master")  # the JobMaster's log


class JobStart:
    """The JobMaster's start of a job and of each attempt (a base of JobMaster: it works on
    the JobMaster's state)."""

    def _prepare(self) -> None:
        rest_port = resolve_rest_port(self.settings.rest_port, os.environ)
        try:
            self.logs = JobLogs(self.log_dir, self.partitions)
        except OSError as error:
            log.warning("job '%s' keeps no log files: %s", self.graph.job_name, error)
        self.lease.acquire()  # first: a refused second start leaves no trace in the folder
        self._splits = create_splits(self.graph)
        prepare_sinks(self.graph)
        self.storage.prepare()
        try:  # before any task deploys: no upload of this run can be in shared/ yet
            self.storage.open_shared_state()
        except CheckpointStorageError as error:  # files stay: swept at a later start
            log.warning("job '%s': shared checkpoint files not swept: %s",
                        self.graph.job_name, error)  # fmt: skip
        self.lineage = job_lineage(self.storage.job_dir)
        self._first_checkpoint_id = self.history.first_unused_id()
        self.restoring.run_first_checkpoint_id = self.next_checkpoint_id()
        if self.restoring.from_savepoint:
            point = self.restoring.choose()  # a missing, damaged or refused one fails now
            if point is not None:  # ids go on above the snapshot, whatever the folder holds
                self._first_checkpoint_id = max(self._first_checkpoint_id,
                                                point.checkpoint_id + 1)  # fmt: skip
                self.restoring.run_first_checkpoint_id = self.next_checkpoint_id()
        self._descriptors = build_task_descriptors(shippable_graph(self.graph))
        self._runner = self._connect_runner(
            self.settings.master, len(self.partitions), self.graph.job_name, self.mailbox.put
        )
        if self.logs is not None:
            self._runner.log_to(self.log_dir)
        check_job_storage(self.graph, self.settings, self._runner.executor_hosts)
        addresses = self._runner.addresses
        self.publisher.spark_ui = getattr(self._runner, "spark_ui_url", None)
        self._rpc = self._start_rpc(
            addresses.rpc_bind, self.secret, self.mailbox.put, job_id=self.job_id
        )
        self.publisher.publish_view()
        publisher, host = self.publisher, addresses.rpc_bind
        self._rest = start_rest_endpoint(
            self.graph.job_name,
            self.job_id,
            host,
            rest_port,
            lambda: publisher.view,
            actions=self,
            token=self.action_token,
            get_metrics=lambda: self.metrics.snapshot,
        )
        if self._rest is not None:
            self.publisher.publish(rest_url=self._rest.url)
        self.failover = FailoverDecider(
            self.settings.restart_strategy.new_tracker(), self.repeated_failures
        )
        self._renew_lease()  # names the REST address; still ours after Spark's start?
        self._start_attempt(0)

    def _renew_lease(self) -> None:
        """Renew the lease (raises LeaseLostError if another run took it) and schedule the
        next renewal."""
        self.lease.renew(self._rest.url if self._rest is not None else None)
        if self._lease_renewal is not None:  # renewed early: the next one counts from now
            self._lease_renewal.cancel()
        self._lease_renewal = self.scheduler.schedule(
            self.settings.lease_renew_interval_ms, self._on_lease_renewal, "renew the lease"
        )

    def _on_lease_renewal(self) -> None:
        try:
            self._renew_lease()
        except LeaseLostError as lost:
            self._lease_lost(lost)

    def _lease_lost(self, error: LeaseLostError) -> None:
        """Another run took the folder over: stop every task at once and fail, touching
        nothing more (no cleanup: the folder and the sinks' leftovers are the other run's)."""
        if self.attempt is not None:
            self._stop_attempt()
        if self._restart is not None:
            self._restart.cancel()
        self._leave_stage(str(error))
        self._fail_job(error)

    def _start_attempt(self, number: int) -> None:
        """Start attempt `number`: in place in the kept tasks after a roll-back, else as a
        new Spark job."""
        self._restart = None
        rollback, self._rollback = self._rollback, None
        try:
            latest = self.restoring.choose()
        except CheckpointStorageUnavailableError as error:  # not damage: wait for the storage
            if rollback is not None:
                rollback.stop(str(error))
            self._restore_unreadable(number, error)
            return
        except (StateRestoreError, CheckpointStorageError) as error:
            if number == 0:
                raise  # the job cannot start: run() raises it as it is
            if rollback is not None:
                rollback.stop(str(error))
            self._fail_job(error)
            return
        if latest is not None:
            self.stats_tracker.report_restored(
                latest.checkpoint_id,
                self.clock.epoch_millis(),
                external_path=latest.folder.uri,
                is_savepoint=is_savepoint(latest.metadata),
            )
        assert self._runner is not None and self._rpc is not None
        addresses = self._runner.addresses
        settings = self.settings.task_settings(
            self.job_id,
            number,
            f"{self.run_id}-{number}",
            self.secret,
            (addresses.rpc_advertised, self._rpc.address[1]),
            addresses.task_bind,
            self.storage.job_dir.uri,
            self.partitions,
            lineage=self.lineage,
        )
        restored_from = latest.checkpoint_id if latest else None
        self.metrics.attempt_started(number)
        if rollback is not None:  # the same processes register again
            self.publisher.publish(
                state=JobStatus.DEPLOYING, attempt=number, restored_from=restored_from
            )
            self.attempt = Attempt(self, number, self._splits, latest, rollback.connections)
            rollback.restart(settings)
            return
        self.publisher.publish(
            state=JobStatus.DEPLOYING, attempt=number, processes={}, restored_from=restored_from
        )
        self.attempt = Attempt(self, number, self._splits, latest)
        self._stage = number
        self._runner.submit(self._payload(settings), self._group(number), number)

    def _payload(self, settings: TaskSettings) -> bytes:
        """What every Spark task of an attempt unpacks (task_entry.py)."""
        return cloudpickle.dumps((self._descriptors, settings))

    def _group(self, number: int) -> str:
        return f"barrierflow-{self.job_id}-{number}"
