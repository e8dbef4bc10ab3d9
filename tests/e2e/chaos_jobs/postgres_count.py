"""A keyed running count of generated words, every count inserted into a PostgreSQL table.

barrierflow chaos postgres_count.py --failures N -- DSN TABLE RECORDS RATE

Each run of the check writes its own copy of TABLE (`TABLE__reference`, `TABLE__chaos`);
insert mode (no key columns), so a row written twice shows as a duplicate.
"""

import sys

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.postgres import PostgresSink

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]

dsn, table, records, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
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
    .map(lambda pair: {"word": pair[0], "n": pair[1]})
    .uid("row")
    .sink_to(PostgresSink.builder().set_dsn(dsn).set_table(table).build())
    .uid("sink")
)
env.execute("chaos-postgres-count")
