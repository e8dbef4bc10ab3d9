"""PyFlink's `session_with_gap_window` example, ported:
elements counted per key in event-time sessions closed by a 5 ms gap.

    python examples/pyflink/windowing/session_with_gap_window.py [--output FOLDER]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from barrierflow import (
    Encoder,
    StreamExecutionEnvironment,
    Time,
    TimestampAssigner,
    Types,
    WatermarkStrategy,
)
from barrierflow.connectors.file_system import FileSink, OutputFileConfig, RollingPolicy
from barrierflow.functions import ProcessWindowFunction
from barrierflow.window import EventTimeSessionWindows, TimeWindow


class SecondField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return int(value[1])


class CountPerWindow(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    """(key, window start, window end, how many elements)."""

    def process(
        self, key: str, context: ProcessWindowFunction.Context[TimeWindow], elements: Iterable
    ) -> Iterable[tuple]:
        window = context.window()
        return [(key, window.start, window.end, sum(1 for _ in elements))]


def main(output_path: str | None = None) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)  # one output file
    greetings = env.from_collection(
        [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 8), ("hi", 9), ("hi", 15)],
        type_info=Types.TUPLE([Types.STRING(), Types.INT()]),
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(SecondField())
    windows = (
        greetings.assign_timestamps_and_watermarks(strategy)
        .key_by(lambda greeting: greeting[0], key_type=Types.STRING())
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(5)))
        .process(
            CountPerWindow(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()])
        )
    )
    sink(windows, output_path)
    env.execute()


def sink(stream, output_path: str | None) -> None:
    """Print the windows, or write them to `output_path` as PyFlink's example does."""
    if output_path is None:
        print("Printing result to stdout. Use --output to specify output path.")
        stream.print()
        return
    config = OutputFileConfig.builder().with_part_prefix("prefix").with_part_suffix(".ext")
    stream.sink_to(
        FileSink.for_row_format(output_path, Encoder.simple_string_encoder())
        .with_output_file_config(config.build())
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", help="a folder to write the windows to")
    main(parser.parse_known_args()[0].output)
