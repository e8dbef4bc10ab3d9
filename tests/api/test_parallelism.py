"""Parallelism precedence, as in Flink: an operator's `set_parallelism`, then the
environment's, then the command line's default (`barrierflow run -p`), then the CPU count;
every value is validated (issue 9, defect 8)."""

from __future__ import annotations

import os
import textwrap

import pytest
from click.testing import CliRunner

from barrierflow import StreamExecutionEnvironment
from barrierflow.api.environment import command_line_defaults
from barrierflow.cli import main
from barrierflow.errors import ConfigurationError


@pytest.fixture
def command_line_p():
    """Set the command line's default parallelism as `barrierflow run -p` does, and undo it."""
    before = command_line_defaults.parallelism

    def set_p(value):
        command_line_defaults.parallelism = value

    yield set_p
    command_line_defaults.parallelism = before


def pipeline(env, map_parallelism=None):
    stream = env.from_collection([1, 2, 3]).map(lambda x: x).name("Map")
    if map_parallelism is not None:
        stream.set_parallelism(map_parallelism)
    stream.print()
    return env


def parallelism_of(graph, name: str) -> int:
    (vertex,) = [v for v in graph.vertices if any(op.name == name for op in v.operators)]
    return vertex.parallelism


def test_the_environments_parallelism_wins_over_the_command_line(command_line_p):
    command_line_p(5)
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)

    assert env.get_parallelism() == 2
    assert parallelism_of(pipeline(env).get_job_graph(), "Map") == 2


def test_an_operators_parallelism_wins_over_the_environment_and_the_command_line(
    command_line_p,
):
    command_line_p(5)
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)

    graph = pipeline(env, map_parallelism=3).get_job_graph()

    assert parallelism_of(graph, "Map") == 3
    assert parallelism_of(graph, "Print") == 2


def test_the_command_line_is_the_default_of_an_environment_that_sets_none(command_line_p):
    command_line_p(5)
    env = StreamExecutionEnvironment.get_execution_environment()

    assert env.get_parallelism() == 5
    assert parallelism_of(pipeline(env).get_job_graph(), "Map") == 5


def test_without_any_setting_the_cpu_count_is_the_default(command_line_p):
    command_line_p(None)

    assert StreamExecutionEnvironment().get_parallelism() == min(os.cpu_count() or 1, 128)


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "2", None], ids=repr)
def test_the_environment_refuses_a_parallelism_that_is_not_an_integer_of_at_least_one(value):
    env = StreamExecutionEnvironment.get_execution_environment()

    with pytest.raises(ConfigurationError, match="the environment's parallelism must be an"):
        env.set_parallelism(value)


@pytest.mark.parametrize("value", [0, True, 1.5, "3"], ids=repr)
def test_an_operator_refuses_a_parallelism_that_is_not_an_integer_of_at_least_one(value):
    stream = StreamExecutionEnvironment.get_execution_environment().from_collection([1])

    with pytest.raises(ConfigurationError, match="an operator's parallelism must be an"):
        stream.map(lambda x: x).set_parallelism(value)
    with pytest.raises(ConfigurationError, match="an operator's parallelism must be an"):
        stream.print().set_parallelism(value)


@pytest.mark.parametrize("value", [0, True], ids=repr)
def test_a_command_line_default_that_is_not_an_integer_of_at_least_one_is_refused(
    command_line_p, value
):
    command_line_p(value)
    env = pipeline(StreamExecutionEnvironment.get_execution_environment())

    with pytest.raises(ConfigurationError, match=r"command line's parallelism \(-p\) must be"):
        env.get_job_graph()


def test_an_environment_parallelism_above_the_max_is_refused_in_either_order():
    env = pipeline(StreamExecutionEnvironment.get_execution_environment())
    env.set_parallelism(8).set_max_parallelism(4)

    with pytest.raises(ConfigurationError, match="environment's parallelism 8 is above the max"):
        env.get_job_graph()

    env.set_max_parallelism(8)
    assert parallelism_of(env.get_job_graph(), "Map") == 8


def test_a_command_line_parallelism_above_the_max_is_refused(command_line_p):
    command_line_p(300)
    env = pipeline(StreamExecutionEnvironment.get_execution_environment())

    with pytest.raises(ConfigurationError, match=r"\(-p\) 300 is above the max parallelism 128"):
        env.get_job_graph()


def test_an_operator_parallelism_above_the_max_is_refused():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    pipeline(env, map_parallelism=200)

    with pytest.raises(ConfigurationError, match="'Map' has parallelism 200, above the max"):
        env.get_job_graph()


JOB = textwrap.dedent(
    """
    from barrierflow import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_collection([1]).map(lambda x: x).name("Map").print()
    graph = env.get_job_graph("p")
    maps = [v for v in graph.vertices if any(op.name == "Map" for op in v.operators)]
    print("Map:", [v.parallelism for v in maps])
    """
)


def test_barrierflow_run_p_does_not_override_the_job_files_set_parallelism(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB)

    result = CliRunner().invoke(main, ["run", str(job), "-p", "5"])

    assert result.exit_code == 0, result.output
    assert "Map: [2]" in result.output
    assert command_line_defaults.parallelism is None  # the run's -p does not outlive it


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_barrierflow_run_refuses_a_p_that_is_not_an_integer_of_at_least_one(tmp_path, value):
    job = tmp_path / "job.py"
    job.write_text(JOB)

    result = CliRunner().invoke(main, ["run", str(job), "-p", value])

    assert result.exit_code == 2
    assert "Invalid value for '--parallelism' / '-p'" in result.output
