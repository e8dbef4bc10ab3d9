"""A job file for the standalone-cluster tests: a keyed running word count and a tumbling
event-time window count over the same generated words, at one parallelism.

    python -m barrierflow.cli run standalone_job.py [--master ...] -- OUT RECORDS [--shout]

With --shout the words go through `driver_only_helpers.shout`, a module the test installs
only in the driver's environment (the executors need --py-files to import it).
"""

from __future__ import annotations

import sys
from collections import Counter

from barrierflow import Duration, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.window import TumblingEventTimeWindows
from tests.e2e.jobs import running_count_rows, word_of

WINDOW_MS = 1000
STEP_MS = 10
"""Record i happens at i * STEP_MS."""


def record(index: int) -> tuple[int, str]:
    return index, word_of(index)


def build(env: StreamExecutionEnvironment, out: str, records: int, shout=None) -> None:
    env.enable_checkpointing(500)
    env.get_checkpoint_config().set_checkpoint_storage(f"{out}/checkpoints")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_seconds(1)
    ).with_timestamp_assigner(lambda event, _: event[0] * STEP_MS)
    convert = shout or (lambda word: word)
    pairs = (
        env.from_source(DataGeneratorSource(record, records), strategy, "words")
        .map(lambda event: (convert(event[1]), 1))
        .uid("pair")
    )
    (
        pairs.key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(f"{out}/counts"))
        .uid("count-sink")
    )
    (
        pairs.key_by(lambda pair: pair[0])
        .window(TumblingEventTimeWindows.of(Duration.of_millis(WINDOW_MS)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("window")
        .sink_to(FileSink.for_rows(f"{out}/windows"))
        .uid("window-sink")
    )


def expected(records: int, convert=lambda word: word) -> dict[str, Counter]:
    """What the sinks must hold, computed without barrierflow."""
    words = [convert(word_of(i)) for i in range(records)]
    per_window = Counter((convert(word_of(i)), i * STEP_MS // WINDOW_MS) for i in range(records))
    windows = Counter((word, n) for (word, _), n in per_window.items())
    return {"counts": running_count_rows(words), "windows": windows}


if __name__ == "__main__":
    out, records, *flags = sys.argv[1:]
    shout = None
    if "--shout" in flags:
        from driver_only_helpers import shout
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, out, int(records), shout)
    env.execute("standalone-job")
