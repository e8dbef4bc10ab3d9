"""Channel state: the in-flight data an unaligned checkpoint persists next to its snapshot.

What belongs to checkpoint n's channel state, for one subtask:

- input channel state, per input channel: the frames the channel delivered before its barrier
  of n that the task had not polled when it took the snapshot. They are the frames queued in
  the input gate at the snapshot, up to the channel's barrier (`in_flight_input`), then the
  frames that arrive while the barrier handler says the channel `is_persisting`.
- output channel state, per output channel: the frames queued at the sender that the barrier
  overtook (`OutputChannel.send_priority_event`): produced before the snapshot, delivered
  after the barrier, so in no snapshot at either end.

Frames are kept exactly as they travel, encoded, and never unpickled here. Only stream content
is state (records, watermarks, stream status: `is_channel_state_frame`); checkpoint and
partition control (barriers, cancellation markers, end of partition) never is, nor are latency
markers: a measurement, which replayed after a restore would only measure the outage. A marker
in flight at an unaligned checkpoint still travels on in the running attempt; a restored one
just lacks it.

Restoring, with the same parallelism only (the channel counts must match, otherwise
`read_channel_state` raises `StateRestoreError`: unaligned checkpoints cannot be rescaled):

1. before it polls any new input, the task puts each input channel's recovered frames at the
   head of that channel, in their order, and processes them like received data (they return no
   credit: no sender spent any on them); channels interleave as usual, the order within each
   channel is what matters;
2. before it sends any new output, the task re-sends each output channel's recovered frames on
   that channel, in their order (`OutputChannel.send_recovered`).

Together, the restored snapshot plus (1) plus (2) replay every record that was in flight at the
checkpoint exactly once: the downstream task's own snapshot and input channel state end at its
barrier, which the re-sent frames followed.

File format: one envelope (`barrierflow._envelope`) of kind "channel-state". Its header is::

    {"version": 1, "checkpoint_id": n, "input_channels": I, "output_channels": O,
     "inputs":  [[channel, offset, [frame length, ...]], ...],
     "outputs": [[channel, offset, [frame length, ...]], ...]}

listing only channels with frames, in increasing channel order, inputs first; each channel's
frames lie one after another in the body from `offset`, and the body holds nothing else.

>>> writer = ChannelStateWriter(input_channels=2, output_channels=1)
>>> writer.start(7)
>>> writer.add_input(7, 1, [b"D-first", b"D-second"])
>>> writer.add_output(7, 0, [b"D-overtaken"])
>>> snapshot = writer.finish(7)
>>> snapshot.persisted_bytes
26
>>> read_channel_state(snapshot.data, input_channels=2, output_channels=1)
RecoveredChannelState(inputs={1: [b'D-first', b'D-second']}, outputs={0: [b'D-overtaken']})
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from barrierflow import _envelope as envelope
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.network import codec

__all__ = [
    "CHANNEL_STATE",
    "ChannelStateSnapshot",
    "ChannelStateWriter",
    "RecoveredChannelState",
    "in_flight_input",
    "is_buffer_frame",
    "is_channel_state_frame",
    "read_channel_state",
]

CHANNEL_STATE = "channel-state"
"""Envelope kind of a channel-state file."""

VERSION = 1
"""The header layout this release writes; it reads 1 to VERSION."""

_NOT_STATE_FRAME_TYPES = frozenset(
    {codec.BARRIER, codec.CANCEL, codec.END, codec.CREDIT, codec.LATENCY}
)
"""Frames that steer checkpoints and channels, or only measure the stream (latency markers),
instead of carrying it."""

_BUFFER_FRAME_TYPES = frozenset({codec.DATA, codec.TIMESTAMPED_DATA, codec.ARROW_DATA})
"""Frames that travel as buffers, under credit: record batches."""


def is_channel_state_frame(frame: bytes) -> bool:
    """Whether `frame` is stream content that channel state keeps: records, watermarks, stream
    status; not a barrier, cancellation marker, end of partition, credit or latency marker.

    >>> is_channel_state_frame(codec.encode_batch([1, 2])), is_channel_state_frame(codec.END)
    (True, False)
    """
    return len(frame) > 0 and bytes(frame[:1]) not in _NOT_STATE_FRAME_TYPES


def is_buffer_frame(frame: bytes) -> bool:
    """Whether `frame` travels as a buffer (a record batch, sent under credit) and not as an
    event (sent without credit, never overtaking buffers unless prioritized)."""
    return bytes(frame[:1]) in _BUFFER_FRAME_TYPES


def in_flight_input(queued: Iterable[bytes], checkpoint_id: int) -> list[bytes]:
    """The frames of one input channel's queue that belong to `checkpoint_id`'s channel state.

    `queued` is what the input gate holds for the channel when the checkpoint is triggered
    unaligned, oldest first. Kept: the stream content before the channel's barrier of the
    checkpoint. The walk stops at that barrier (it arrived, and what follows it is after the
    checkpoint), at a barrier or cancellation marker of a newer checkpoint (this one can no
    longer complete on the channel), and at the end of partition; it steps over barriers and
    markers of older checkpoints, which are not state.

    >>> from barrierflow.runtime.elements import CheckpointBarrier
    >>> frames = [codec.encode_batch([1]), codec.encode_event(CheckpointBarrier(4, 0)),
    ...           codec.encode_batch([2]), codec.encode_event(CheckpointBarrier(5, 0)),
    ...           codec.encode_batch([3])]
    >>> in_flight_input(frames, 5) == [frames[0], frames[2]]
    True
    """
    frames: list[bytes] = []
    for frame in queued:
        kind = bytes(frame[:1])
        if kind in (codec.BARRIER, codec.CANCEL):
            event = codec.decode(bytes(frame))
            if event.checkpoint_id >= checkpoint_id:  # type: ignore[union-attr]
                break
        elif kind == codec.END:
            break
        elif is_channel_state_frame(frame):
            frames.append(bytes(frame))
    return frames


@dataclass(frozen=True, slots=True)
class ChannelStateSnapshot:
    """The finished channel state of one checkpoint of one subtask."""

    data: bytes
    """The "channel-state" envelope to write next to the subtask's state file."""
    persisted_bytes: int
    """Bytes of in-flight data in it (the frames, without the envelope): the statistic."""


