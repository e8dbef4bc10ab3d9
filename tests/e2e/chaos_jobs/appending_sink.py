"""Exactly-once broken on purpose: a sink that appends every record as it comes, outside
any checkpoint, so records replayed after a failure are committed twice.

    barrierflow chaos appending_sink.py --failures N -- OUT RECORDS RATE
"""

import json
import os
import sys

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.base import Sink, SinkWriter
from barrierflow.connectors.datagen import DataGeneratorSource


class AppendingWriter(SinkWriter):
    def __init__(self, folder, name):
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, name)

    def write_batch(self, records):
        with open(self.path, "a") as file:
            file.writelines(json.dumps(r) + "\n" for r in records)

    def pre_commit(self, checkpoint_id):
        pass

    def snapshot_state(self):
        return None

    def commit(self, checkpoint_id):
        pass

    def restore(self, states):
        pass


class AppendingSink(Sink):
    def __init__(self, path):
        self.folder = Sink.output_location(path)

    def create_writer(self, context):
        return AppendingWriter(self.folder, f"part-{context.subtask_index}-{context.deployment_id}")

    def committed_output(self):
        if not os.path.isdir(self.folder):
            return []
        return [
            json.loads(line)
            for name in sorted(os.listdir(self.folder))
            for line in open(os.path.join(self.folder, name))
        ]


out, records, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(100)
source = DataGeneratorSource(lambda i: i, records, records_per_second=rate)
(
    env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    .map(lambda i: i * 2)
    .sink_to(AppendingSink(out))
    .uid("appending-sink")
)
env.execute("chaos-appending-sink")
