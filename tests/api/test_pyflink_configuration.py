"""Configuration in PyFlink's shape (issue 24 item 16): `Configuration`'s typed getters and
setters over string values; `get_execution_environment(configuration)` and
`env.configure(configuration)` apply the Flink keys barrierflow knows (a bad value refused
naming its key), hand `spark.*` keys to the Spark session and keep the rest; global job
parameters reach `RuntimeContext.get_job_parameter` in the tasks."""

from __future__ import annotations

import pytest

from barrierflow import (
    CheckpointingMode,
    Configuration,
    EmbeddedRocksDBStateBackend,
    StreamExecutionEnvironment,
)
from barrierflow.api.environment import JobDefined, command_line_defaults
from barrierflow.cluster.spark.session import SparkOptions
from barrierflow.core.runtime_execution_mode import RuntimeExecutionMode
from barrierflow.errors import ConfigurationError
from barrierflow.graph.deployment import task_descriptor
from barrierflow.runtime.deployment import SubtaskId
from barrierflow.runtime.operator_chain import operator_context
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext


def test_typed_values_are_kept_as_flinks_strings():
    config = (
        Configuration()
        .set_string("a.string", "x")
        .set_integer("an.int", 7)
        .set_boolean("a.bool", True)
        .set_float("a.float", 0.5)
        .set_bytearray("some.bytes", bytearray(b"\x00\xff"))
    )
    assert config.to_dict() == {
        "a.string": "x",
        "an.int": "7",
        "a.bool": "true",
        "a.float": "0.5",
        "some.bytes": "\x00\xff",
    }
    assert (config.get_integer("an.int", 0), config.get_boolean("a.bool", False)) == (7, True)
    assert (config.get_float("a.float", 0), config.get_bytearray("some.bytes", None)) == (
        0.5,
        bytearray(b"\x00\xff"),
    )
    assert config.get_integer("missing", 3) == 3 and config.get_string("missing", "d") == "d"
    assert config.key_set() == {"a.string", "an.int", "a.bool", "a.float", "some.bytes"}


def test_copies_merges_and_removals():
    base = Configuration.from_dict({"k": 1, "flag": False})
    copy = Configuration(base)
    copy.set_string("k", "2")
    assert base.get_string("k", "") == "1" and base.get_string("flag", "") == "false"
    merged = Configuration().add_all(base, prefix="p.")
    assert merged.to_dict() == {"p.k": "1", "p.flag": "false"}
    assert merged.contains_key("p.k") and merged.remove_config("p.k")
    assert not merged.remove_config("p.k") and not merged.contains_key("p.k")
    target: dict = {}
    base.add_all_to_dict(target)
    assert target == {"k": "1", "flag": "false"}
    assert Configuration(base) == base and hash(Configuration(base)) == hash(base)


@pytest.mark.parametrize(
    ("getter", "value", "message"),
    [
        ("get_integer", "seven", "n must be an integer, got 'seven'"),
        ("get_boolean", "yes", "n must be true or false, got 'yes'"),
        ("get_float", "half", "n must be a number, got 'half'"),
    ],
)
def test_a_value_of_the_wrong_type_is_named(getter, value, message):
    with pytest.raises(ConfigurationError, match=message):
        getattr(Configuration().set_string("n", value), getter)("n", None)


def configured(**keys) -> StreamExecutionEnvironment:
    config = Configuration.from_dict({key.replace("_", "."): v for key, v in keys.items()})
    return StreamExecutionEnvironment.get_execution_environment(config)


def test_the_known_keys_are_applied():
    config = Configuration.from_dict(
        {
            "parallelism.default": "3",
            "pipeline.max-parallelism": "64",
            "pipeline.auto-watermark-interval": "1 s",
            "pipeline.operator-chaining.enabled": "false",
            "execution.buffer-timeout": "20 ms",
            "execution.checkpointing.interval": "10 s",
            "execution.checkpointing.mode": "AT_LEAST_ONCE",
            "execution.checkpointing.dir": "/tmp/bf-checkpoints",
            "execution.checkpointing.savepoint-dir": "/tmp/bf-savepoints",
            "execution.runtime-mode": "batch",
            "state.backend.type": "rocksdb",
        }
    )
    env = StreamExecutionEnvironment.get_execution_environment(config)
    checkpoints = env.get_checkpoint_config()
    assert (env.get_parallelism(), env.get_max_parallelism()) == (3, 64)
    assert env.get_config().get_auto_watermark_interval() == 1000
    assert not env.is_chaining_enabled() and env._buffer_timeout_ms == 20
    assert checkpoints.get_checkpoint_interval() == 10_000
    assert checkpoints.get_checkpointing_mode() == CheckpointingMode.AT_LEAST_ONCE
    assert checkpoints.get_checkpoint_storage().endswith("/tmp/bf-checkpoints")
    assert checkpoints.get_default_savepoint_dir().endswith("/tmp/bf-savepoints")
    assert env._runtime_mode is RuntimeExecutionMode.BATCH
    assert isinstance(env.get_state_backend(), EmbeddedRocksDBStateBackend)


