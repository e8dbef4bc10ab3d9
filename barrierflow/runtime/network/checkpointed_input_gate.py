"""CheckpointedInputGate: a task's input channels together with the barrier handler that
decides, from what they deliver, when to checkpoint.

Mailbox thread only. The task tells the gate what arrived (`received`) and asks it for
the next element (`poll`); the gate queues and hands out elements, feeds every barrier,
cancellation marker and end of partition to its barrier handler, and returns the
handler's decisions for the task to carry out. With unaligned checkpoints the gate
announces a barrier the moment its frame arrives, and says which arriving frames
belong to the current checkpoint's channel state (`Arrival.persist_for`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from barrierflow.runtime.barriers.decisions import Decision
from barrierflow.runtime.barriers.handler import BarrierHandler
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner
from barrierflow.runtime.channel_state import is_channel_state_frame
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier, EndOfPartition
from barrierflow.runtime.network.input_gate import InputGate

NO_DECISIONS: tuple[Decision, ...] = ()


@dataclass(frozen=True)
class Arrival:
    """What the task must do about an element that arrived."""

    decisions: tuple[Decision, ...] = NO_DECISIONS
    """The barrier handler's decisions (an announced barrier)."""
    persist_for: int | None = None
    """The checkpoint whose input channel state gets `frame`, or None."""
    frame: bytes | None = None


@dataclass(frozen=True)
class Polled:
    """The next element of an unblocked channel, and the handler's decisions about it."""

    channel: int
    element: Any
    decisions: tuple[Decision, ...] = NO_DECISIONS


class CheckpointedInputGate:
    """The input channels of one task and their barrier handler (see the module docstring)."""

    def __init__(self, gate: InputGate, handler: BarrierHandler) -> None:
        self.gate = gate
        self.handler = handler
        self._unaligner = handler if isinstance(handler, CheckpointBarrierUnaligner) else None
        self._ended: set[int] = set()

    @property
    def channel_count(self) -> int:
        return self.gate.channel_count

    @property
    def announces_barriers(self) -> bool:
        """Barriers act on arrival (unaligned checkpoints), not only when polled."""
        return self._unaligner is not None

    @property
    def all_connected(self) -> bool:
        return self.gate.all_connected

    def connected(self, channel: int, connection: Connection) -> None:
        self.gate.connected(channel, connection)

    def has_ended(self, channel: int) -> bool:
        """Whether `channel` delivered its end of partition (arrived, maybe not yet polled)."""
        return channel in self._ended

    def received(
        self, channel: int, element: Any, frame: bytes | None, now_ms: int | None = None
    ) -> Arrival:
        """Queue `element`, which arrived on `channel` as `frame`; `now_ms` (wall clock) lets
        an alternating handler see how old an announced barrier's checkpoint is."""
        if isinstance(element, EndOfPartition):
            self._ended.add(channel)
        self.gate.received(channel, element, frame)
        unaligner = self._unaligner
        if unaligner is None:
            return Arrival()
        if type(element) is CheckpointBarrier:
            return Arrival(decisions=unaligner.on_barrier_announced(channel, element, now_ms))
        if unaligner.is_persisting(channel):
            checkpoint_id = unaligner.current_checkpoint_id
            if frame is None:
                frame = self.gate.queued_frames(channel)[-1]
            if is_channel_state_frame(frame):
                return Arrival(persist_for=checkpoint_id, frame=frame)
        return Arrival()

    def has_available(self) -> bool:
        return self.gate.has_available(self.handler.is_blocked)

    def is_blocked(self, channel: int) -> bool:
        return self.handler.is_blocked(channel)

    def poll(self) -> Polled | None:
        """The next element of an unblocked channel with what the handler decided, or None."""
        handler = self.handler
        polled = self.gate.poll(handler.is_blocked)
        if polled is None:
            return None
        channel, element = polled
        kind = type(element)
        if kind is CheckpointBarrier:
            return Polled(channel, element, handler.on_barrier(channel, element))
        if kind is CancelCheckpointMarker:
            return Polled(channel, element, handler.on_cancel_marker(channel, element))
        if kind is EndOfPartition:
            return Polled(channel, element, handler.on_end_of_partition(channel))
        return Polled(channel, element)

    def alignment_timed_out(self, checkpoint_id: int) -> tuple[Decision, ...]:
        """The aligned-checkpoint timeout of `checkpoint_id` fired."""
        assert self._unaligner is not None
        return self._unaligner.on_alignment_timeout(checkpoint_id)

    def persisting_checkpoint(self) -> int | None:
        """The checkpoint whose channel state is being collected, or None."""
        unaligner = self._unaligner
        return None if unaligner is None else unaligner.current_checkpoint_id

    def queued_frames(self, channel: int) -> list[bytes]:
        return self.gate.queued_frames(channel)

    def prepend_recovered(self, channel: int, pairs: Iterable[tuple[Any, bytes]]) -> None:
        self.gate.prepend_recovered(channel, pairs)

    def close(self) -> None:
        self.gate.close()