class _Collecting:
    """The channel state of one checkpoint while it is being collected."""

    __slots__ = ("inputs", "outputs")

    def __init__(self, input_channels: int, output_channels: int) -> None:
        self.inputs: list[list[bytes]] = [[] for _ in range(input_channels)]
        self.outputs: list[list[bytes]] = [[] for _ in range(output_channels)]


class ChannelStateWriter:
    """Collects the channel state of a subtask's unaligned checkpoints; mailbox thread only.

    Drive it from the barrier handler's decisions: `start` on `TriggerUnaligned`, `add_output`
    with what the barrier overtook, `add_input` with the queued and then the arriving in-flight
    data, `finish` on `ChannelStateComplete`, `abort` on `AbortCheckpoint`. Several
    checkpoints may be collected at once; each is independent.
    """

    __slots__ = ("_checkpoints", "_input_channels", "_output_channels")

    def __init__(self, input_channels: int, output_channels: int) -> None:
        if input_channels < 0 or output_channels < 0:
            raise ValueError(
                f"channel counts cannot be negative: {input_channels} inputs, "
                f"{output_channels} outputs"
            )
        self._input_channels = input_channels
        self._output_channels = output_channels
        self._checkpoints: dict[int, _Collecting] = {}

    @property
    def checkpoint_ids(self) -> tuple[int, ...]:
        """The checkpoints started and neither finished nor aborted, in start order."""
        return tuple(self._checkpoints)

    def start(self, checkpoint_id: int) -> None:
        """Begin collecting the channel state of `checkpoint_id`."""
        if checkpoint_id in self._checkpoints:
            raise ValueError(f"the channel state of checkpoint {checkpoint_id} is already started")
        self._checkpoints[checkpoint_id] = _Collecting(self._input_channels, self._output_channels)

    def add_input(self, checkpoint_id: int, channel: int, frames: Iterable[bytes]) -> None:
        """Append `frames`, in order, to input channel `channel`'s state of `checkpoint_id`."""
        collecting = self._collecting(checkpoint_id)
        self._extend(collecting.inputs, "input", channel, frames)

    def add_output(self, checkpoint_id: int, channel: int, frames: Iterable[bytes]) -> None:
        """Append `frames`, in order, to output channel `channel`'s state of `checkpoint_id`."""
        collecting = self._collecting(checkpoint_id)
        self._extend(collecting.outputs, "output", channel, frames)

    def abort(self, checkpoint_id: int) -> None:
        """Drop what was collected for `checkpoint_id`; nothing if it was never started."""
        self._checkpoints.pop(checkpoint_id, None)

    def finish(self, checkpoint_id: int) -> ChannelStateSnapshot:
        """The collected channel state of `checkpoint_id` as one envelope; forgets it."""
        collecting = self._collecting(checkpoint_id)
        del self._checkpoints[checkpoint_id]
        body: list[bytes] = []
        offset = 0

        def layout(channels: list[list[bytes]]) -> list[list[Any]]:
            nonlocal offset
            entries: list[list[Any]] = []
            for channel, frames in enumerate(channels):
                if frames:
                    lengths = [len(frame) for frame in frames]
                    entries.append([channel, offset, lengths])
                    offset += sum(lengths)
                    body.extend(frames)
            return entries

        header = {
            "version": VERSION,
            "checkpoint_id": checkpoint_id,
            "input_channels": self._input_channels,
            "output_channels": self._output_channels,
            "inputs": layout(collecting.inputs),
            "outputs": layout(collecting.outputs),
        }
        return ChannelStateSnapshot(envelope.encode(CHANNEL_STATE, header, b"".join(body)), offset)

    def _collecting(self, checkpoint_id: int) -> _Collecting:
        collecting = self._checkpoints.get(checkpoint_id)
        if collecting is None:
            raise ValueError(
                f"the channel state of checkpoint {checkpoint_id} is not being collected "
                f"(collecting: {list(self._checkpoints) or 'none'})"
            )
        return collecting

    @staticmethod
    def _extend(
        channels: list[list[bytes]], side: str, channel: int, frames: Iterable[bytes]
    ) -> None:
        if not 0 <= channel < len(channels):
            raise ValueError(f"{side} channel {channel} is not one of the {len(channels)}")
        kept = channels[channel]
        for frame in frames:
            if not is_channel_state_frame(frame):
                raise ValueError(
                    f"a frame of type {bytes(frame[:1])!r} on {side} channel {channel} is not "
                    "stream content; channel state never holds barriers, markers or ends"
                )
            kept.append(bytes(frame))


