"""StreamExecutionEnvironment: where a job is defined, configured and executed."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from barrierflow.api.checkpoint_config import CheckpointConfig, CheckpointingMode
from barrierflow.api.datastream import DataStream
from barrierflow.api.driver_signals import StopOnSignals, exit_status
from barrierflow.api.execution_config import ExecutionConfig
from barrierflow.cluster.executor.local_processes import (
    check_this_host,
    executor_jvm_of,
    kill_local,
)
from barrierflow.cluster.jobmaster.restore_point import RestoreMode, SavepointRestoreSettings
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.cluster.spark.session import SparkOptions, python_file_for_spark
from barrierflow.connectors.base import Source
from barrierflow.core.restart_strategies import (
    DEFAULT_WITH_CHECKPOINTING,
    RestartStrategies,
    RestartStrategyConfiguration,
)
from barrierflow.core.state_backends import HashMapStateBackend, StateBackend
from barrierflow.core.watermark_strategy import WatermarkStrategy
from barrierflow.errors import ConfigurationError, JobDefinitionError
from barrierflow.graph.builder import build_job_graph
from barrierflow.graph.job_graph import JobGraph, SubtaskId
from barrierflow.graph.transformation import Transformation
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.state.backends import check_backend_installed, check_state_backend
from barrierflow.state.key_groups import DEFAULT_MAX_PARALLELISM

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.views import JobView
    from barrierflow.cluster.metrics.view import MetricsSnapshot

TASK_LOG_LEVEL_ENV = "BARRIERFLOW_TASK_LOG_LEVEL"
"""The lowest level of the tasks' Python log records kept in their log files (default WARNING)."""

NO_CHECKPOINTS_INTERVAL_MS = 2**40
"""With checkpointing off, only the final checkpoint (at the end of bounded input) runs."""


@dataclass
class _CommandLineDefaults:
    """Set by `barrierflow run` and `barrierflow chaos`; applied to every environment the job
    file creates."""

    parallelism: int | None = None
    master: str | None = None
    checkpoint_dir: str | None = None
    restart_strategy: RestartStrategyConfiguration | None = None
    """Set by `barrierflow chaos`: replaces the job's own strategy, so a run with many
    injected failures neither gives up nor waits between restarts."""
    on_execute: Callable[[StreamExecutionEnvironment, JobClient], None] | None = None
    """Set by `barrierflow chaos`: told of every job the file starts, as it starts."""
    checkpoint_storage: str | None = None
    """Set by `barrierflow chaos`: the run's own checkpoint storage, which wins over the job's
    (unlike checkpoint_dir, which a job file's own setting replaces)."""
    savepoint_restore: SavepointRestoreSettings | None = None
    """Set by `barrierflow run --from-savepoint`: wins over the job's own setting."""
    allow_fallback_duplicates: bool = False
    """Set by `barrierflow run --allow-fallback-duplicates` (or the job's CheckpointConfig)."""
    spark_options: SparkOptions | None = None
    """Set by `barrierflow run --conf/--py-files/...`: the Spark settings of the job's session."""
    define_only: Callable[[JobGraph, Any], None] | None = None
    """Set by `barrierflow cleanup`: `execute` and `execute_async` hand it the job's graph and
    JobSettings instead of running the job, then raise JobDefined (nothing of the job file
    after its first `execute` runs)."""
    watch: Callable[[JobClient], None] | None = None
    """Set by `barrierflow run`: `execute` hands it the started job and it shows the job's
    progress on the calling thread until the job ends (`execute` then returns or raises as
    usual); `execute_async` does not call it."""


command_line_defaults = _CommandLineDefaults()


class JobDefined(BaseException):
    """Raised by `execute` under `command_line_defaults.define_only` once the job is defined:
    the job file stops there (a BaseException, so a job file's `except Exception` lets it
    through)."""


