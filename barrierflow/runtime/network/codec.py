"""Frames on a data channel. The first byte says what follows.

Records travel as pickled batches (protocol 5); events are a few fixed-size
integers, so a receiver never unpickles anything to see a barrier. Frames are
only decoded after the connection proved it knows the job's secret.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.elements import (
    END_OF_PARTITION,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
)

DATA = b"D"
BARRIER = b"B"
CANCEL = b"X"
END = b"E"
CREDIT = b"C"

_TWO_LONGS = struct.Struct("!qq")
_LONG = struct.Struct("!q")
_UINT = struct.Struct("!I")

Event = CheckpointBarrier | CancelCheckpointMarker | EndOfPartition


def encode_batch(batch: list[Any]) -> bytes:
    return DATA + pickle.dumps(batch, protocol=5)


def encode_event(event: Event) -> bytes:
    if isinstance(event, CheckpointBarrier):
        return BARRIER + _TWO_LONGS.pack(event.checkpoint_id, event.timestamp)
    if isinstance(event, CancelCheckpointMarker):
        return CANCEL + _LONG.pack(event.checkpoint_id)
    if isinstance(event, EndOfPartition):
        return END
    raise TypeError(f"not a channel event: {event!r}")


def encode_credit(buffers: int) -> bytes:
    return CREDIT + _UINT.pack(buffers)


def decode_credit(frame: bytes) -> int:
    if frame[:1] != CREDIT:
        raise StreamCorruptionError(f"expected a credit frame, got type {frame[:1]!r}")
    return _UINT.unpack_from(frame, 1)[0]


def decode(frame: bytes) -> list[Any] | Event:
    """A record batch (list) or an event."""
    kind = frame[:1]
    if kind == DATA:
        return pickle.loads(memoryview(frame)[1:])
    if kind == BARRIER:
        checkpoint_id, timestamp = _TWO_LONGS.unpack_from(frame, 1)
        return CheckpointBarrier(checkpoint_id, timestamp)
    if kind == CANCEL:
        return CancelCheckpointMarker(_LONG.unpack_from(frame, 1)[0])
    if kind == END:
        return END_OF_PARTITION
    raise StreamCorruptionError(f"unknown frame type {kind!r} on a data channel")
