"""Scenario tables for barrier handlers (Flink's `CheckpointSequenceValidator`, as data).

A scenario is a list of steps played against a fresh handler, in order:

- events: `barrier(1, ch=0)`, `cancel(2, ch=1)`, `end(ch=0)`;
- checks of the handler's state at that point: `blocked(0, 2)`, `aligning(1)`,
  `pending(1, 2)`, `open_channels(1)`;
- `raises(event, match)`: the event must raise `StreamCorruptionError`.

and the decisions the whole play must produce, written compactly: `[1, -2, 3]` means
"trigger 1, abort 2, trigger 3" and nothing else. `aborts` names the reason of every abort.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest
from hypothesis import strategies as st

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.barriers.decisions import AbortCheckpoint, Decision, TriggerCheckpoint
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier

SUBSUMED = CheckpointFailureReason.CHECKPOINT_SUBSUMED
CANCELLED = CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER
INPUT_ENDED = CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM


class BarrierHandler(Protocol):
    """What the task calls on a `CheckpointBarrierAligner` or a `CheckpointBarrierTracker`."""

    def is_blocked(self, channel: int) -> bool: ...
    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> tuple[Decision, ...]: ...
    def on_cancel_marker(
        self, channel: int, marker: CancelCheckpointMarker
    ) -> tuple[Decision, ...]: ...
    def on_end_of_partition(self, channel: int) -> tuple[Decision, ...]: ...


def timestamp_of(checkpoint_id: int) -> int:
    """The trigger timestamp every barrier of a checkpoint carries in these tables."""
    return 1_000 * checkpoint_id


# ---- events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One element a channel delivers to the handler."""

    text: str
    deliver: Callable[[BarrierHandler], tuple[Decision, ...]]

    def __repr__(self) -> str:
        return self.text


def barrier(checkpoint_id: int, *, ch: int) -> Event:
    element = CheckpointBarrier(checkpoint_id, timestamp_of(checkpoint_id))
    return Event(f"barrier({checkpoint_id}, ch={ch})", lambda h: h.on_barrier(ch, element))


def cancel(checkpoint_id: int, *, ch: int) -> Event:
    element = CancelCheckpointMarker(checkpoint_id)
    return Event(f"cancel({checkpoint_id}, ch={ch})", lambda h: h.on_cancel_marker(ch, element))


def end(*, ch: int) -> Event:
    return Event(f"end(ch={ch})", lambda h: h.on_end_of_partition(ch))


@dataclass(frozen=True)
class Raises:
    """An event that must raise `StreamCorruptionError` with a message matching `match`."""

    event: Event
    match: str


def raises(event: Event, match: str) -> Raises:
    return Raises(event, match)


# ---- checks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """An assertion about the handler's state between two events."""

    text: str
    actual: Callable[[BarrierHandler, int], Any]
    expected: Any

    def __repr__(self) -> str:
        return self.text


def blocked(*channels: int) -> Check:
    """Exactly these channels are blocked (checked through `is_blocked`, and
    `blocked_channels` where the handler has it)."""

    def actual(handler: BarrierHandler, channel_count: int) -> Any:
        polled = frozenset(c for c in range(channel_count) if handler.is_blocked(c))
        return polled, getattr(handler, "blocked_channels", polled)

    return Check(f"blocked{channels}", actual, (frozenset(channels), frozenset(channels)))


def aligning(checkpoint_id: int | None) -> Check:
    return Check(f"aligning({checkpoint_id})", lambda h, _: h.current_checkpoint_id, checkpoint_id)


def latest(checkpoint_id: int | None) -> Check:
    return Check(f"latest({checkpoint_id})", lambda h, _: h.latest_checkpoint_id, checkpoint_id)


def pending(*checkpoint_ids: int) -> Check:
    return Check(f"pending{checkpoint_ids}", lambda h, _: h.pending_checkpoint_ids, checkpoint_ids)