class StreamExecutionEnvironment:
    """Defines a job and runs it on Spark (the embedded `local[*]` unless told otherwise).

    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> env.set_parallelism(2).get_parallelism()
    2
    """

    def __init__(self) -> None:
        self._parallelism: int | None = None
        """Set by `set_parallelism`; None: the command line's default, else the CPU count."""
        self._max_parallelism = DEFAULT_MAX_PARALLELISM
        self._checkpoint_config = CheckpointConfig()
        if command_line_defaults.checkpoint_dir:
            self._checkpoint_config.set_checkpoint_storage(command_line_defaults.checkpoint_dir)
        self._restart_strategy: RestartStrategyConfiguration | None = None
        self._master = command_line_defaults.master or os.environ.get("BARRIERFLOW_MASTER")
        self._buffer_timeout_ms = 50
        self._transformations: list[Transformation] = []
        self._config = ExecutionConfig()
        self._savepoint_restore: SavepointRestoreSettings | None = None
        self._python_files: list[str] = []
        self._state_backend: StateBackend = HashMapStateBackend()
        self._changelog_state_backend = False

    @staticmethod
    def get_execution_environment() -> StreamExecutionEnvironment:
        return StreamExecutionEnvironment()

    # ---- settings ----------------------------------------------------------------------------

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        """The parallelism of every operator without its own `set_parallelism`.

        As in Flink, the precedence is: an operator's `set_parallelism`, then this,
        then the command line's default (`barrierflow run -p`), then the CPU count.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.set_parallelism(0)
        Traceback (most recent call last):
        ...
        barrierflow.errors.ConfigurationError: the environment's parallelism must be an \
integer >= 1, got 0
        """
        self._parallelism = _positive(parallelism, "the environment's parallelism")
        return self

    def get_parallelism(self) -> int:
        """The default parallelism of this job's operators (see `set_parallelism`)."""
        return self._default_parallelism()[0]

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        value = _positive(max_parallelism, "max parallelism")
        if value > 32768:
            raise ConfigurationError(f"max parallelism must be <= 32768, got {value}")
        self._max_parallelism = value
        return self

    def _default_parallelism(self) -> tuple[int, str]:
        """The default parallelism and what set it (for errors), validated as an integer >= 1.

        Whether it is within the max parallelism is checked when the job graph is built,
        so the two setters may be called in either order.
        """
        if self._parallelism is not None:
            return self._parallelism, "the environment's parallelism"
        if command_line_defaults.parallelism is not None:
            what = "the command line's parallelism (-p)"
            return _positive(command_line_defaults.parallelism, what), what
        # Flink's default is the cluster's slots; here the CPUs, up to the max parallelism.
        return min(os.cpu_count() or 1, self._max_parallelism), "the CPU count"

    def get_max_parallelism(self) -> int:
        return self._max_parallelism

    def enable_checkpointing(
        self, interval: int, mode: CheckpointingMode | None = None
    ) -> StreamExecutionEnvironment:
        self._checkpoint_config.set_checkpoint_interval(interval)
        if mode is not None:
            self._checkpoint_config.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def get_config(self) -> ExecutionConfig:
        """Execution settings (PyFlink's `env.get_config()`): the auto-watermark interval,
        latency tracking (`set_latency_tracking_interval`) and the metrics report interval.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.get_config().set_auto_watermark_interval(50).get_auto_watermark_interval()
        50
        """
        return self._config

    def set_restart_strategy(
        self, strategy: RestartStrategyConfiguration
    ) -> StreamExecutionEnvironment:
        if not isinstance(strategy, RestartStrategyConfiguration):
            raise ConfigurationError(
                f"set_restart_strategy needs a RestartStrategies.* value, got {strategy!r}"
            )
        self._restart_strategy = strategy
        return self

    def get_restart_strategy(self) -> RestartStrategyConfiguration:
        """The strategy set, else Flink 2's default: exponential delay with checkpointing on,
        no restart without (`barrierflow chaos` replaces either with its own)."""
        if command_line_defaults.restart_strategy is not None:
            return command_line_defaults.restart_strategy
        if self._restart_strategy is not None:
            return self._restart_strategy
        if self._checkpoint_config.is_checkpointing_enabled():
            return DEFAULT_WITH_CHECKPOINTING
        return RestartStrategies.no_restart()

    def set_state_backend(self, backend: StateBackend) -> StreamExecutionEnvironment:
        """Where keyed state lives (PyFlink's `set_state_backend`): `HashMapStateBackend()`,
        the default, in Python dicts; `EmbeddedRocksDBStateBackend(...)` in an embedded
        RocksDB per subtask on the task host's disk (needs `pip install
        'barrierflow[rocksdb]'`). A job may switch backends through a savepoint
        (docs/state-backends.md).

        >>> from barrierflow import EmbeddedRocksDBStateBackend
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.set_state_backend(EmbeddedRocksDBStateBackend()).get_state_backend().name
        'rocksdb'
        >>> env.set_state_backend("rocksdb")
        Traceback (most recent call last):
        ...
        barrierflow.errors.ConfigurationError: a state backend must be HashMapStateBackend() \
or EmbeddedRocksDBStateBackend(...), got 'rocksdb'
        """
        check_state_backend(backend)
        check_backend_installed(backend)
        self._state_backend = backend
        return self

    def get_state_backend(self) -> StateBackend:
        """The state backend set, else `HashMapStateBackend()`."""
        return self._state_backend

    def enable_changelog_state_backend(self, enabled: bool) -> StreamExecutionEnvironment:
        """Changelog (incremental) checkpoints for the heap backend (PyFlink's name): each
        checkpoint uploads only the keys changed since the last completed one, plus a new
        full base now and then (docs/state-backends.md). Off by default; the RocksDB
        backend ignores it (its incremental checkpoints are
        `EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)`).

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.enable_changelog_state_backend(True).is_changelog_state_backend_enabled()
        True
        """
        self._changelog_state_backend = bool(enabled)
        return self

    def is_changelog_state_backend_enabled(self) -> bool:
        """Whether `enable_changelog_state_backend(True)` was set."""
        return self._changelog_state_backend

    def set_savepoint_restore_settings(
        self,
        path: str,
        allow_non_restored_state: bool = False,
        restore_mode: str | RestoreMode = RestoreMode.NO_CLAIM,
    ) -> StreamExecutionEnvironment:
        """Start the job from a savepoint or retained checkpoint (`path`: its folder or its
        `_metadata`) instead of the latest checkpoint in its checkpoint folder: Flink's
        `execution.savepoint.path`, `execution.savepoint.ignore-unclaimed-state` and
        `execution.savepoint-restore-mode` ("no-claim", the default, or "claim"). The
        command line's `--from-savepoint` wins over it.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.set_savepoint_restore_settings("/sp/savepoint-ab12cd-0123456789ab", True)
        ... # doctest: +ELLIPSIS
        <barrierflow.api.environment.StreamExecutionEnvironment object at ...>
        """
        self._savepoint_restore = SavepointRestoreSettings.for_path(
            path, allow_non_restored_state, restore_mode
        )
        return self

    def set_buffer_timeout(self, timeout_ms: int) -> StreamExecutionEnvironment:
        """How long records may wait in a half-full network buffer (latency vs throughput)."""
        self._buffer_timeout_ms = _positive(timeout_ms, "buffer timeout (ms)")
        return self

    def set_spark_master(self, master: str) -> StreamExecutionEnvironment:
        """Run on this Spark master (`local[4]`, `spark://host:7077`, `yarn`, `k8s://...`)."""
        if command_line_defaults.master is None:
            self._master = master
        return self

    # ---- sources -----------------------------------------------------------------------------

    def add_python_file(self, path: str) -> StreamExecutionEnvironment:
        """Ship a .py, .zip or .egg file (or a folder, zipped) to the executors and put it on
        their Python path before the first attempt, like `--py-files`: for modules the job's
        code imports that the executors' Python lacks."""
        python_file_for_spark(path)  # a missing or unusable path fails here, not on Spark
        self._python_files.append(path if "://" in path else os.path.abspath(path))
        return self

    def from_source(
        self,
        source: Source,
        watermark_strategy: WatermarkStrategy,
        source_name: str,
        type_info: Any = None,
    ) -> DataStream:
        if not isinstance(source, Source):
            raise JobDefinitionError(f"from_source needs a Source, got {source!r}")
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise JobDefinitionError(
                "from_source needs a WatermarkStrategy, e.g. WatermarkStrategy.no_watermarks()"
            )
        transformation = Transformation(
            "source",
            source_name,
            [],
            operator_class=SourceOperator,
            operator_args=(source, watermark_strategy),
            source=source,
        )
        self._add(transformation)
        return DataStream(self, transformation)

    def from_collection(self, collection: Iterable[Any], type_info: Any = None) -> DataStream:
        from barrierflow.connectors.collection import CollectionSource

        return self.from_source(
            CollectionSource(list(collection)), WatermarkStrategy.no_watermarks(), "Collection"
        )

    def _add(self, transformation: Transformation) -> None:
        """Record an API call's transformation (DataStream methods call this)."""
        self._transformations.append(transformation)

    # ---- execution ---------------------------------------------------------------------------

    def get_job_graph(self, job_name: str = "barrierflow job") -> JobGraph:
        """The job graph of what was defined; raises ConfigurationError for a default
        parallelism (environment or command line) or an operator's above the max."""
        parallelism, what = self._default_parallelism()
        _check_within_max(parallelism, self._max_parallelism, what)
        return build_job_graph(
            job_name,
            self._transformations,
            parallelism,
            self._max_parallelism,
            self._config.get_auto_watermark_interval(),
        )

    def execute(self, job_name: str = "barrierflow job") -> JobExecutionResult:
        """Run the job until its input ends (bounded) or it is cancelled; raise if it fails.

        The steps defined so far make the job and are then cleared (as PyFlink does): a file
        that calls `execute()` three times runs three different pipelines.

        On the main thread, SIGTERM and SIGINT (Ctrl-C) stop the job in order and then exit
        the process with one line and status 143 or 130 (api/driver_signals.py)."""
        client = self.execute_async(job_name)
        ended: BaseException | None = None
        with StopOnSignals(job_name, client.cancel) as signals:
            try:
                if command_line_defaults.watch is not None:
                    command_line_defaults.watch(client)
                result = client.wait()
            except Exception as error:
                if signals.received is None:
                    raise
                client.join()  # the job ends in order, whatever stopped the watcher
                ended = error
        if signals.received is not None:
            _exit_stopped(signals, client, ended)
        return result

    def execute_async(self, job_name: str = "barrierflow job") -> JobClient:
        from barrierflow.checkpoint.coordinator import CheckpointCoordinatorConfig
        from barrierflow.cluster.jobmaster.job_master import JobMaster, JobSettings
        from barrierflow.cluster.spark.runner import SparkAttemptRunner
        from barrierflow.runtime.barriers.handler import barrier_handler_for

        config = self._checkpoint_config
        # Refuse impossible combinations (AT_LEAST_ONCE + unaligned) before anything runs.
        barrier_handler_for(config.mode, config.unaligned, config.aligned_timeout_ms, 1)
        graph = self.get_job_graph(job_name)
        # As PyFlink: execute() starts a fresh job; the next one is built from new steps only.
        self._transformations = []
        enabled = config.is_checkpointing_enabled()
        storage = command_line_defaults.checkpoint_storage or config.get_checkpoint_storage()
        savepoint_dir = config.default_savepoint_dir or os.path.join(storage, "savepoints")
        scratch = None
        if not enabled:
            scratch = tempfile.mkdtemp(prefix="barrierflow-final-checkpoint-")
            storage = scratch
        settings = JobSettings(
            checkpoint_interval_ms=config.interval_ms,
            coordinator=CheckpointCoordinatorConfig(
                interval_ms=config.interval_ms if enabled else NO_CHECKPOINTS_INTERVAL_MS,
                min_pause_ms=config.min_pause_ms,
                timeout_ms=config.timeout_ms,
                max_concurrent=config.max_concurrent,
                tolerable_failures=config.tolerable_failures,
            ),
            retained_checkpoints=config.retained,
            restart_strategy=self.get_restart_strategy(),
            checkpoint_storage=storage,
            master=self._master,
            buffer_timeout_ms=self._buffer_timeout_ms,
            checkpointing_mode=config.mode.value,
            unaligned_checkpoints=config.unaligned,
            aligned_checkpoint_timeout_ms=config.aligned_timeout_ms,
            savepoint_restore=command_line_defaults.savepoint_restore or self._savepoint_restore,
            savepoint_dir=savepoint_dir,
            externalized_retention=config.externalized_retention.name,
            task_log_level=os.environ.get(TASK_LOG_LEVEL_ENV) or "WARNING",
            metrics_interval_ms=self._config.get_metrics_interval(),
            latency_interval_ms=self._config.get_latency_tracking_interval(),
            allow_fallback_duplicates=command_line_defaults.allow_fallback_duplicates
            or config.allow_fallback_duplicates,
            repeated_failure_limit=config.repeated_failure_limit,
            state_backend=self._state_backend,
            changelog_state_backend=self._changelog_state_backend,
        )
        if command_line_defaults.define_only is not None:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            command_line_defaults.define_only(graph, settings)
            raise JobDefined(job_name)
        options = (command_line_defaults.spark_options or SparkOptions()).merged(
            SparkOptions(py_files=tuple(self._python_files))
        )
        connect = functools.partial(SparkAttemptRunner.connect, options=options)
        client = JobClient(JobMaster(graph, settings, connect_runner=connect), scratch)
        if command_line_defaults.on_execute is not None:
            command_line_defaults.on_execute(self, client)
        return client


