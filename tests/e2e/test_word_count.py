"""The word count of DESIGN.md section 1, exactly as written, on Spark local."""

from __future__ import annotations

from collections import Counter

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink, FileSource

from .conftest import read_rows

pytestmark = pytest.mark.spark


def test_word_count_commits_the_final_count_of_every_word(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    lines = [f"the quick fox {i % 7} jumps over the lazy dog {i % 3}" for i in range(3000)]
    (source / "a.txt").write_text("\n".join(lines[:1700]) + "\n")
    (source / "b.txt").write_text("\n".join(lines[1700:]))  # no trailing newline
    out = tmp_path / "out"

    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(f"file://{tmp_path}/checkpoints")
    env.set_parallelism(2)

    lines_stream = env.from_source(
        FileSource.for_lines(str(source)), WatermarkStrategy.no_watermarks(), "lines"
    )
    (
        lines_stream.flat_map(lambda line: [(w, 1) for w in line.split()])
        .uid("split")
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(out)))
    )
    env.execute("word-count")

    expected_totals = Counter(w for line in lines for w in line.split())
    rows = read_rows(out)
    final = {}
    for (word, count), times in rows.items():
        assert times == 1, f"({word}, {count}) committed {times} times"
        final[word] = max(final.get(word, 0), count)
    assert final == dict(expected_totals)
    assert sum(rows.values()) == sum(expected_totals.values())

    # The output folder reads directly in Spark (the staging folder is hidden from it).
    frame = spark.read.json(str(out))
    assert frame.count() == sum(expected_totals.values())
