"""Every error barrierflow raises on purpose, in one module and one tree, so callers can
catch at the right level. The tree below is the class hierarchy (a test keeps it so);
a class with two bases is listed under its first.

BarrierflowError
  ConfigurationError                a setting or job definition is invalid (also a ValueError)
    JobDefinitionError              the pipeline cannot be turned into a job graph
    ExecutorImportError             a Spark executor cannot import a module the job needs
  SourceError                       a source cannot read its input
    SourceUnavailableError          ... because its broker is unreachable (transient)
  SinkError                         a sink cannot write or commit its output
    SinkUnavailableError            ... because its database or store is unreachable (transient)
    TransactionBusyError            a prepared transaction is being finished by another session
  CheckpointStorageError            checkpoint storage cannot be read or written
    CheckpointStorageUnavailableError  ... because the storage does not answer (transient)
  StateRestoreError                 a checkpoint or savepoint cannot be restored into this job
  SavepointError                    a savepoint (or a stop with savepoint) asked for failed
  StreamCorruptionError             a channel delivered events in an impossible order
  ChannelLostError                  a task lost a channel to a peer (it failed or was cancelled)
  ConnectionSetupError              a connection to a peer was not set up in time or authenticated
    JobMasterUnreachableError       a task cannot connect to the JobMaster (names settings to fix)
  RemoteTaskError                   a task failed with an exception the driver cannot rebuild
  JobExecutionError                 the job failed and the restart strategy gave up
  JobAlreadyRunningError            another run of the job holds its checkpoint folder's lease
  LeaseLostError                    another run took over the lease of this run's checkpoint folder
  InsufficientResourcesError        the cluster has fewer task slots than the job needs
  ChaosFailure                      a failure `barrierflow chaos` injected into a task on purpose
  ExternalSystemUnavailableError    a source's, sink's or checkpoint storage's system is
                                    unreachable for now (transient: the restart strategy decides)
  AsyncOperationFailedError         an async call of a record failed or timed out: the task fails
  IllegalCheckpointTransitionError  a pending checkpoint was asked for a status it cannot reach
  IllegalCheckpointStatsTransitionError  a checkpoint's statistics were asked for such a status
  CheckpointCoordinatorStateError   the checkpoint coordinator got an event its status forbids
  IllegalTaskPhaseTransitionError   a task was asked to move to a phase its phase cannot reach
  ChaosError                        `barrierflow chaos` could not run as asked (not a verdict)
  JobLookupError                    a command's JOB names no running job, or more than one
  RemoteJobError                    a request to a job's REST endpoint failed (one line)
    UnreachableError                ... because nothing answers at the endpoint's address
    TokenRefusedError               ... because the endpoint wants a token, or another one
    SavepointFailedError            ... because the job answered that the savepoint failed
  UserFunctionError                 a user function raised while `barrierflow.testing` drove it

Internal signals that never leave their module (a task's cancellation, a refused handshake,
a line a format cannot parse) are plain exceptions defined where they are raised and caught.
"""

from __future__ import annotations


class BarrierflowError(Exception):
    """Base of every error barrierflow raises on purpose."""


class ConfigurationError(BarrierflowError, ValueError):
    """A setting or job definition is invalid."""


class JobDefinitionError(ConfigurationError):
    """The pipeline cannot be turned into a job graph."""


class SourceError(BarrierflowError):
    """A source cannot read its input."""


class SinkError(BarrierflowError):
    """A sink cannot write or commit its output."""


class TransactionBusyError(SinkError):
    """Another session is finishing a prepared transaction this sink commits or rolls back
    (a zombie of an earlier attempt, say): not an answer yet. A `TwoPhaseCommitSink` raises it
    from `commit` so the writer keeps the transaction pending (in the next checkpoint too) and
    tries again on a later call, instead of waiting on the task's mailbox thread."""


class CheckpointStorageError(BarrierflowError):
    """Checkpoint storage cannot be read or written."""


class StateRestoreError(BarrierflowError):
    """A checkpoint or savepoint cannot be restored into this job."""


class SavepointError(BarrierflowError):
    """A savepoint (or a stop with savepoint) asked for failed; the message says why."""


class StreamCorruptionError(BarrierflowError):
    """A channel delivered events in an order that cannot happen in a healthy job."""


class ChannelLostError(BarrierflowError):
    """A task lost a channel to a peer: the peer failed or was cancelled (a secondary failure)."""


