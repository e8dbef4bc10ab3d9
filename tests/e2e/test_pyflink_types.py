"""Declared types on Spark (issue 24 items 1, 5, 6): a PyFlink-style word count whose
records are named Rows from `from_collection(type_info=Types.ROW_NAMED(...))`, keyed by
`row.word`, summed, declared `Types.ROW(...)` and written by the PyFlink-shaped FileSink:
the committed part files hold exactly Flink's text of each final row (`+I[fox, 3]`), as
PyFlink 2.3 writes it."""

from __future__ import annotations

import pytest

from barrierflow import Encoder, Row, RuntimeExecutionMode, StreamExecutionEnvironment, Types
from barrierflow.connectors.file_system import FileSink, OutputFileConfig

pytestmark = pytest.mark.spark

WORDS = ["fox", "dog", "fox", "cat", "fox", "dog"] * 10


def test_named_rows_flow_through_a_job_and_the_file_sink_writes_flink_row_text(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    words = env.from_collection(
        [(word, 1) for word in WORDS],
        type_info=Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()]),
    )
    counts = words.key_by(lambda row: row.word).reduce(lambda a, b: Row(word=a.word, n=a.n + b.n))
    out = tmp_path / "out"
    counts.map(
        lambda row: Row(row.word, row["n"]), output_type=Types.ROW([Types.STRING(), Types.INT()])
    ).sink_to(
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_suffix(".txt").build())
        .build()
    )
    env.execute("typed-word-count")
    lines = [line for part in out.glob("part-*.txt") for line in part.read_text().splitlines()]
    assert sorted(lines) == ["+I[cat, 10]", "+I[dog, 20]", "+I[fox, 30]"]


def test_a_float_output_is_32_bit_after_key_by_and_as_it_was_in_the_chained_function(spark):
    # PyFlink 2.3, run here: map(lambda x: x, output_type=Types.FLOAT()) on 110.1, then
    # .map(repr) gave '110.1' (chained: the Python object as it was) and
    # .key_by(...).map(repr) gave '110.0999984741211' (FloatCoder writes 4 bytes at key_by)
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    amounts = env.from_collection([110.1, 1e40]).map(lambda v: v, output_type=Types.FLOAT())
    chained = amounts.map(lambda v: ("chained", repr(v)))
    crossed = amounts.key_by(lambda v: 1).map(lambda v: ("crossed", repr(v)))
    assert sorted(chained.union(crossed).execute_and_collect(limit=10)) == [
        ("chained", "110.1"),
        ("chained", "1e+40"),
        ("crossed", "110.0999984741211"),
        ("crossed", "inf"),
    ]
