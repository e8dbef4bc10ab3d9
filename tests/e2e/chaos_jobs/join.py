"""An interval join of generated orders and clicks per user into a FileSink.

barrierflow chaos join.py --failures N -- OUT RECORDS RATE
"""

import sys

from barrierflow import Duration, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.functions import ProcessJoinFunction


class OrderAndClick(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield (left["id"], right["id"], ctx.get_timestamp())


def order(i):
    return {"id": f"o{i}", "user": i % 40, "ts": i * 10}


def click(i):
    return {"id": f"c{i}", "user": (i * 3) % 40, "ts": i * 10 + 3}


out, records, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(100)
env.get_config().set_auto_watermark_interval(50)
strategy = WatermarkStrategy.for_bounded_out_of_orderness(
    Duration.of_millis(200)
).with_timestamp_assigner(lambda e, ts: e["ts"])
orders = env.from_source(
    DataGeneratorSource(order, records, records_per_second=rate), strategy, "orders"
)
clicks = env.from_source(
    DataGeneratorSource(click, records, records_per_second=rate), strategy, "clicks"
)
(
    orders.key_by(lambda o: o["user"])
    .interval_join(clicks.key_by(lambda c: c["user"]))
    .between(-300, 300)
    .process(OrderAndClick())
    .uid("interval-join")
    .sink_to(FileSink.for_rows(out))
    .uid("join-sink")
)
env.execute("chaos-join")
