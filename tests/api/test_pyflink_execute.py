"""`execute()` starts a fresh job, as PyFlink's does: the steps defined before it make that
job and are then cleared, so a file that calls `execute()` three times runs three different
pipelines (issue 24 item 7). Checked through `barrierflow cleanup`'s define-only hook, which
hands over each job's graph instead of running it, so no Spark is needed."""

from __future__ import annotations

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.api.environment import JobDefined, command_line_defaults


@pytest.fixture
def defined_graphs(monkeypatch):
    """The graphs `execute()` is asked to run, in order (none is run)."""
    graphs = []
    monkeypatch.setattr(
        command_line_defaults, "define_only", lambda graph, settings: graphs.append(graph)
    )
    return graphs


def names(graph) -> list[str]:
    return [op.name for vertex in graph.vertices for op in vertex.operators]


def test_each_execute_runs_only_the_steps_defined_since_the_last(defined_graphs):
    env = StreamExecutionEnvironment.get_execution_environment()
    for step in ("first", "second", "third"):
        env.from_collection([1, 2]).map(lambda x: x).name(step).print()
        with pytest.raises(JobDefined):
            env.execute(step)
    assert [names(graph) for graph in defined_graphs] == [
        ["Collection", "first", "Print"],
        ["Collection", "second", "Print"],
        ["Collection", "third", "Print"],
    ]


def test_an_execute_with_nothing_new_defined_has_no_sink_to_run(defined_graphs):
    from barrierflow.errors import JobDefinitionError

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).print()
    with pytest.raises(JobDefined):
        env.execute("once")
    with pytest.raises(JobDefinitionError, match="the job has no sink"):
        env.execute("again")


def test_a_stream_defined_before_an_execute_feeds_the_next_job_again(defined_graphs):
    env = StreamExecutionEnvironment.get_execution_environment()
    numbers = env.from_collection([1, 2]).map(lambda x: x + 1).name("plus one")
    numbers.print()
    with pytest.raises(JobDefined):
        env.execute("first")
    numbers.map(lambda x: x * 2).name("doubled").print()
    with pytest.raises(JobDefined):
        env.execute("second")
    assert [names(graph) for graph in defined_graphs] == [
        ["Collection", "plus one", "Print"],
        ["Collection", "plus one", "doubled", "Print"],
    ]
