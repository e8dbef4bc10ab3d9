"""Poison input ends, clearly (issue 21, item 7): a record that always fails no longer
restarts the job for good. Real Spark, real files.

- A line a user `map` cannot parse: without dead letters the job fails after the same failure
  3 times in a row from one checkpoint (though its restart strategy would go on), in one line
  naming the error, the file and the offset of the batch; the output committed before is
  intact (a prefix of the input, nothing twice). With `.with_dead_letters()` the job
  finishes: the line is in the dead-letter output once, the rest is the failure-free output,
  also across a restart after the poison line was read.
- A line the FileSource itself cannot decode: without dead letters the same rule ends the job
  with the source's line naming file and offset, instead of looping.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.base import DEAD_LETTERS
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.errors import JobExecutionError

pytestmark = pytest.mark.spark

LINES = 600
SPLIT_AT = 400
"""The first line of `b.txt`."""
POISON_AT = 500
"""The input's line index of the poison line ("oops")."""
RESTART = RestartStrategies.fixed_delay_restart(10, 100)
"""Would restart 10 times: the repeated-failure rule (3) stops the job first."""


def write_input(folder) -> list[str]:
    """Two files, read in turn as one batch each: `a.txt` (a checkpoint completes after it)
    and `b.txt`, with the poison line 100 lines in."""
    lines = [str(n) for n in range(LINES)]
    lines[POISON_AT] = "oops"
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join(lines[:SPLIT_AT]) + "\n")
    (folder / "b.txt").write_text("\n".join(lines[SPLIT_AT:]) + "\n")
    return lines


def slow_parse(line: str) -> int:
    """int(line), slowly enough that checkpoints complete before the poison line."""
    time.sleep(0.004)
    return int(line)


def parse_job(tmp_path, name: str, dead_letters: bool, fail_once_at: int | None = None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / f"chk-{name}"))
    env.set_restart_strategy(RESTART)
    source = FileSource.for_lines(str(tmp_path / "in"))
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
    numbers = lines.map(slow_parse).name("parse")
    if dead_letters:
        numbers = numbers.with_dead_letters()
    out = FileSink.for_rows(str(tmp_path / f"out-{name}"))
    kept = numbers
    if fail_once_at is not None:
        kept = numbers.filter(FailOnce(fail_once_at, str(tmp_path / f"marker-{name}")))
    kept.map(lambda n: {"n": n}).sink_to(out)
    letters = FileSink.for_rows(str(tmp_path / f"dead-{name}"))
    numbers.get_side_output(DEAD_LETTERS).map(lambda letter: letter.as_dict()).sink_to(letters)
    return env, out, letters


class FailOnce:
    """A filter keeping everything that raises once, at `value`, in the first attempt that
    reaches it (a marker file remembers it across attempts)."""

    def __init__(self, value: int, marker: str) -> None:
        self.value, self.marker = value, marker

    def __call__(self, n: int) -> bool:
        if n == self.value:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return True
            raise RuntimeError(f"the injected failure at {n}")
        return True


def test_a_line_a_map_cannot_parse_fails_the_job_after_three_times_naming_its_position(
    spark, tmp_path
):
    write_input(tmp_path / "in")
    env, out, _ = parse_job(tmp_path, "fail", dead_letters=False)
    client = env.execute_async("poison-map")
    with pytest.raises(JobExecutionError) as failure:
        client.wait(timeout=240)
    message = str(failure.value)
    assert "\n" not in message.split("\n\nRemote traceback")[0]
    assert message.startswith(
        "ValueError: invalid literal for int() with base 10: 'oops' (task 'lines -> parse -> "
    )
    size = (tmp_path / "in" / "b.txt").stat().st_size  # the batch: all of b.txt
    assert (
        f"; at source 'lines', split 'b.txt', the batch of {LINES - SPLIT_AT} record(s) read "
        f"up to offset {size}); job 'poison-map' failed and will not restart (the same "
        "failure 3 times in a row from checkpoint "
    ) in message
    assert "route such records to a dead-letter output (`.with_dead_letters()`" in message
    assert client.attempt < 10  # stopped before the strategy would have

    committed = [row["n"] for row in out.committed_output()]
    assert Counter(committed) == Counter(range(SPLIT_AT))  # a.txt, nothing twice


def test_with_dead_letters_the_poison_line_is_a_dead_letter_once_and_the_rest_goes_on(
    spark, tmp_path
):
    lines = write_input(tmp_path / "in")
    env, out, letters = parse_job(tmp_path, "dead", dead_letters=True, fail_once_at=POISON_AT + 50)
    client = env.execute_async("poison-map-dead-letters")
    client.wait(timeout=240)
    assert client.attempt == 1  # the injected failure after the poison line restarted it once

    expected = [int(line) for line in lines if line != "oops"]  # a failure-free run's output
    assert sorted(row["n"] for row in out.committed_output()) == expected
    assert letters.committed_output() == [
        {
            "source": "parse",
            "function": "map",
            "record": "oops",
            "error": "ValueError: invalid literal for int() with base 10: 'oops'",
        }
    ]


def test_a_line_the_source_cannot_decode_fails_the_job_after_three_times_naming_it(spark, tmp_path):
    (tmp_path / "in").mkdir()
    rows = [json.dumps({"n": n}) for n in range(50)]
    rows[30] = '{"n": oops'
    text = "\n".join(rows) + "\n"
    (tmp_path / "in" / "e.jsonl").write_text(text)
    offset = len("\n".join(rows[:30])) + 1
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "chk"))
    env.set_restart_strategy(RESTART)
    source = FileSource.for_json_lines(str(tmp_path / "in"))
    env.from_source(source, WatermarkStrategy.no_watermarks(), "events").sink_to(
        FileSink.for_rows(str(tmp_path / "out"))
    )
    client = env.execute_async("poison-source")
    with pytest.raises(JobExecutionError) as failure:
        client.wait(timeout=240)
    message = str(failure.value)
    assert message.startswith(
        f"SourceError: source 'events': cannot decode the record at byte offset {offset} of "
        "split 'e.jsonl': line 31 of "
    )
    assert "job 'poison-source' failed and will not restart (the same failure 3 times" in message
    assert client.attempt == 2
