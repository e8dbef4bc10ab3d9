"""Deterministic inputs and independent expectations shared by the end-to-end tests."""

from __future__ import annotations

from collections import Counter

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]


def word_of(index: int) -> str:
    return WORDS[(index * 31 + index // 5) % len(WORDS)]


def running_count_rows(words) -> Counter:
    """A keyed running count emits (word, n) once for every n from 1 to the word's total."""
    totals = Counter(words)
    return Counter((w, n) for w, total in totals.items() for n in range(1, total + 1))


def paced_word_count(
    tmp_path, records: int | None, rate: float | None
) -> StreamExecutionEnvironment:
    """A keyed running count of `records` generated words (None: endless) at `rate` records
    per second (None: as fast as it goes) into an exactly-once FileSink at <tmp_path>/out,
    parallelism 2, checkpoints every 300 ms into <tmp_path>/checkpoints, a uid on every step
    (so savepoints and reruns map back onto the operators)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    (
        env.from_source(
            DataGeneratorSource(word_of, records, records_per_second=rate),
            WatermarkStrategy.no_watermarks(),
            "words",
        )
        .uid("words")
        .map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    return env