class RecoveredChannelState(NamedTuple):
    """What a subtask replays on restore, by channel index, each channel's frames in order."""

    inputs: dict[int, list[bytes]]
    """Per input channel: processed before any new input on it."""
    outputs: dict[int, list[bytes]]
    """Per output channel: re-sent before any new output on it."""


def read_channel_state(
    data: bytes | bytearray | memoryview,
    *,
    input_channels: int | None = None,
    output_channels: int | None = None,
) -> RecoveredChannelState:
    """The frames of a "channel-state" file, for a subtask with these channel counts.

    Pass the restoring subtask's `input_channels` and `output_channels`: a file written with
    other counts (the job's parallelism changed) cannot be mapped onto its channels, so it
    raises `StateRestoreError`. So do a damaged file and a header this release cannot read.
    """
    header, body = envelope.decode(data, CHANNEL_STATE)
    if not isinstance(header, dict):
        raise StateRestoreError(f"the channel-state header is not a map: {header!r}")
    version = header.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise StateRestoreError(
            f"channel-state header version {version!r}; this barrierflow reads 1 to {VERSION}"
        )
    counts = {}
    for side, expected in (("input", input_channels), ("output", output_channels)):
        count = header.get(f"{side}_channels")
        if not isinstance(count, int) or count < 0:
            raise StateRestoreError(f"the channel-state header has no valid {side} channel count")
        if expected is not None and count != expected:
            raise StateRestoreError(
                f"the channel state of checkpoint {header.get('checkpoint_id')} was written by a "
                f"subtask with {count} {side} channels, and this subtask has {expected}: "
                "an unaligned checkpoint can only be restored with unchanged parallelism "
                "(rescale from a savepoint or an aligned checkpoint instead)"
            )
        counts[side] = count
    position = 0
    recovered: list[dict[int, list[bytes]]] = []
    for side in ("input", "output"):
        frames_by_channel: dict[int, list[bytes]] = {}
        previous = -1
        for entry in _entries(header, side):
            channel, offset, lengths = entry
            if not previous < channel < counts[side]:
                raise StateRestoreError(
                    f"channel-state {side} channel {channel} is out of order or not one of "
                    f"the {counts[side]}"
                )
            if offset != position:
                raise StateRestoreError(
                    f"channel-state {side} channel {channel} starts at byte {offset}, "
                    f"expected {position}"
                )
            frames = []
            for length in lengths:
                frames.append(bytes(body[position : position + length]))
                position += length
            if position > len(body):
                raise StateRestoreError(
                    f"channel-state {side} channel {channel} ends at byte {position}, past the "
                    f"{len(body)}-byte body"
                )
            frames_by_channel[channel] = frames
            previous = channel
        recovered.append(frames_by_channel)
    if position != len(body):
        raise StateRestoreError(
            f"the channel-state header describes {position} bytes, the body holds {len(body)}"
        )
    return RecoveredChannelState(*recovered)


def _entries(header: dict[str, Any], side: str) -> list[tuple[int, int, list[int]]]:
    raw = header.get(f"{side}s")
    if not isinstance(raw, list):
        raise StateRestoreError(f"the channel-state header has no {side} channel list")
    entries = []
    for entry in raw:
        valid = (
            isinstance(entry, list)
            and len(entry) == 3
            and all(isinstance(v, int) for v in entry[:2])
            and isinstance(entry[2], list)
            and all(isinstance(length, int) and length > 0 for length in entry[2])
        )
        if not valid:
            raise StateRestoreError(f"malformed channel-state {side} entry {entry!r}")
        entries.append((entry[0], entry[1], entry[2]))
    return entries
