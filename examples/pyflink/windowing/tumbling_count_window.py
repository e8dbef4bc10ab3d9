"""PyFlink's `tumbling_count_window` example, ported:
values summed per key over every two elements of the key
(tumbling count windows).

    python examples/pyflink/windowing/tumbling_count_window.py [--output FOLDER]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from barrierflow import Encoder, StreamExecutionEnvironment, Types
from barrierflow.connectors.file_system import FileSink, OutputFileConfig, RollingPolicy
from barrierflow.functions import WindowFunction
from barrierflow.window import CountWindow


class SumOfFirstFields(WindowFunction[tuple, tuple, str, CountWindow]):
    def apply(self, key: str, window: CountWindow, inputs: Iterable[tuple]):
        return [(key, sum(value for value, _ in inputs))]


def main(output_path: str | None = None) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)  # one output file
    greetings = env.from_collection(
        [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")],
        type_info=Types.TUPLE([Types.INT(), Types.STRING()]),
    )
    sums = (
        greetings.key_by(lambda greeting: greeting[1], key_type=Types.STRING())
        .count_window(2)
        .apply(SumOfFirstFields(), Types.TUPLE([Types.STRING(), Types.INT()]))
    )
    sink(sums, output_path)
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