def _exit_stopped(
    signals: StopOnSignals, client: JobClient, error: BaseException | None
) -> NoReturn:
    """A signal stopped the driver and the job has ended: one line, then exit 128 + signal."""
    state = client.get_job_status()
    if state == JobStatus.CANCELED:
        outcome = (
            "its tasks stopped and its sinks cleaned up (any sink that could not be is named "
            f"in {client.log_dir / 'jobmaster.log'})"
        )
    elif state == JobStatus.FINISHED:
        outcome = "the job had finished"
    else:
        outcome = f"the job ended {state}: {error}"
    sys.stdout.flush()
    sys.stderr.write(signals.stopped_line(outcome))
    sys.stderr.flush()
    raise SystemExit(exit_status(signals.received or 0))


@dataclass(frozen=True)
class JobExecutionResult:
    """What a finished job returns (PyFlink's JobExecutionResult, plus its checkpoints)."""

    job_name: str
    net_runtime_ms: int
    checkpoints: list[Any]
    """CheckpointStats of every completed checkpoint, in order."""
    restarts: int
    job_id: str = ""

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    def get_job_id(self) -> str:
        return self.job_id

    def get_all_accumulator_results(self) -> dict[str, Any]:
        """Always empty: barrierflow has no accumulators (user metrics are its counters)."""
        return {}

    def get_accumulator_result(self, accumulator_name: str) -> Any:
        """None: barrierflow has no accumulators (see `get_all_accumulator_results`)."""
        return None