def open_channels(count: int) -> Check:
    return Check(f"open_channels({count})", lambda h, _: h.open_channel_count, count)


# ---- scenarios ---------------------------------------------------------------------------------

Step = Event | Check | Raises


@dataclass(frozen=True)
class Scenario:
    """A table row: the steps to play and the decisions they must produce, in order."""

    name: str
    channels: int
    steps: Sequence[Step]
    decisions: Sequence[int]
    """Positive: triggered; negative: aborted."""
    aborts: dict[int, CheckpointFailureReason] = field(default_factory=dict)
    """The reason of every aborted checkpoint."""

    def param(self) -> Any:
        return pytest.param(self, id=self.name)


def signed_id(decision: Decision) -> int:
    if isinstance(decision, TriggerCheckpoint):
        return decision.checkpoint_id
    assert isinstance(decision, AbortCheckpoint), decision
    return -decision.checkpoint_id


def play(handler: BarrierHandler, scenario: Scenario) -> list[Decision]:
    """Play every step, check every check, then check the decisions; returns the decisions."""
    decisions: list[Decision] = []
    for number, step in enumerate(scenario.steps, start=1):
        where = f"step {number}: {step!r}"
        if isinstance(step, Check):
            actual = step.actual(handler, scenario.channels)
            assert actual == step.expected, f"{where} found {actual!r}"
        elif isinstance(step, Raises):
            with pytest.raises(StreamCorruptionError, match=step.match):
                step.event.deliver(handler)
        else:
            answer = step.deliver(handler)
            assert isinstance(answer, tuple), f"{where} answered {answer!r}, not a tuple"
            decisions.extend(answer)
    assert [signed_id(d) for d in decisions] == list(scenario.decisions)
    reasons = {d.checkpoint_id: d.reason for d in decisions if isinstance(d, AbortCheckpoint)}
    assert reasons == scenario.aborts
    for decision in decisions:
        if isinstance(decision, TriggerCheckpoint):
            n = decision.checkpoint_id
            assert decision.barrier == CheckpointBarrier(n, timestamp_of(n))
    return decisions


# ---- random streams (for the property tests) ---------------------------------------------------

Element = tuple[str, int]
"""An element of a random stream: ("barrier", n), ("cancel", n), ("end", 0) or ("record", 0)."""


@st.composite
def channel_streams(
    draw: st.DrawFn, *, records: bool = False, always_end: bool = False
) -> list[list[Element]]:
    """One stream per channel: each delivers some of the ids 1..k, increasing, as barriers
    (mostly) or cancellation markers, with records in between if asked, and maybe an end."""
    last_id = draw(st.integers(1, 6))
    streams = []
    for _ in range(draw(st.integers(1, 4))):
        stream: list[Element] = []
        for checkpoint_id in sorted(draw(st.sets(st.integers(1, last_id)))):
            stream += [("record", 0)] * (draw(st.integers(0, 2)) if records else 0)
            kind = draw(st.sampled_from(["barrier", "barrier", "barrier", "cancel"]))
            stream.append((kind, checkpoint_id))
        stream += [("record", 0)] * (draw(st.integers(0, 2)) if records else 0)
        if always_end or draw(st.booleans()):
            stream.append(("end", 0))
        streams.append(stream)
    return streams


def interleaving(streams: list[list[Element]]) -> st.SearchStrategy[list[int]]:
    """The channels in the order they deliver: any order that keeps each channel's own order."""
    return st.permutations([channel for channel, stream in enumerate(streams) for _ in stream])


def deliver(handler: BarrierHandler, channel: int, element: Element) -> tuple[Decision, ...]:
    kind, checkpoint_id = element
    if kind == "barrier":
        return handler.on_barrier(channel, CheckpointBarrier(checkpoint_id, 0))
    if kind == "cancel":
        return handler.on_cancel_marker(channel, CancelCheckpointMarker(checkpoint_id))
    assert kind == "end", element
    return handler.on_end_of_partition(channel)
