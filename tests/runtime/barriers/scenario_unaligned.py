"""Scenario tables and a model task for `CheckpointBarrierUnaligner` (no tests in here).

The tables in test_unaligned.py and test_alternating.py use these steps, played in order
against a fresh handler:

- events: `arrive(1, ch=0)` (the barrier's frame arrives: `on_barrier_announced`),
  `poll(1, ch=0)` (the task polls it: `on_barrier`), `barrier(1, ch=0)` (both at once, for a
  channel with nothing queued), `timeout(1)` (`on_alignment_timeout`), and `cancel`/`end` from
  scenario.py; `savepoint=True` makes a savepoint's barrier, `now=` passes `now_ms`;
- checks: `blocked(...)` (scenario.py), `persisting(...)`, `phase(...)`, `current(n)`,
  `latest(n)`, `open_channels(n)`; `raises(event, match)` for corruption;

and the decisions, written as the values the handler must answer, in order: `trigger(1)`,
`unaligned(1, {0, 2})`, `stop(0, 1)`, `complete(1)`, `arm(1, 100)`, `subsumed(1)`,
`cancelled(1)`, `input_ended(1)`.

`ModelTask` wires a handler into a model input gate the way the stream task must (arrival,
poll, decisions, channel state), so the property tests check the recorded channel state itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import strategies as st
from scenario import Check, Event, Raises, channel_streams, timestamp_of

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.barriers.decisions import (
    AbortCheckpoint,
    ArmAlignmentTimer,
    ChannelStateComplete,
    Decision,
    StopPersisting,
    TriggerCheckpoint,
    TriggerUnaligned,
)
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner, Phase
from barrierflow.runtime.channel_state import (
    ChannelStateWriter,
    in_flight_input,
    read_channel_state,
)
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier
from barrierflow.runtime.network import codec

# ---- barriers ----------------------------------------------------------------------------------


def barrier_of(checkpoint_id: int, *, savepoint: bool = False) -> CheckpointBarrier:
    return CheckpointBarrier(checkpoint_id, timestamp_of(checkpoint_id), is_savepoint=savepoint)


# ---- events ------------------------------------------------------------------------------------


def _name(kind: str, checkpoint_id: int, ch: int, savepoint: bool, now: int | None) -> str:
    extra = (", savepoint" if savepoint else "") + ("" if now is None else f", now={now}")
    return f"{kind}({checkpoint_id}, ch={ch}{extra})"


def arrive(
    checkpoint_id: int, *, ch: int, savepoint: bool = False, now: int | None = None
) -> Event:
    element = barrier_of(checkpoint_id, savepoint=savepoint)
    return Event(
        _name("arrive", checkpoint_id, ch, savepoint, now),
        lambda h: h.on_barrier_announced(ch, element, now),
    )


def poll(checkpoint_id: int, *, ch: int, savepoint: bool = False) -> Event:
    element = barrier_of(checkpoint_id, savepoint=savepoint)
    return Event(
        _name("poll", checkpoint_id, ch, savepoint, None), lambda h: h.on_barrier(ch, element)
    )


def barrier(checkpoint_id: int, *, ch: int, savepoint: bool = False) -> Event:
    element = barrier_of(checkpoint_id, savepoint=savepoint)
    return Event(
        _name("barrier", checkpoint_id, ch, savepoint, None),
        lambda h: h.on_barrier_announced(ch, element) + h.on_barrier(ch, element),
    )


def timeout(checkpoint_id: int) -> Event:
    return Event(f"timeout({checkpoint_id})", lambda h: h.on_alignment_timeout(checkpoint_id))


def raises(event: Event, match: str) -> Raises:
    return Raises(event, match)


# ---- checks ------------------------------------------------------------------------------------


def persisting(*channels: int) -> Check:
    """Exactly these channels persist (through `is_persisting` and `persisting_channels`)."""

    def actual(handler: Any, channel_count: int) -> Any:
        polled = frozenset(c for c in range(channel_count) if handler.is_persisting(c))
        return polled, handler.persisting_channels

    return Check(f"persisting{channels}", actual, (frozenset(channels), frozenset(channels)))


def phase(expected: Phase | None) -> Check:
    return Check(f"phase({expected})", lambda h, _: h.current_phase, expected)


def current(checkpoint_id: int | None) -> Check:
    return Check(f"current({checkpoint_id})", lambda h, _: h.current_checkpoint_id, checkpoint_id)


# ---- decisions ---------------------------------------------------------------------------------


def trigger(checkpoint_id: int, *, savepoint: bool = False) -> Decision:
    return TriggerCheckpoint(barrier_of(checkpoint_id, savepoint=savepoint))


def unaligned(checkpoint_id: int, channels: set[int] | frozenset[int]) -> Decision:
    return TriggerUnaligned(barrier_of(checkpoint_id), frozenset(channels))


def stop(channel: int, checkpoint_id: int) -> Decision:
    return StopPersisting(channel, checkpoint_id)


def complete(checkpoint_id: int) -> Decision:
    return ChannelStateComplete(checkpoint_id)


def arm(checkpoint_id: int, delay_ms: int) -> Decision:
    return ArmAlignmentTimer(checkpoint_id, delay_ms)


subsumed = AbortCheckpoint.subsumed
cancelled = AbortCheckpoint.on_cancellation_barrier
input_ended = AbortCheckpoint.input_ended


# ---- scenarios ---------------------------------------------------------------------------------

Step = Event | Check | Raises


@dataclass(frozen=True)
class Scenario:
    """A table row: the steps to play and every decision they must produce, in order."""

    name: str
    channels: int
    steps: Sequence[Step]
    decisions: Sequence[Decision]

    def param(self) -> Any:
        return pytest.param(self, id=self.name)


def play(handler: CheckpointBarrierUnaligner, scenario: Scenario) -> list[Decision]:
    """Play every step, check every check, then compare the decisions; returns them."""
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
    assert decisions == list(scenario.decisions)
    return decisions


# ---- a model task ------------------------------------------------------------------------------


def data_frame(channel: int, number: int) -> bytes:
    """A record frame that names its channel and position; never unpickled by anyone."""
    return codec.DATA + f"{channel}:{number}".encode()


def number_of(frame: bytes) -> int:
    return int(frame[1:].decode().split(":")[1])


@dataclass
class Outcome:
    """What the model task did with one checkpoint."""

    snapshot: list[list[int]] | None = None
    """Per channel, the numbers of the records polled before the snapshot."""
    unaligned_channels: frozenset[int] | None = None
    """TriggerUnaligned's channels (None when the checkpoint was taken aligned)."""
    stopped: list[int] | None = None
    """The channels of every StopPersisting, in order."""
    channel_state: dict[int, list[bytes]] | None = None
    """The input channel state read back from the finished file (None when aligned)."""
    completed: bool = False
    aborted: bool = False


