"""RuntimeExecutionMode.BATCH (issue 24 item 11): a bounded job's keyed reduce (and sum, min,
max, min_by, max_by) emits only its final value per key, at the end of input; no periodic
checkpoints run; an unbounded source is refused when the job is built, naming it.
AUTOMATIC is BATCH exactly when every source is bounded. The operator event by event and
the built job, no Spark (tests/e2e/test_pyflink_api.py runs one on Spark)."""

from __future__ import annotations

import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.api.environment import (
    NO_CHECKPOINTS_INTERVAL_MS,
    JobDefined,
    command_line_defaults,
)
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.core.runtime_execution_mode import RuntimeExecutionMode
from barrierflow.errors import ConfigurationError, JobDefinitionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark
from barrierflow.runtime.operators.keyed import KeyedReduceOperator


def final_only_reduce(**options):
    operator = KeyedReduceOperator(
        "r", "Reduce", lambda r: r[0], lambda a, b: (a[0], a[1] + b[1]), final_only=True,
        **options,
    )  # fmt: skip
    return started(operator, ManualClock())


def test_a_final_only_reduce_emits_each_keys_last_value_at_the_end_of_input():
    operator, out = final_only_reduce()
    operator.process_batch(RecordBatch([("a", 1), ("b", 10), ("a", 2)], [1, 2, 3]))
    operator.process_watermark(Watermark(5))
    assert out.take() == [("watermark", 5)]  # nothing of the reduce before the end
    operator.process_batch(RecordBatch([("b", 5), ("c", 7)], [6, 7]))
    operator.process_watermark(Watermark(MAX_WATERMARK))
    # one value per key, in the order of each key's last record, with its timestamp
    assert out.take() == [
        ("record", ("a", 3), 3),
        ("record", ("b", 15), 6),
        ("record", ("c", 7), 7),
        ("watermark", MAX_WATERMARK),
    ]


def test_records_without_timestamps_give_finals_without_them():
    operator, out = final_only_reduce()
    operator.process_batch(RecordBatch([("a", 1), ("a", 4)]))
    operator.process_watermark(Watermark(MAX_WATERMARK))
    assert out.take() == [("record", ("a", 5), None), ("watermark", MAX_WATERMARK)]


def test_a_final_only_reduce_with_dead_letters_keeps_the_good_records_for_the_end():
    operator, out = final_only_reduce(dead_letters=True)
    operator.process_batch(RecordBatch([("a", 1), ("a", "x"), ("a", 2)], [1, 2, 3]))
    emitted = out.take()
    assert [kind for kind, *_ in emitted] == ["side"]  # the bad record only
    operator.process_watermark(Watermark(MAX_WATERMARK))
    assert out.take()[0] == ("record", ("a", 3), 3)


def keyed_sum(env):
    env.from_collection([("a", 1), ("a", 2)]).key_by(lambda r: r[0]).sum(1).print()
    return env


def reduce_options(env) -> list[bool]:
    graph = env.get_job_graph()
    return [
        op.transformation.operator_options.get("final_only")
        for vertex in graph.vertices
        for op in vertex.operators
        if op.transformation.operator_class is KeyedReduceOperator
    ]


@pytest.mark.parametrize(
    ("mode", "final_only"),
    [
        (RuntimeExecutionMode.STREAMING, False),
        (RuntimeExecutionMode.BATCH, True),
        (RuntimeExecutionMode.AUTOMATIC, True),  # every source bounded
    ],
)
def test_the_mode_decides_whether_keyed_reduces_emit_only_final_values(mode, final_only):
    env = StreamExecutionEnvironment.get_execution_environment().set_runtime_mode(mode)
    assert reduce_options(keyed_sum(env)) == [final_only]


def unbounded(env):
    numbers = env.from_source(
        DataGeneratorSource(lambda i: ("k", i), None), WatermarkStrategy.no_watermarks(), "ticks"
    )
    numbers.key_by(lambda r: r[0]).sum(1).print()
    return env


def test_batch_refuses_an_unbounded_source_when_the_job_is_built():
    env = StreamExecutionEnvironment.get_execution_environment()
    unbounded(env).set_runtime_mode(RuntimeExecutionMode.BATCH)
    with pytest.raises(
        JobDefinitionError,
        match="BATCH needs bounded sources; source 'ticks' \\(DataGeneratorSource\\) is unbounded",
    ):
        env.get_job_graph()


def test_automatic_runs_a_job_with_an_unbounded_source_as_streaming():
    env = StreamExecutionEnvironment.get_execution_environment()
    unbounded(env).set_runtime_mode(RuntimeExecutionMode.AUTOMATIC)
    assert reduce_options(env) == [False]


def test_batch_runs_no_periodic_checkpoints(monkeypatch):
    captured = []
    monkeypatch.setattr(command_line_defaults, "define_only", lambda g, s: captured.append(s))
    for mode in (RuntimeExecutionMode.STREAMING, RuntimeExecutionMode.BATCH):
        env = StreamExecutionEnvironment.get_execution_environment().set_runtime_mode(mode)
        env.enable_checkpointing(1000)
        keyed_sum(env)
        with pytest.raises(JobDefined):
            env.execute()
    streaming, batch = (s.coordinator.interval_ms for s in captured)
    assert (streaming, batch) == (1000, NO_CHECKPOINTS_INTERVAL_MS)


def test_set_runtime_mode_refuses_what_is_not_a_mode():
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ConfigurationError, match="needs a RuntimeExecutionMode, got 'BATCH'"):
        env.set_runtime_mode("BATCH")
