"""A job file: a keyed running word count of generated words into an exactly-once FileSink.

The flagship example checks it with `barrierflow chaos`; it runs just as well on its own:

    python examples/word_count_job.py [--records N] [--rate R] [--out DIR]
    barrierflow run examples/word_count_job.py -- --records 100000
    barrierflow chaos examples/word_count_job.py --failures 10 -- --records 60000

Every input word `i` is `word_of(i)`, so every run reads the same input, and for each word
the sink receives one `[word, n]` row per count n = 1, 2, ... (a row per input record).
The rate only paces the run (so that failures injected by `barrierflow chaos` fit in it);
the run without failures that chaos compares with ignores it.
"""

from __future__ import annotations

import argparse

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "honeydew", "kiwi", "lime"]
JOB_NAME = "flagship-word-count"


def word_of(index: int) -> str:
    """Record i of the input: deterministic, so a rewound source reads it again unchanged."""
    return WORDS[(index * 7919 + index // 3) % len(WORDS)]


def build(env: StreamExecutionEnvironment, records: int, rate: float | None, out: str) -> None:
    """Words -> (word, 1) -> keyed running count -> FileSink, with a uid on every stateful step
    so a checkpoint maps back onto the operators."""
    source = DataGeneratorSource(word_of, records, records_per_second=rate)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
        .map(lambda word: (word, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(out))
        .uid("sink")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=2_000.0, help="records per second")
    parser.add_argument("--out", default="work-data/word-count/out", help="the sink's folder")
    args = parser.parse_args()

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)  # ms; exactly-once by default
    build(env, args.records, args.rate, args.out)
    env.execute(JOB_NAME)


if __name__ == "__main__":
    main()