class ModelTask:
    """A stream task reduced to its input gate and the barrier-handler wiring.

    The wiring is the one the real task must follow:

    - a frame arrives: the gate queues it; a barrier is then announced to the handler; a stream
      frame is added to the channel state when the handler says its channel `is_persisting`;
    - the task polls only unblocked channels, in channel order, and hands barriers, markers and
      ends to the handler;
    - `TriggerUnaligned`: snapshot, start the channel state, add each listed channel's queue
      up to its barrier (`in_flight_input`); `ChannelStateComplete`: finish it; abort: drop it.
    """

    def __init__(self, handler: CheckpointBarrierUnaligner, channel_count: int) -> None:
        self.handler = handler
        self.channel_count = channel_count
        self.queues: list[deque[tuple[Any, bytes]]] = [deque() for _ in range(channel_count)]
        self.polled: list[list[int]] = [[] for _ in range(channel_count)]
        self.writer = ChannelStateWriter(channel_count, 0)
        self.outcomes: dict[int, Outcome] = {}
        self.armed: list[int] = []
        self.polled_barriers: list[set[int]] = [set() for _ in range(channel_count)]
        self.ended = [False] * channel_count

    # ---- what happens to the task ----

    def arrive(self, channel: int, element: Any, now_ms: int | None = None) -> None:
        frame = self._frame(channel, element)
        self.queues[channel].append((element, frame))
        if isinstance(element, CheckpointBarrier):
            self.act(self.handler.on_barrier_announced(channel, element, now_ms))
        elif isinstance(element, int) and self.handler.is_persisting(channel):
            checkpoint_id = self.handler.current_checkpoint_id
            assert checkpoint_id is not None
            self.writer.add_input(checkpoint_id, channel, [frame])

    def ready_channels(self) -> list[int]:
        return [
            c for c, queue in enumerate(self.queues) if queue and not self.handler.is_blocked(c)
        ]

    def poll(self, channel: int) -> None:
        assert not self.handler.is_blocked(channel)
        element, _ = self.queues[channel].popleft()
        if isinstance(element, int):
            self.polled[channel].append(element)
        elif isinstance(element, CheckpointBarrier):
            self.polled_barriers[channel].add(element.checkpoint_id)
            self.act(self.handler.on_barrier(channel, element))
        elif isinstance(element, CancelCheckpointMarker):
            self.act(self.handler.on_cancel_marker(channel, element))
        else:
            self.ended[channel] = True
            self.act(self.handler.on_end_of_partition(channel))

    def fire(self, checkpoint_id: int) -> tuple[Decision, ...]:
        self.armed.remove(checkpoint_id)
        decisions = self.handler.on_alignment_timeout(checkpoint_id)
        self.act(decisions)
        return decisions

    # ---- what the task does ----

    def act(self, decisions: tuple[Decision, ...]) -> None:
        for decision in decisions:
            if isinstance(decision, ArmAlignmentTimer):
                assert decision.delay_ms >= 1
                self.armed.append(decision.checkpoint_id)
                continue
            outcome = self.outcomes.setdefault(decision.checkpoint_id, Outcome())
            assert not outcome.completed and not outcome.aborted, (decision, outcome)
            if isinstance(decision, TriggerCheckpoint):
                assert outcome.snapshot is None
                outcome.snapshot = [list(numbers) for numbers in self.polled]
                outcome.completed = True
            elif isinstance(decision, TriggerUnaligned):
                assert outcome.snapshot is None
                n = decision.checkpoint_id
                # exactly the open channels that have not polled the barrier yet
                assert decision.channels == {
                    c
                    for c in range(self.channel_count)
                    if not self.ended[c] and n not in self.polled_barriers[c]
                }, decision
                outcome.snapshot = [list(numbers) for numbers in self.polled]
                outcome.unaligned_channels = decision.channels
                outcome.stopped = []
                self.writer.start(n)
                for channel in sorted(decision.channels):
                    queued = [frame for _, frame in self.queues[channel]]
                    self.writer.add_input(n, channel, in_flight_input(queued, n))
            elif isinstance(decision, StopPersisting):
                assert outcome.stopped is not None and outcome.unaligned_channels is not None
                assert decision.channel in outcome.unaligned_channels, decision
                assert decision.channel not in outcome.stopped, decision
                assert not self.handler.is_persisting(decision.channel)
                outcome.stopped.append(decision.channel)
            elif isinstance(decision, ChannelStateComplete):
                assert outcome.unaligned_channels is not None
                finished = self.writer.finish(decision.checkpoint_id)
                recovered = read_channel_state(
                    finished.data, input_channels=self.channel_count, output_channels=0
                )
                assert finished.persisted_bytes == sum(
                    len(frame) for frames in recovered.inputs.values() for frame in frames
                )
                outcome.channel_state = recovered.inputs
                outcome.completed = True
            else:
                assert isinstance(decision, AbortCheckpoint), decision
                self.writer.abort(decision.checkpoint_id)
                outcome.aborted = True

    def _frame(self, channel: int, element: Any) -> bytes:
        if isinstance(element, int):
            return data_frame(channel, element)
        if isinstance(element, CheckpointBarrier):
            return codec.encode_event(CheckpointBarrier(element.checkpoint_id, element.timestamp))
        if isinstance(element, CancelCheckpointMarker):
            return codec.encode_event(element)
        return codec.END