def _in_background(name: str, work: Callable[[], Any]) -> Future[Any]:
    """A future completed by `work()` on a daemon thread: what PyFlink's JobClient methods
    return (its CompletableFuture has the same `result`, `exception`, `done`, `cancel`)."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as error:
            future.set_exception(error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


class JobClient:
    """A running job: wait for it, watch it, cancel it, or (for tests and demos) kill a task."""

    def __init__(self, master: Any, scratch_dir: str | None) -> None:
        import time

        self._master = master
        self._scratch = scratch_dir
        self._started = time.monotonic()
        self._result: JobExecutionResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="jobmaster", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import time

        try:
            stats = self._master.run()
            self._result = JobExecutionResult(
                self._master.graph.job_name,
                int((time.monotonic() - self._started) * 1000),
                stats,
                self._master.status.attempt,
                self._master.job_id,
            )
        except BaseException as error:
            self._error = error
        finally:
            if self._scratch:
                shutil.rmtree(self._scratch, ignore_errors=True)
            self._master.wake_waiters()

    def wait(self, timeout: float | None = None) -> JobExecutionResult:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job still running after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` s for the job to end; True once it has (then `wait` returns or
        raises at once)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def metrics(self) -> MetricsSnapshot | None:
        """The tasks' metrics as the JobMaster last published them (None before any)."""
        return self._master.metrics.snapshot

    @property
    def view(self) -> JobView | None:
        """The job's published view (state, checkpoint statistics), as REST serves it."""
        return self._master.publisher.view

    @property
    def action_token(self) -> str:
        """The token the REST endpoint's actions (and the dashboard) need: for the user who
        started the job only."""
        return self._master.action_token

    @property
    def log_dir(self) -> Path:
        """The job's log folder on the driver (spark.log, jobmaster.log, task logs)."""
        return self._master.log_dir

    @property
    def rest_url(self) -> str | None:
        """The JobMaster's REST endpoint (`http://host:port`), None while starting or when off."""
        return self._master.status.rest_url

    def get_job_status(self) -> JobStatus:
        """The job's state (a `str` enum: compares equal to "RUNNING", "FINISHED", ...)."""
        return self._master.status.state

    def get_job_id(self) -> str:
        """The job's id (it names the job's Spark job groups, `barrierflow-<id>-<attempt>`)."""
        return self._master.job_id

    @property
    def job_graph(self) -> JobGraph:
        return self._master.graph

    def cancel(self, reason: str = "cancelled by the user") -> Future[None]:
        """Cancel the job (it ends CANCELED; `wait` raises JobExecutionError naming `reason`).

        Returns a future (PyFlink's shape) done once the job has ended."""
        self._master.request_cancel(reason)
        return _in_background("cancel", lambda: self._thread.join())

    def get_job_execution_result(self) -> Future[JobExecutionResult]:
        """A future of the job's JobExecutionResult (PyFlink's shape): done when the job
        ends, its `result()` raising as `wait()` does if the job failed or was cancelled."""
        return _in_background("job-execution-result", self.wait)

    def trigger_savepoint(
        self, savepoint_directory: str | None = None, *, timeout: float = 300.0
    ) -> Future[str]:
        """Take a savepoint of the running job into a new folder below `savepoint_directory`
        (None: the checkpoint config's default savepoint folder). Returns a future (PyFlink's
        shape) of that folder's URI, done once the savepoint completed; the job runs on. Its
        `result()` raises SavepointError if the savepoint failed (the job was not RUNNING,
        the folder is not writable, a task declined, it timed out) and TimeoutError if it
        did not end within `timeout` seconds."""
        folder = _savepoint_folder(savepoint_directory)
        trigger_id = self._master.trigger_savepoint(folder)
        return _in_background(
            "savepoint", lambda: self._savepoint_location(trigger_id, timeout, "savepoint")
        )

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        *,
        drain: bool | None = None,
        savepoint_dir: str | None = None,
        timeout: float = 300.0,
    ) -> Future[str]:
        """Stop the job with a savepoint (Flink's stop-with-savepoint), in PyFlink's argument
        order. Returns a future of the savepoint folder's URI, done once the job ended
        FINISHED: the sources stop (with `advance_to_end_of_event_time`, event time first
        advances to the end, so every window fires), the savepoint is the final checkpoint,
        and two-phase-commit sinks commit up to it. If the savepoint fails, the job fails over
        and runs on, and the future's `result()` raises SavepointError saying why.

        `drain=` and `savepoint_dir=` are the keywords of barrierflow's earlier order, kept.

        >>> JobClient.stop_with_savepoint(None, "/savepoints")
        Traceback (most recent call last):
        ...
        barrierflow.errors.ConfigurationError: stop_with_savepoint(advance_to_end_of_event_time, \
savepoint_directory) takes a bool first, got '/savepoints'; pass the folder as \
savepoint_directory=...
        """
        if not isinstance(advance_to_end_of_event_time, bool):
            raise ConfigurationError(
                "stop_with_savepoint(advance_to_end_of_event_time, savepoint_directory) takes a "
                f"bool first, got {advance_to_end_of_event_time!r}; pass the folder as "
                "savepoint_directory=..."
            )
        if drain is not None:
            advance_to_end_of_event_time = bool(drain)
        if savepoint_dir is not None:
            if savepoint_directory is not None:
                raise ConfigurationError(
                    "stop_with_savepoint got both savepoint_directory and savepoint_dir; pass one"
                )
            savepoint_directory = savepoint_dir
        folder = _savepoint_folder(savepoint_directory)
        trigger_id = self._master.stop_with_savepoint(folder, advance_to_end_of_event_time)

        def stopped() -> str:
            location = self._savepoint_location(trigger_id, timeout, "stop with savepoint")
            self._thread.join(timeout)  # the operation completes as the job ends FINISHED
            return location

        return _in_background("stop-with-savepoint", stopped)

    def _savepoint_location(self, trigger_id: str, timeout: float, what: str) -> str:
        from barrierflow.errors import SavepointError

        operation = self._master.publisher.wait_for_operation(trigger_id, timeout)
        if operation is None or operation.status == "IN_PROGRESS":
            raise TimeoutError(f"the {what} ({trigger_id}) did not end within {timeout} s")
        if operation.status == "FAILED" or operation.location is None:
            raise SavepointError(f"the {what} failed: {operation.failure}")
        return operation.location

    def wait_for_completed_checkpoints(self, count: int, timeout: float = 60.0) -> bool:
        """True once `count` checkpoints completed in this run (of any attempt)."""
        return (
            self._master.wait_for(
                lambda s: len(s.completed_checkpoints) >= count or s.state.is_terminal, timeout
            )
            and len(self._master.status.completed_checkpoints) >= count
        )

    def wait_until_running(self, attempt: int = 0, timeout: float = 120.0) -> bool:
        return (
            self._master.wait_for(
                lambda s: (
                    (s.state is JobStatus.RUNNING and s.attempt >= attempt) or s.state.is_terminal
                ),
                timeout,
            )
            and self._master.status.state is JobStatus.RUNNING
        )

    def task_process(self, vertex_id: int, subtask_index: int) -> tuple[str, int]:
        """(host, pid) of a running subtask's process."""
        return self._master.status.processes[SubtaskId(vertex_id, subtask_index)]

    def kill_task_process(self, vertex_id: int, subtask_index: int = 0) -> int:
        """Kill a subtask's stream-task process with SIGKILL (local masters only); its Spark
        task lives and starts a new one (the job rolls back in place). Returns the pid."""
        return kill_local(*self.task_process(vertex_id, subtask_index))

    def spark_task_process(self, vertex_id: int, subtask_index: int) -> tuple[str, int]:
        """(host, pid) of the Spark task (Python worker) that runs a subtask's stream task."""
        return self._master.spark_tasks[SubtaskId(vertex_id, subtask_index)]

    def kill_spark_task(self, vertex_id: int, subtask_index: int = 0) -> int:
        """Kill the Spark task (its Python worker) of a subtask with SIGKILL, its stream task
        with it (local masters only): the job recovers in a new Spark job. Returns the pid."""
        return kill_local(*self.spark_task_process(vertex_id, subtask_index))

    def kill_executor_jvm(self, vertex_id: int, subtask_index: int = 0) -> int:
        """Kill the executor JVM that runs a subtask's Spark task with SIGKILL, every Spark
        task and stream task it runs with it (local executors only; refused on a `local[N]`
        master, where tasks run inside the driver's JVM). The barrier stage fails and the job
        recovers in a new Spark job on the remaining executors, or on the replacement a
        standalone or local-cluster worker starts. Returns the JVM's pid."""
        host, pid = self.spark_task_process(vertex_id, subtask_index)
        check_this_host(host)
        return kill_local(host, executor_jvm_of(pid))

    def inject_failure(self, kind: str, vertex_id: int, subtask_index: int = 0) -> int:
        """Make a running subtask fail in one of FAILURE_KINDS (`barrierflow chaos`); returns
        the attempt it was aimed at (an exception aimed at an attempt that has meanwhile
        ended is dropped: that attempt is already failing)."""
        from barrierflow.cluster.mails import FailureInjectionRequested

        attempt = self.attempt
        if kind in ("exception", "restore", "storage"):  # the last two arm the next restore
            subtask = SubtaskId(vertex_id, subtask_index)
            reason = f"injected by barrierflow chaos (attempt {attempt})"
            arm = "" if kind == "exception" else kind
            self._master.mailbox.put(FailureInjectionRequested(attempt, subtask, reason, arm))
        elif kind == "kill":  # the stream task's process: respawned in place
            self.kill_task_process(vertex_id, subtask_index)
        elif kind == "executor":  # its Spark task (Python worker): a new Spark stage
            self.kill_spark_task(vertex_id, subtask_index)
        elif kind == "jvm":  # the executor JVM running its Spark task: a new Spark stage
            self.kill_executor_jvm(vertex_id, subtask_index)
        elif kind == "driver":
            raise ConfigurationError(
                "the failure kind driver kills this driver process: only `barrierflow chaos`, "
                "which runs the job in driver processes of its own, can inject it"
            )
        else:
            raise ConfigurationError(
                f"unknown failure kind {kind!r}; the kinds are {', '.join(FAILURE_KINDS)}"
            )
        return attempt

    @property
    def completed_checkpoints(self) -> tuple[int, ...]:
        return self._master.status.completed_checkpoints

    @property
    def attempt(self) -> int:
        return self._master.status.attempt

    @property
    def restored_from(self) -> int | None:
        """The checkpoint id the current attempt restored from (None: started empty)."""
        return self._master.status.restored_from


