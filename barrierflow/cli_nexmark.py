"""`barrierflow nexmark`: the Nexmark benchmark's commands.

    barrierflow nexmark generate --events N --out PATH [--seed S] [--rate R]
                                 [--out-of-order-group-size K]

`generate` writes generator events `0 .. N - 1` to PATH in flink-nexmark's table shape
(Parquet if PATH ends in `.parquet`, else JSON Lines) and prints one line: how many events,
where, how big, how long. Errors are one line, exit status 1.
"""

from __future__ import annotations

import sys
import time
from typing import NoReturn

import click

from barrierflow import _fs
from barrierflow._bytes import format_bytes
from barrierflow.errors import BarrierflowError
from barrierflow.nexmark.events_file import write_events
from barrierflow.nexmark.generator import GeneratorConfig

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
        size = _fs.file_size(_fs.location(path))
    except (BarrierflowError, OSError) as error:
        _fail(error)
    seconds = time.monotonic() - started
    click.echo(f"wrote {written:,} events to {path} ({format_bytes(size)}) in {seconds:.1f} s")


def _fail(error: BaseException) -> NoReturn:
    click.echo(f"error: {error}", err=True)
    sys.exit(1)
