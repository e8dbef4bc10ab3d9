"""A job file for the standalone-cluster tests: a keyed running word count and a tumbling
event-time window count over the same generated words, at one parallelism.

    python -m barrierflow.cli run standalone_job.py [--master ...] -- OUT RECORDS [--shout]
        [--print]

With --shout the words go through `driver_only_helpers.shout`, a module the test installs
only in the driver's environment (the executors need --py-files to import it). With --print
a second pipeline prints the numbers below PRINTED at parallelism 2 (`numbers:N> i`): print()
of a task on an executor must show on the driver's console.
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
PRINTED = 40
"""With --print, the numbers 0..PRINTED-1 are printed (`numbers:N> i`)."""


def record(index: int) -> tuple[int, str]:
    return index, word_of(index)


def build(
    env: StreamExecutionEnvironment, out: str, records: int, shout=None, show: bool = False
) -> None:
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
    if show:  # a branch of its own (a print of a step above would break its chain): 2 subtasks
        numbers = DataGeneratorSource(lambda i: i, PRINTED, num_splits=2)
        printed = env.from_source(numbers, WatermarkStrategy.no_watermarks(), "printed")
        printed.set_parallelism(2).uid("printed").print("numbers").set_parallelism(2)


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
    build(env, out, int(records), shout, show="--print" in flags)
    env.execute("standalone-job")