class ConnectionSetupError(BarrierflowError):
    """A connection to a peer could not be set up in time or authenticated; names the address."""


class RemoteTaskError(BarrierflowError):
    """A task failed with an exception the driver cannot rebuild; names its type and message."""


class JobExecutionError(BarrierflowError):
    """The job failed and the restart strategy gave up; the cause is chained."""


class JobAlreadyRunningError(BarrierflowError):
    """Another run of the job holds the lease of its checkpoint folder (checkpoint/lease.py):
    the start is refused before it touches anything, naming that run (id, host, pid, REST
    address) and what to do (cancel it, or wait for its lease to expire if it died)."""


class LeaseLostError(BarrierflowError):
    """Another run took over the lease of this run's checkpoint folder (this run could not
    renew it in time): this run stops, so that two runs never write the same checkpoints."""


class InsufficientResourcesError(BarrierflowError):
    """The Spark cluster has fewer task slots than the job has subtasks."""


class ChaosFailure(BarrierflowError):
    """A failure `barrierflow chaos` injected into a task on purpose: the task raises it on its
    mailbox thread, and the job recovers from it as from an exception in user code."""


class JobMasterUnreachableError(ConnectionSetupError):
    """A task cannot open a connection to the JobMaster's RPC endpoint (refused, timed out, no
    route): the driver's advertised address is wrong for the executors. The message names
    the executor's host, the address, and the settings that fix it; no restart can help, so
    the JobMaster fails the job at once when no task of the attempt reached it."""


class ExecutorImportError(ConfigurationError):
    """A Spark executor cannot import a module the job needs (it is only on the driver):
    names the module, the executor's host and the ways to ship it. Every attempt would fail
    the same way, so the job fails at once."""


class ExternalSystemUnavailableError(BarrierflowError):
    """A source or sink cannot reach its external system: a database or broker that is down
    or unreachable. Transient: the attempt fails and the restart strategy decides, also when
    it happens while a task restores (it is never taken for state the job cannot restore),
    so recovery waits for the system to come back."""


class SourceUnavailableError(SourceError, ExternalSystemUnavailableError):
    """A source cannot reach its broker (down at a restart, or lost mid-run)."""


class SinkUnavailableError(SinkError, ExternalSystemUnavailableError):
    """A sink cannot reach its database or store (down at a restart, or lost mid-run)."""


class CheckpointStorageUnavailableError(CheckpointStorageError, ExternalSystemUnavailableError):
    """Checkpoint storage failed to answer a read (an S3 503, a reset connection, a timeout,
    an NFS I/O error) even after retries: a fault of the storage, not damage. The attempt
    fails and the restart strategy alone decides; the next attempt reads the same
    checkpoint again (it is never skipped as damaged). Names the file or folder."""


class AsyncOperationFailedError(BarrierflowError):
    """An async call of a record failed or timed out; the cause is chained. Fails the task."""


class IllegalCheckpointTransitionError(BarrierflowError):
    """A pending checkpoint was asked to move to a status it cannot reach from its own."""


class IllegalCheckpointStatsTransitionError(BarrierflowError):
    """A checkpoint's statistics were asked to move to a status they cannot reach."""


class CheckpointCoordinatorStateError(BarrierflowError):
    """The coordinator got an event its status does not allow (e.g. a savepoint after failover)."""


class IllegalTaskPhaseTransitionError(BarrierflowError):
    """A task was asked to move to a phase its phase cannot reach (a bug in the task)."""


class ChaosError(BarrierflowError):
    """The self-check (`barrierflow chaos`) could not run as asked (not a verdict on
    exactly-once)."""


class JobLookupError(BarrierflowError):
    """A command line's JOB names no running job, or more than one."""


class RemoteJobError(BarrierflowError):
    """A request to a job's REST endpoint failed; the message is one line for the user."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class UnreachableError(RemoteJobError):
    """Nothing answers at the endpoint's address (the job ended, or it is elsewhere)."""


class TokenRefusedError(RemoteJobError):
    """The endpoint wants a token (401) or another one (403)."""


class SavepointFailedError(RemoteJobError):
    """The job answered that the savepoint failed."""


class UserFunctionError(BarrierflowError):
    """A user function (or what it called) raised while a `barrierflow.testing` harness drove
    it; the message names the call, the element or timer, and the line that raised, and the
    original exception is the cause."""