def test_configure_changes_only_the_keys_it_is_given():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.enable_checkpointing(500)
    env.configure(Configuration().set_string("pipeline.max-parallelism", "16"))
    assert (env.get_parallelism(), env.get_max_parallelism()) == (2, 16)
    assert env.get_checkpoint_config().get_checkpoint_interval() == 500


def test_pipeline_name_names_a_job_executed_without_a_name(monkeypatch):
    graphs = []
    monkeypatch.setattr(command_line_defaults, "define_only", lambda g, s: graphs.append(g))
    env = configured(pipeline_name="nightly counts")
    for name in (None, "given"):
        env.from_collection([1]).print()
        with pytest.raises(JobDefined):
            env.execute(name)
    assert [g.job_name for g in graphs] == ["nightly counts", "given"]


def test_spark_keys_reach_the_session_and_the_command_line_wins(monkeypatch):
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration.from_dict({"spark.executor.memory": "2g", "spark.ui.enabled": "false"})
    )
    assert env._spark_options().conf == {
        "spark.executor.memory": "2g",
        "spark.ui.enabled": "false",
    }
    monkeypatch.setattr(
        command_line_defaults, "spark_options", SparkOptions({"spark.executor.memory": "4g"})
    )
    assert env._spark_options().conf["spark.executor.memory"] == "4g"


def test_unknown_keys_are_kept_and_read_back():
    env = configured(**{"my_own_setting": "42"})
    env.configure(Configuration().set_string("table.exec.mini-batch.enabled", "true"))
    assert env.get_configuration().to_dict() == {
        "my.own.setting": "42",
        "table.exec.mini-batch.enabled": "true",
    }


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("parallelism.default", "many", "parallelism.default must be an integer, got 'many'"),
        ("parallelism.default", "0", "parallelism must be an integer >= 1, got 0"),
        ("execution.checkpointing.interval", "soon", "interval must be a duration"),
        ("execution.checkpointing.mode", "twice", "mode must be EXACTLY_ONCE or AT_LEAST_ONCE"),
        ("execution.runtime-mode", "fast", "must be STREAMING, BATCH or AUTOMATIC, got 'fast'"),
        ("state.backend.type", "forst", "state.backend.type must be hashmap or rocksdb"),
        ("pipeline.global-job-parameters", "novalue", "must be 'key:value,key:value'"),
        ("pipeline.operator-chaining.enabled", "maybe", "must be true or false, got 'maybe'"),
    ],
)
def test_a_bad_value_of_a_known_key_is_refused_naming_it(key, value, message):
    with pytest.raises(ConfigurationError, match=message):
        StreamExecutionEnvironment.get_execution_environment(Configuration().set_string(key, value))


def job_parameter_in_a_task(env, key, default):
    env.from_collection([1]).print()
    graph = env.get_job_graph()
    descriptor = task_descriptor(graph, SubtaskId(0, 0))

    class Settings:  # the TaskSettings fields operator_context reads
        attempt, deployment_id, lineage, changelog_state_backend = 0, "d", "", False
        state_backend = env.get_state_backend()

    context = operator_context(descriptor, Settings(), clock=_Clock(), mailbox=None)
    return TaskRuntimeContext(context, None).get_job_parameter(key, default)


class _Clock:
    def epoch_millis(self) -> int:
        return 0


def test_global_job_parameters_reach_the_runtime_context_of_every_task():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.get_config().set_global_job_parameters({"threshold": 3, "region": "eu"})
    assert env.get_config().get_global_job_parameters() == {"threshold": "3", "region": "eu"}
    assert job_parameter_in_a_task(env, "threshold", "0") == "3"
    assert job_parameter_in_a_task(env, "missing", "fallback") == "fallback"


def test_global_job_parameters_from_the_configuration():
    env = configured(**{"pipeline.global-job-parameters": "region:eu,limit:10"})
    env.set_parallelism(1)
    assert job_parameter_in_a_task(env, "limit", "") == "10"
