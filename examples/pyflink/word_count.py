"""PyFlink's `word_count` example, ported: words of a text counted in BATCH mode (one final
count per word), from a built-in text or `--input` files, printed or written to `--output`.

    python examples/pyflink/word_count.py [--input FILE] [--output FOLDER]
"""

from __future__ import annotations

import argparse

from barrierflow import (
    Encoder,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
    Types,
    WatermarkStrategy,
)
from barrierflow.connectors.file_system import (
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)

HAMLET = [  # the same lines PyFlink's example counts
    "To be, or not to be,--that is the question:--",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune",
    "Or to take arms against a sea of troubles,",
    "And by opposing end them?--To die,--to sleep,--",
    "No more; and by a sleep to say we end",
    "The heartache, and the thousand natural shocks",
    "That flesh is heir to,--'tis a consummation",
    "Devoutly to be wish'd. To die,--to sleep;--",
    "To sleep! perchance to dream:--ay, there's the rub;",
    "For in that sleep of death what dreams may come,",
    "When we have shuffled off this mortal coil,",
    "Must give us pause: there's the respect",
    "That makes calamity of so long life;",
    "For who would bear the whips and scorns of time,",
    "The oppressor's wrong, the proud man's contumely,",
    "The pangs of despis'd love, the law's delay,",
    "The insolence of office, and the spurns",
    "That patient merit of the unworthy takes,",
    "When he himself might his quietus make",
    "With a bare bodkin? who would these fardels bear,",
    "To grunt and sweat under a weary life,",
    "But that the dread of something after death,--",
    "The undiscover'd country, from whose bourn",
    "No traveller returns,--puzzles the will,",
    "And makes us rather bear those ills we have",
    "Than fly to others that we know not of?",
    "Thus conscience does make cowards of us all;",
    "And thus the native hue of resolution",
    "Is sicklied o'er with the pale cast of thought;",
    "And enterprises of great pith and moment,",
    "With this regard, their currents turn awry,",
    "And lose the name of action.--Soft you now!",
    "The fair Ophelia!--Nymph, in thy orisons",
    "Be all my sins remember'd.",
]


def words(line: str):
    yield from line.split()


def main(input_path: str | None = None, output_path: str | None = None) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(1)  # one output file
    if input_path is None:
        print("Executing word_count example with default input data set.")
        print("Use --input to specify file input.")
        lines = env.from_collection(HAMLET)
    else:
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), input_path)
        lines = env.from_source(
            source.process_static_file_set().build(),
            WatermarkStrategy.for_monotonous_timestamps(),
            "file_source",
        )
    counts = (
        lines.flat_map(words)
        .map(lambda word: (word, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    if output_path is None:
        print("Printing result to stdout. Use --output to specify output path.")
        counts.print()
    else:
        config = OutputFileConfig.builder().with_part_prefix("prefix").with_part_suffix(".ext")
        counts.sink_to(
            FileSink.for_row_format(output_path, Encoder.simple_string_encoder())
            .with_output_file_config(config.build())
            .with_rolling_policy(RollingPolicy.default_rolling_policy())
            .build()
        )
    env.execute()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", help="a text file to count the words of")
    parser.add_argument("--output", help="a folder to write the counts to")
    arguments, _ = parser.parse_known_args()
    main(arguments.input, arguments.output)
