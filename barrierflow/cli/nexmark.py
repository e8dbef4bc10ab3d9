"""`barrierflow nexmark`: the Nexmark benchmark's commands.

    barrierflow nexmark generate --events N --out PATH [--seed S] [--rate R]
                                 [--out-of-order-group-size K]

    barrierflow nexmark run --query qN (--events N | --input PATH) [--parallelism P]
                            [--checkpoint-interval MS] [--state-backend hashmap|rocksdb]
                            [--changelog]
                            [--output DIR] [--rate R] [--json]

`generate` writes generator events `0 .. N - 1` to PATH in flink-nexmark's table shape
(Parquet if PATH ends in `.parquet`, else JSON Lines) and prints one line: how many events,
where, how big, how long. `run` runs one query on Spark (`nexmark.runner`) and prints its
figures: events/s, checkpoint durations and sizes and, paced with `--rate`, end-to-end
latency percentiles (as one JSON object with `--json`). Errors are one line, exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import NoReturn

import click
import pyarrow.fs as pafs

from barrierflow.errors import BarrierflowError
from barrierflow.jobs import format_bytes
from barrierflow.nexmark.events_file import write_events
from barrierflow.nexmark.generator import GeneratorConfig
from barrierflow.nexmark.queries import EXTRA_QUERY_NAMES, QUERY_NAMES
from barrierflow.nexmark.runner import STATE_BACKENDS, RunSettings
from barrierflow.nexmark.runner import run as run_query

__all__ = ["nexmark"]


@click.group()
def nexmark() -> None:
    """The Nexmark benchmark: generate its events, run its queries."""


@nexmark.command()
@click.option(
    "--events", "count", type=click.IntRange(min=0), required=True, help="How many events."
)
@click.option(
    "--out",
    "path",
    required=True,
    help="The file to write: Parquet if it ends in .parquet, else JSON Lines.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The generator's seed.")
@click.option(
    "--rate",
    type=click.IntRange(min=1),
    default=GeneratorConfig.first_event_rate,
    show_default=True,
    help="Events per second of event time (flink-nexmark's first event rate).",
)
@click.option(
    "--out-of-order-group-size",
    "group_size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Shuffle events within groups of this many (1: in order).",
)
def generate(count: int, path: str, seed: int, rate: int, group_size: int) -> None:
    """Write Nexmark events to a file, in flink-nexmark's table shape."""
    started = time.monotonic()
    try:
        config = GeneratorConfig(
            seed=seed, first_event_rate=rate, out_of_order_group_size=group_size
        )
        written = write_events(path, config, count)
        size = _file_size(path)
    except (BarrierflowError, OSError) as error:
        _fail(error)
    seconds = time.monotonic() - started
    click.echo(f"wrote {written:,} events to {path} ({format_bytes(size)}) in {seconds:.1f} s")


def _file_size(path: str) -> int:
    """The size of the file written at `path`, a local path or a URI pyarrow reads."""
    uri = path if "://" in path else os.path.abspath(os.path.expanduser(path))
    filesystem, inner = pafs.FileSystem.from_uri(uri)
    return filesystem.get_file_info(inner).size


@nexmark.command(context_settings={"max_content_width": 100})
@click.option("--query", "name", type=click.Choice(QUERY_NAMES + EXTRA_QUERY_NAMES), required=True)
@click.option("--events", "count", type=click.IntRange(min=1), help="Generate this many events.")
@click.option("--input", "input_path", help="Read the events of this file (JSON Lines or Parquet).")
@click.option("--parallelism", "-p", type=click.IntRange(min=1), default=2, show_default=True)
@click.option(
    "--checkpoint-interval",
    "interval",
    type=click.IntRange(min=10),
    help="Exactly-once checkpoints every MS milliseconds (default: none).",
)
@click.option("--output", help="Write the results to this folder as JSON Lines part files.")
@click.option("--seed", type=int, default=0, show_default=True, help="The generator's seed.")
@click.option(
    "--rate",
    type=click.IntRange(min=1),
    help="Pace the generator at this many events/s and measure latency (default: as fast "
    "as the job goes).",
)
@click.option("--checkpoint-dir", help="Checkpoint folder (default: a temporary one).")
@click.option(
    "--state-backend",
    type=click.Choice(sorted(STATE_BACKENDS)),
    default="hashmap",
    show_default=True,
    help="Where keyed state lives: Python dicts, or an embedded RocksDB per subtask.",
)
@click.option(
    "--changelog",
    is_flag=True,
    help="hashmap: changelog checkpoints (each writes what changed since the last one).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
def run(
    name: str,
    count: int | None,
    input_path: str | None,
    parallelism: int,
    interval: int | None,
    output: str | None,
    seed: int,
    rate: int | None,
    checkpoint_dir: str | None,
    state_backend: str,
    changelog: bool,
    as_json: bool,
) -> None:
    """Run one Nexmark query to the end of its events and print its figures."""
    try:
        settings = RunSettings(
            name,
            events=count,
            input_path=input_path,
            parallelism=parallelism,
            checkpoint_interval_ms=interval,
            output=output,
            seed=seed,
            events_per_second=rate,
            checkpoint_dir=checkpoint_dir,
            state_backend=state_backend,
            changelog=changelog,
        )
        report = run_query(settings)
    except BarrierflowError as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps(report.as_json()))
    else:
        for line in report.lines():
            click.echo(line)


def _fail(error: BaseException) -> NoReturn:
    click.echo(f"error: {error}", err=True)
    sys.exit(1)
