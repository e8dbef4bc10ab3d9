"""Finding the executor JVM above a Spark task's Python worker (the `jvm` failure kind)."""

from __future__ import annotations

import os

import pytest

from barrierflow.api.environment import DEFAULT_FAILURE_KINDS, FAILURE_KINDS
from barrierflow.cluster.executor.local_processes import executor_jvm_of, parent_and_command
from barrierflow.errors import ConfigurationError

EXECUTOR = "/opt/jdk/bin/java -cp x org.apache.spark.executor.CoarseGrainedExecutorBackend"
DRIVER = "/opt/jdk/bin/java -cp x org.apache.spark.deploy.SparkSubmit pyspark-shell"


def processes(table: dict[int, tuple[int, str]]):
    return table.get


def test_the_executor_jvm_is_the_java_ancestor_that_runs_the_executor_backend():
    table = {
        9: (8, "python -m pyspark.worker"),
        8: (7, "python -m pyspark.daemon"),
        7: (3, EXECUTOR),
        3: (1, DRIVER),  # local-cluster: the driver's JVM started the executor's
    }
    assert executor_jvm_of(9, processes(table)) == 7


def test_a_task_inside_the_drivers_jvm_is_refused_naming_the_masters_that_have_executors():
    table = {9: (8, "python -m pyspark.daemon"), 8: (1, DRIVER)}
    with pytest.raises(ConfigurationError, match=r"driver's JVM \(pid 8\).*local-cluster"):
        executor_jvm_of(9, processes(table))


def test_a_process_without_a_jvm_above_it_is_refused():
    with pytest.raises(ConfigurationError, match=r"no executor JVM found above .* 9"):
        executor_jvm_of(9, processes({9: (1, "python worker")}))
    with pytest.raises(ConfigurationError, match="no executor JVM"):
        executor_jvm_of(9, processes({}))  # gone already


def test_this_process_is_read_with_its_parent_and_command_line():
    parent, command = parent_and_command(os.getpid())
    assert parent == os.getppid()
    assert "python" in command.lower() or "pytest" in command


def test_the_default_kinds_are_those_every_master_can_take():
    lifecycle = {"restore", "storage", "driver"}  # asked for: they cost more than one failure
    assert set(DEFAULT_FAILURE_KINDS) == set(FAILURE_KINDS) - {"jvm"} - lifecycle