# ---- random runs -------------------------------------------------------------------------------


@st.composite
def numbered_streams(draw: st.DrawFn) -> tuple[list[list[Any]], frozenset[int]]:
    """One stream per channel (records numbered per channel, barriers, markers, an end), and
    the checkpoint ids that are savepoints."""
    raw = draw(channel_streams(records=True, always_end=True))
    ids = {n for stream in raw for kind, n in stream if kind in ("barrier", "cancel")}
    savepoints = frozenset(draw(st.sets(st.sampled_from(sorted(ids)))) if ids else ())
    streams: list[list[Any]] = []
    for stream in raw:
        elements: list[Any] = []
        for kind, n in stream:
            if kind == "record":
                elements.append(sum(isinstance(e, int) for e in elements))
            elif kind == "barrier":
                elements.append(barrier_of(n, savepoint=n in savepoints))
            elif kind == "cancel":
                elements.append(CancelCheckpointMarker(n))
            else:
                elements.append("end")
        streams.append(elements)
    return streams, savepoints


def run(
    data: st.DataObject,
    handler: CheckpointBarrierUnaligner,
    streams: list[list[Any]],
    *,
    with_clock: bool = False,
) -> ModelTask:
    """Deliver every stream through a model task in a random order of arrivals, polls and
    timer firings; end once every channel is drained, then fire the timers left (late)."""
    task = ModelTask(handler, len(streams))
    arrived = [0] * len(streams)
    while True:
        moves: list[tuple[str, int]] = [
            ("arrive", c) for c, stream in enumerate(streams) if arrived[c] < len(stream)
        ]
        moves += [("poll", c) for c in task.ready_channels()]
        moves += [("fire", n) for n in sorted(set(task.armed))]
        if not moves:
            break
        kind, which = data.draw(st.sampled_from(moves))
        if kind == "arrive":
            element = streams[which][arrived[which]]
            arrived[which] += 1
            now_ms = None
            if with_clock and isinstance(element, CheckpointBarrier):
                in_flight = data.draw(st.none() | st.integers(-50, 250))
                now_ms = None if in_flight is None else element.timestamp + in_flight
            task.arrive(which, element, now_ms)
        elif kind == "poll":
            task.poll(which)
        else:
            task.fire(which)
    assert all(not queue for queue in task.queues), "a channel is stuck behind a block"
    return task


def check_exactly_once(task: ModelTask, streams: list[list[Any]]) -> None:
    """For every completed checkpoint n and channel c: the records polled before the snapshot,
    then c's channel state, are exactly c's records before its barrier n (all of them if c
    ended without one): none missing, none twice, none after the barrier, in order."""
    for n, outcome in task.outcomes.items():
        if not outcome.completed:
            continue
        assert outcome.snapshot is not None
        for channel, stream in enumerate(streams):
            before = []
            for element in stream:
                if isinstance(element, CheckpointBarrier) and element.checkpoint_id == n:
                    break
                if isinstance(element, int):
                    before.append(element)
            else:
                assert stream[-1] == "end", (n, channel, stream)
            recorded = (
                [] if outcome.channel_state is None else outcome.channel_state.get(channel, [])
            )
            actual = outcome.snapshot[channel] + [number_of(frame) for frame in recorded]
            assert actual == before, (n, channel, outcome)
        if outcome.unaligned_channels is not None:
            # every channel of the checkpoint stopped persisting once, before it completed
            assert outcome.channel_state is not None
            assert sorted(outcome.stopped or []) == sorted(outcome.unaligned_channels)
