"""A keyed running count (keyed state) of generated words into a FileSink.

barrierflow chaos keyed_count.py --failures N -- OUT RECORDS RATE
"""

import sys

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]

out, records, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(100)
source = DataGeneratorSource(
    lambda i: WORDS[(i * 31 + i // 5) % len(WORDS)], records, records_per_second=rate
)
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
env.execute("chaos-keyed-count")
