"""StreamExecutionEnvironment: where a job is defined, configured and executed."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from barrierflow.api.checkpoint_config import CheckpointConfig, CheckpointingMode
from barrierflow.api.configuration import Configuration, apply_to
from barrierflow.api.datastream import DataStream
from barrierflow.api.driver_signals import StopOnSignals, exit_status
from barrierflow.api.execution_config import ExecutionConfig
from barrierflow.api.job_client import DEFAULT_FAILURE_KINDS as DEFAULT_FAILURE_KINDS
from barrierflow.api.job_client import ENDED_STATES as ENDED_STATES
from barrierflow.api.job_client import FAILURE_KINDS as FAILURE_KINDS
from barrierflow.api.job_client import JobClient, JobExecutionResult
from barrierflow.api.python_dependencies import PythonDependencies, not_runnable
from barrierflow.cluster.jobmaster.restore_point import RestoreMode, SavepointRestoreSettings
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.cluster.spark.session import SparkOptions
from barrierflow.connectors.base import Source
from barrierflow.core.restart_strategies import (
    DEFAULT_WITH_CHECKPOINTING,
    RestartStrategies,
    RestartStrategyConfiguration,
)
from barrierflow.core.runtime_execution_mode import RuntimeExecutionMode
from barrierflow.core.state_backends import HashMapStateBackend, StateBackend
from barrierflow.core.typeinfo import check_type_info
from barrierflow.core.watermark_strategy import WatermarkStrategy
from barrierflow.errors import ConfigurationError, JobDefinitionError
from barrierflow.graph.builder import build_job_graph
from barrierflow.graph.job_graph import JobGraph
from barrierflow.graph.transformation import Transformation
from barrierflow.runtime.operators.keyed import KeyedReduceOperator
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.state.backends import check_backend_installed, check_state_backend
from barrierflow.state.key_groups import DEFAULT_MAX_PARALLELISM

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


class StreamExecutionEnvironment(PythonDependencies):
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
        self._dependency_conf: dict[str, str] = {}
        self._state_backend: StateBackend = HashMapStateBackend()
        self._changelog_state_backend = False
        self._chaining = True
        self._configuration = Configuration()
        """Every key `configure` was given (`get_configuration`)."""
        self._runtime_mode = RuntimeExecutionMode.STREAMING

    @staticmethod
    def get_execution_environment(
        configuration: Configuration | None = None,
    ) -> StreamExecutionEnvironment:
        """A new environment, configured by `configuration` if given (see `configure`)."""
        env = StreamExecutionEnvironment()
        if configuration is not None:
            env.configure(configuration)
        return env

    def configure(self, configuration: Configuration) -> StreamExecutionEnvironment:
        """Apply a `Configuration`'s Flink options (PyFlink's `configure`): `parallelism.default`,
        `pipeline.max-parallelism`, `pipeline.name` (the job name `execute()` uses when given
        none), `pipeline.auto-watermark-interval`, `pipeline.operator-chaining.enabled`,
        `pipeline.global-job-parameters`, `execution.runtime-mode`, `execution.buffer-timeout`,
        `execution.checkpointing.interval`/`.mode`/`.dir`/`.savepoint-dir` (and the older
        `state.checkpoints.dir`, `state.savepoints.dir`), `state.backend.type` (hashmap,
        rocksdb). `spark.*` keys become the Spark session's settings (`barrierflow run
        --conf` wins over them). Other keys are kept, unused (`get_configuration`); keys not
        set leave their settings as they were.

        >>> from barrierflow import Configuration
        >>> config = Configuration().set_string("parallelism.default", "3")
        >>> StreamExecutionEnvironment.get_execution_environment(config).get_parallelism()
        3
        """
        apply_to(self, configuration)
        return self

    def get_configuration(self) -> Configuration:
        """A copy of every key `configure` was given, known or not."""
        return Configuration(self._configuration)

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
        """STREAMING (the default), BATCH or AUTOMATIC (see `RuntimeExecutionMode`).

        BATCH: every source must be bounded (an unbounded one is refused when the job is
        built, naming it); a keyed `reduce` (and `sum`/`min`/`max`/`min_by`/`max_by`) emits
        only each key's final value; no periodic checkpoints run (the one final checkpoint
        at the end of input still commits the sinks), so a failure restarts from the start.
        AUTOMATIC: BATCH when every source is bounded, else STREAMING."""
        if not isinstance(execution_mode, RuntimeExecutionMode):
            raise ConfigurationError(
                f"set_runtime_mode needs a RuntimeExecutionMode, got {execution_mode!r}"
            )
        self._runtime_mode = execution_mode
        return self

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

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        """No operator chains to another: each runs in stream tasks of its own, its records
        crossing a channel (for debugging or to see each operator's metrics apart)."""
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return self._chaining

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

    def add_source(
        self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None
    ) -> DataStream:
        """PyFlink's `add_source`: a barrierflow `Source` runs as `from_source` with no
        watermarks; a PyFlink `SourceFunction` (a Java function) is refused, naming it."""
        if not isinstance(source_func, Source):
            what = "Source (FileSource, DataGeneratorSource, ...)"
            raise JobDefinitionError(not_runnable("add_source", what, source_func))
        return self.from_source(source_func, WatermarkStrategy.no_watermarks(), source_name)

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
        return DataStream(self, transformation)._declare(type_info, "from_source")

    def read_text_file(self, file_path: str, charset_name: str = "UTF-8") -> DataStream:
        """Each line of a file, or of a folder's files, as a `str`, once (PyFlink 1.x's
        `read_text_file`; the file connector's text line format, bounded)."""
        from barrierflow.connectors.file_system import FileSource, StreamFormat

        text_lines = StreamFormat.text_line_format(charset_name)
        source = FileSource.for_record_stream_format(text_lines, file_path).build()
        return self.from_source(source, WatermarkStrategy.no_watermarks(), "Read Text File")

    def from_collection(self, collection: Iterable[Any], type_info: Any = None) -> DataStream:
        """A bounded stream of `collection`'s elements; with a row `type_info`
        (`Types.ROW_NAMED(...)`) each element becomes a `Row` with its field names, and a
        `Types.FLOAT()` value a 32-bit float (PyFlink converts them on the JVM)."""
        from barrierflow.connectors.collection import CollectionSource

        elements = list(collection)
        if type_info is not None:
            check_type_info(type_info, "from_collection's type_info")
            try:
                elements = [type_info.conform(element, strict=True) for element in elements]
            except TypeError as error:
                raise ConfigurationError(f"from_collection: {error}") from None
        return self.from_source(
            CollectionSource(elements), WatermarkStrategy.no_watermarks(), "Collection", type_info
        )

    def _add(self, transformation: Transformation) -> None:
        """Record an API call's transformation (DataStream methods call this)."""
        self._transformations.append(transformation)

    # ---- execution ---------------------------------------------------------------------------

    def get_job_graph(self, job_name: str | None = None) -> JobGraph:
        """The job graph of what was defined; raises ConfigurationError for a default
        parallelism (environment or command line) or an operator's above the max."""
        parallelism, what = self._default_parallelism()
        _check_within_max(parallelism, self._max_parallelism, what)
        batch = self._is_batch()
        for transformation in self._transformations:
            if transformation.operator_class is KeyedReduceOperator:
                transformation.operator_options["final_only"] = batch
        return build_job_graph(
            self._job_name(job_name),
            self._transformations,
            parallelism,
            self._max_parallelism,
            self._config.get_auto_watermark_interval(),
            chaining=self._chaining,
            job_parameters=self._config.get_global_job_parameters(),
        )

    def _is_batch(self) -> bool:
        """Whether the job runs in BATCH mode; refuses an unbounded source under BATCH."""
        mode = self._runtime_mode
        if mode is RuntimeExecutionMode.STREAMING:
            return False
        sources = [t for t in self._transformations if t.kind == "source"]
        unbounded = [t for t in sources if not getattr(t.source, "bounded", True)]
        if mode is RuntimeExecutionMode.AUTOMATIC:
            return not unbounded
        if unbounded:
            source = unbounded[0]
            raise JobDefinitionError(
                f"RuntimeExecutionMode.BATCH needs bounded sources; source '{source.name}' "
                f"({type(source.source).__name__}) is unbounded: make it bounded or run "
                "STREAMING"
            )
        return True

    def _job_name(self, job_name: str | None) -> str:
        """The name given, else the configuration's `pipeline.name`, else "barrierflow job"."""
        if job_name is not None:
            return job_name
        return self._configuration.get_string("pipeline.name", "barrierflow job")

    def execute(self, job_name: str | None = None) -> JobExecutionResult:
        """Run the job until its input ends (bounded) or it is cancelled; raise if it fails.

        The steps defined so far make the job and are then cleared (as PyFlink does): a file
        that calls `execute()` three times runs three different pipelines.

        On the main thread, SIGTERM and SIGINT (Ctrl-C) stop the job in order and then exit
        the process with one line and status 143 or 130 (api/driver_signals.py)."""
        job_name = self._job_name(job_name)
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

    def execute_async(self, job_name: str | None = None) -> JobClient:
        from barrierflow.checkpoint.coordinator import CheckpointCoordinatorConfig
        from barrierflow.cluster.jobmaster.job_master import JobMaster, JobSettings
        from barrierflow.cluster.spark.runner import SparkAttemptRunner
        from barrierflow.runtime.barriers.handler import barrier_handler_for

        config = self._checkpoint_config
        # Refuse impossible combinations (AT_LEAST_ONCE + unaligned) before anything runs.
        barrier_handler_for(config.mode, config.unaligned, config.aligned_timeout_ms, 1)
        job_name = self._job_name(job_name)
        graph = self.get_job_graph(job_name)
        # BATCH: no periodic checkpoints, only the final one (in a scratch folder) commits.
        enabled = config.is_checkpointing_enabled() and not self._is_batch()
        # As PyFlink: execute() starts a fresh job; the next one is built from new steps only.
        self._transformations = []
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
        connect = functools.partial(SparkAttemptRunner.connect, options=self._spark_options())
        client = JobClient(JobMaster(graph, settings, connect_runner=connect), scratch)
        if command_line_defaults.on_execute is not None:
            command_line_defaults.on_execute(self, client)
        return client

    def _spark_options(self) -> SparkOptions:
        """The Spark settings of the job's session: the configuration's `spark.*` keys, the
        command line's on top (`barrierflow run --conf`), plus `add_python_file`'s files."""
        job_conf = {
            key: value
            for key, value in self._configuration.to_dict().items()
            if key.startswith("spark.")
        }
        return (
            SparkOptions({**self._dependency_conf, **job_conf})
            .merged(command_line_defaults.spark_options or SparkOptions())
            .merged(SparkOptions(py_files=tuple(self._python_files)))
        )


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
