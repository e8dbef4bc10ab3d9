"""The per-channel bookkeeping of the barrier handlers, event by event: `ChannelLedger` alone,
then one table of the channel-order rules played against every handler that keeps its
ledger (aligner, tracker, unaligner, alternating), instead of a copy of it per handler."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.barriers.aligner import CheckpointBarrierAligner
from barrierflow.runtime.barriers.ledger import ChannelLedger
from barrierflow.runtime.barriers.tracker import CheckpointBarrierTracker
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier

# ---- the ledger alone ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One ledger event and what it must answer, or the error it must raise."""

    event: str  # "barrier" | "cancel" | "end"
    channel: int
    checkpoint_id: int = 0
    answer: bool | None = None  # barrier/cancel: whether the id is the newest seen
    raises: str | None = None  # a StreamCorruptionError message pattern

    def play(self, ledger: ChannelLedger) -> Any:
        if self.event == "barrier":
            return ledger.barrier(self.channel, self.checkpoint_id)
        if self.event == "cancel":
            return ledger.cancel_marker(self.channel, self.checkpoint_id)
        return ledger.end(self.channel)


def b(ch: int, n: int, newest: bool) -> Step:
    return Step("barrier", ch, n, answer=newest)


def c(ch: int, n: int, newest: bool) -> Step:
    return Step("cancel", ch, n, answer=newest)


def e(ch: int) -> Step:
    return Step("end", ch)


def fails(step: Step, match: str) -> Step:
    return Step(step.event, step.channel, step.checkpoint_id, raises=match)


@dataclass(frozen=True)
class LedgerScenario:
    name: str
    channels: int
    steps: Sequence[Step]
    open_channels: frozenset[int]
    """The open channels once every step ran."""
    latest: int | None
    """The newest id seen once every step ran."""


LEDGER_SCENARIOS = [
    LedgerScenario(
        "a new ledger: every channel open, nothing seen", 3, [], frozenset({0, 1, 2}), None
    ),
    LedgerScenario(
        "the first barrier of an id is the newest; the same id on another channel is not",
        2, [b(0, 1, True), b(1, 1, False), b(1, 2, True), b(0, 2, False)], frozenset({0, 1}), 2,
    ),
    LedgerScenario(
        "a late barrier on another channel is recorded, not the newest",
        2, [b(0, 3, True), b(1, 1, False), b(1, 2, False)], frozenset({0, 1}), 3,
    ),
    LedgerScenario(
        "a cancellation marker counts as seen but is no channel's last barrier",
        2, [c(0, 2, True), b(0, 2, False), c(1, 2, False), c(1, 1, False)], frozenset({0, 1}), 2,
    ),
    LedgerScenario(
        "an end closes its channel only",
        3, [b(0, 1, True), e(1), b(2, 1, False)], frozenset({0, 2}), 1,
    ),
    LedgerScenario(
        "the same barrier twice on one channel is corruption",
        2, [b(0, 1, True), fails(b(0, 1, False), "channel 0 .*checkpoint 1 twice")],
        frozenset({0, 1}), 1,
    ),
    LedgerScenario(
        "an older barrier after a newer one on one channel is corruption",
        2,
        [b(1, 2, True), fails(b(1, 1, False), "channel 1 .*1 after that of checkpoint 2")],
        frozenset({0, 1}), 2,
    ),
    LedgerScenario(
        "anything after the end of a channel is corruption",
        2,
        [
            e(0),
            fails(b(0, 1, False), "channel 0 delivered the barrier of checkpoint 1 after it ended"),
            fails(c(0, 1, False), "channel 0 .*cancellation marker of checkpoint 1 after it ended"),
            fails(e(0), "channel 0 delivered a second end of partition after it ended"),
        ],
        frozenset({1}), None,
    ),
]  # fmt: skip


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.name) for s in LEDGER_SCENARIOS])
def test_the_ledger_answers_what_the_scenario_says(scenario: LedgerScenario) -> None:
    ledger = ChannelLedger(scenario.channels)
    for number, step in enumerate(scenario.steps, start=1):
        if step.raises is not None:
            with pytest.raises(StreamCorruptionError, match=step.raises):
                step.play(ledger)
        else:
            assert step.play(ledger) == step.answer, f"step {number}: {step}"
    assert ledger.open_channels == scenario.open_channels
    assert [ledger.is_open(ch) for ch in range(scenario.channels)] == [
        ch in scenario.open_channels for ch in range(scenario.channels)
    ]
    assert ledger.open_channel_count == len(scenario.open_channels)
    assert ledger.latest_checkpoint_id == scenario.latest
    assert ledger.all_open(set(scenario.open_channels))
    if scenario.open_channels:
        assert not ledger.all_open(set(sorted(scenario.open_channels)[1:]))