ENDED_STATES = tuple(state for state in JobStatus if state.is_terminal)
"""The job states a job never leaves (`JobStatus.is_terminal`), for `in` tests on a state."""

FAILURE_KINDS = ("exception", "kill", "executor", "jvm", "restore", "storage", "driver")
"""The failures `barrierflow chaos` injects (`JobClient.inject_failure` all but driver).
exception: the task raises ChaosFailure on its mailbox thread, as a user function would
(recovered in place). kill: SIGKILL of the stream task's process. executor: SIGKILL of the
Spark task's Python worker, which runs the stream task (its loss ends the Spark task;
recovered by a new barrier stage). jvm: SIGKILL of the executor JVM that runs the Spark task
(every task of that executor is lost; a new barrier stage on the remaining or replacement
executors); only where executors are JVMs of their own (`local-cluster[W,C,M]`, a standalone
cluster on this host), never on `local[N]`. restore: the attempt fails as for exception, and
the task then fails again while it restores (the attempt after that recovers).
storage: the attempt fails as for exception, and transient storage errors hit the
checkpoint reads of the restore that follows (the driver's `_metadata`, every task's state
files: retried with backoff) and the next `_metadata` write (that checkpoint aborts).
driver: SIGKILL of the whole driver (its Python process, Spark's JVM, the Python workers
and stream tasks), then a new driver runs the job file again and restores the newest
checkpoint (cluster/chaos_faults.py, chaos/drivers.py)."""

