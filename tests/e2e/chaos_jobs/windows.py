"""Tumbling and sliding event-time windows per key over generated events into FileSinks.

barrierflow chaos windows.py --failures N -- OUT RECORDS RATE
"""

import sys

from barrierflow import Duration, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.functions import ProcessWindowFunction
from barrierflow.window import SlidingEventTimeWindows, TumblingEventTimeWindows


class CountAndSum(ProcessWindowFunction):
    def process(self, key, context, elements):
        values = [e["v"] for e in elements]
        yield (key, context.window().start, len(values), sum(values))


def event(i):
    """Event i: time i * 5 ms, a key of five, a value; in order within each split."""
    return {"key": f"k{(i * 7) % 5}", "ts": i * 5, "v": (i * 13) % 101}


out, records, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(100)
env.get_config().set_auto_watermark_interval(50)
strategy = WatermarkStrategy.for_bounded_out_of_orderness(
    Duration.of_millis(200)
).with_timestamp_assigner(lambda e, ts: e["ts"])
keyed = env.from_source(
    DataGeneratorSource(event, records, records_per_second=rate), strategy, "events"
).key_by(lambda e: e["key"])
(
    keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    .process(CountAndSum())
    .uid("tumbling")
    .sink_to(FileSink.for_rows(out + "/tumbling"))
    .uid("tumbling-sink")
)
(
    keyed.window(SlidingEventTimeWindows.of(Duration.of_millis(2000), 500))
    .process(CountAndSum())
    .uid("sliding")
    .sink_to(FileSink.for_rows(out + "/sliding"))
    .uid("sliding-sink")
)
env.execute("chaos-windows")