# ---- every handler keeps the same rules through its ledger --------------------------------------

Handler = Any
HANDLERS: dict[str, Callable[[int], Handler]] = {
    "aligner": CheckpointBarrierAligner,
    "tracker": CheckpointBarrierTracker,
    "unaligner": CheckpointBarrierUnaligner.unaligned,
    "alternating": lambda n: CheckpointBarrierUnaligner.alternating(n, 100),
}


def barrier(ch: int, n: int) -> Callable[[Handler], Any]:
    """A barrier as the handler first hears of it (announced, for the unaligner)."""

    def deliver(handler: Handler) -> Any:
        element = CheckpointBarrier(n, 0)
        if isinstance(handler, CheckpointBarrierUnaligner):
            return handler.on_barrier_announced(ch, element)
        return handler.on_barrier(ch, element)

    return deliver


def cancel(ch: int, n: int) -> Callable[[Handler], Any]:
    return lambda handler: handler.on_cancel_marker(ch, CancelCheckpointMarker(n))


def end(ch: int) -> Callable[[Handler], Any]:
    return lambda handler: handler.on_end_of_partition(ch)


CORRUPTION = [
    ("a barrier after the end of its channel", 2,
     [end(0)], barrier(0, 1), "channel 0 .*checkpoint 1 after it ended"),
    ("a cancellation marker after the end of its channel", 2,
     [end(1)], cancel(1, 1), "channel 1 .*checkpoint 1 after it ended"),
    ("a second end of partition on one channel", 2,
     [end(1)], end(1), "channel 1 .*second end of partition"),
    ("the same barrier twice on one channel", 2,
     [barrier(0, 1)], barrier(0, 1), "channel 0 .*checkpoint 1 twice"),
    ("the same barrier twice on a single channel", 1,
     [barrier(0, 1)], barrier(0, 1), "channel 0 .*checkpoint 1 twice"),
    ("an older barrier after a newer one on one channel", 2,
     [barrier(1, 2)], barrier(1, 1), "channel 1 .*checkpoint 1 after that of checkpoint 2"),
]  # fmt: skip


@pytest.mark.parametrize("kind", HANDLERS)
@pytest.mark.parametrize(
    ("channels", "before", "event", "match"),
    [pytest.param(*row[1:], id=row[0]) for row in CORRUPTION],
)
def test_every_handler_refuses_a_stream_that_breaks_channel_order(
    kind: str,
    channels: int,
    before: list[Callable[[Handler], Any]],
    event: Callable[[Handler], Any],
    match: str,
) -> None:
    handler = HANDLERS[kind](channels)
    for deliver in before:
        deliver(handler)
    with pytest.raises(StreamCorruptionError, match=match):
        event(handler)


@pytest.mark.parametrize("kind", HANDLERS)
@pytest.mark.parametrize("channel_count", [0, -1])
def test_every_handler_needs_at_least_one_channel(kind: str, channel_count: int) -> None:
    with pytest.raises(ValueError, match="at least one input channel"):
        HANDLERS[kind](channel_count)


@pytest.mark.parametrize("kind", HANDLERS)
@pytest.mark.parametrize("channel", [-1, 2])
def test_every_handler_refuses_a_channel_outside_the_inputs(kind: str, channel: int) -> None:
    handler = HANDLERS[kind](2)
    with pytest.raises(ValueError, match=f"channel {channel} is not one of the 2 inputs"):
        barrier(channel, 1)(handler)
    assert getattr(handler, "latest_checkpoint_id", None) is None
    assert handler.open_channel_count == 2