DEFAULT_FAILURE_KINDS = ("exception", "kill", "executor")
"""`barrierflow chaos`'s default: one attempt failure each, which every master can take. jvm
needs executor JVMs; driver starts a new driver (Spark too) per failure; restore and storage
(quick: well under 2 s each here) cost two attempt failures each (storage: the aborted
checkpoint fails over too), so the flagship's one line per failure stays as it is and they
are asked for with --kinds."""


def _savepoint_folder(folder: Any) -> str | None:
    """A savepoint folder argument: a path or URI string, or None (the default folder).

    >>> _savepoint_folder(True)
    Traceback (most recent call last):
    ...
    barrierflow.errors.ConfigurationError: a savepoint directory must be a path or URI \
string (or None for the default), got True
    """
    if folder is not None and not isinstance(folder, (str, os.PathLike)):
        raise ConfigurationError(
            "a savepoint directory must be a path or URI string (or None for the default), "
            f"got {folder!r}"
        )
    return None if folder is None else os.fspath(folder)


def _positive(value: int, what: str) -> int:
    """`value` if it is an integer >= 1 (not a bool), else a ConfigurationError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def _check_within_max(parallelism: int, max_parallelism: int, what: str) -> None:
    """Key groups are spread over subtasks: no more subtasks than key groups."""
    if parallelism > max_parallelism:
        raise ConfigurationError(
            f"{what} {parallelism} is above the max parallelism {max_parallelism}; "
            "raise it with env.set_max_parallelism()"
        )
