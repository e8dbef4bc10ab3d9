"""`barrierflow state show`: what a checkpoint or savepoint holds, read without Spark.

    barrierflow state show PATH [--uid UID] [--key K] [--sample N]

PATH is a savepoint or `chk-N` folder, or its `_metadata`. Without --key: every
operator (uid, name, parallelism, sizes), its keyed states (kind, key count, a
sample of entries), operator state per subtask (for a user function's operator
list state: each list's mode, element count and a sample; for a broadcast
operator: each broadcast state's entry count, copies and a sample) and timer count. With
--key: that key's value in every keyed state (K is matched as written and, when it
reads as a Python literal such as `7` or `('a', 1)`, as that value). Errors are one
line naming the file, exit status 1.
"""

from __future__ import annotations

import ast
import sys
from typing import NoReturn

import click

from barrierflow.errors import BarrierflowError
from barrierflow.jobs import format_bytes
from barrierflow.state_processor import Snapshot, load

__all__ = ["state"]

_WIDTH = 100


@click.group()
def state() -> None:
    """Read what checkpoints and savepoints hold."""


@state.command()
@click.argument("path")
@click.option("--uid", "uids", multiple=True, help="Only this operator (repeatable).")
@click.option("--key", help="Show this key's values in every keyed state.")
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Entries shown per state.",
)
def show(path: str, uids: tuple[str, ...], key: str | None, sample: int) -> None:
    """Show the operators, states, sizes, key counts and sample entries of PATH."""
    try:
        snapshot = load(path)
        chosen = list(uids) or snapshot.uids()
        for uid in chosen:
            snapshot.operator(uid)  # an unknown uid fails before anything is printed
        lines = _heading(snapshot)
        for uid in chosen:
            if key is None:
                lines += _operator_lines(snapshot, uid, sample)
            else:
                lines += _key_lines(snapshot, uid, key)
    except (BarrierflowError, OSError, KeyError) as error:
        _fail(error)
    click.echo("\n".join(lines))


def _heading(snapshot: Snapshot) -> list[str]:
    what = "savepoint" if snapshot.is_savepoint else "checkpoint"
    return [
        f"{what} {snapshot.checkpoint_id} of job '{snapshot.job_name}' at {snapshot.path}",
        f"max parallelism {snapshot.max_parallelism}, {len(snapshot.uids())} operator(s) "
        "with state",
    ]


def _operator_lines(snapshot: Snapshot, uid: str, sample: int) -> list[str]:
    info = snapshot.operator(uid)
    lines = [
        "",
        f"operator {uid} ({info.name}), parallelism {info.parallelism}",
        f"  keyed {format_bytes(info.keyed_bytes)}, operator {format_bytes(info.operator_bytes)}"
        f", timers {format_bytes(info.timer_bytes)}",
    ]
    for state in info.states:
        entries = list(snapshot.keyed_entries(uid, state.name))
        keys = snapshot.key_count(uid, state.name)
        lines.append(f"  keyed state {state.name!r} ({state.kind}): {keys} key(s)")
        for entry in entries[:sample]:
            if state.kind == "map":
                lines.append(_clip(f"    {entry.key!r} [{entry.user_key!r}] = {entry.value!r}"))
            else:
                lines.append(_clip(f"    {entry.key!r} = {entry.value!r}"))
        if len(entries) > sample:
            lines.append(f"    ... {len(entries) - sample} more")
    for listed in info.list_states:
        lines.append(
            f"  operator list state {listed.name!r} ({listed.mode}): {listed.elements} "
            f"element(s) in {listed.subtasks} subtask(s)"
        )
        entries = list(snapshot.operator_list_entries(uid, listed.name))
        for entry in entries[:sample]:
            lines.append(_clip(f"    subtask {entry.subtask}: {entry.value!r}"))
        if len(entries) > sample:
            lines.append(f"    ... {len(entries) - sample} more")
    for broadcast in info.broadcast_states:
        lines.append(
            f"  broadcast state {broadcast.name!r}: {broadcast.entries} entr"
            f"{'y' if broadcast.entries == 1 else 'ies'}, a copy in each of "
            f"{broadcast.subtasks} subtask(s)"
        )
        entries = list(snapshot.broadcast_entries(uid, broadcast.name))
        for entry in entries[:sample]:
            lines.append(_clip(f"    {entry.key!r} = {entry.value!r}"))
        if len(entries) > sample:
            lines.append(f"    ... {len(entries) - sample} more")
    if not info.list_states and not info.broadcast_states:
        for subtask, value in snapshot.operator_state_entries(uid):
            lines.append(_clip(f"  operator state of subtask {subtask}: {value!r}"))
    timers = list(snapshot.timer_entries(uid))
    if timers:
        event = sum(1 for t in timers if t.domain == "event_time")
        lines.append(f"  timers: {event} event time, {len(timers) - event} processing time")
    return lines


def _key_lines(snapshot: Snapshot, uid: str, key: str) -> list[str]:
    candidates = [key]
    try:
        literal = ast.literal_eval(key)
    except (ValueError, SyntaxError):
        literal = None
    else:
        candidates.append(literal)
    lines = ["", f"operator {uid} ({snapshot.operator(uid).name})"]
    found = False
    for candidate in candidates:
        for name, value in snapshot.values_of_key(uid, candidate).items():
            found = True
            lines.append(_clip(f"  {name!r} [{candidate!r}] = {value!r}"))
    if not found:
        lines.append(f"  no state for key {key!r}")
    return lines


def _clip(line: str) -> str:
    return line if len(line) <= _WIDTH else line[: _WIDTH - 3] + "..."


def _fail(error: BaseException) -> NoReturn:
    message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
    click.echo(f"error: {message}", err=True)
    sys.exit(1)
