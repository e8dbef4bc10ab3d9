"""Frames on a data channel. The first byte says what follows.

Records travel as pickled lists of values (protocol 5; a batch of one named tuple class
as plain tuples, `named_rows.py`); a batch whose records carry event timestamps also
carries them as one packed array of 64-bit integers, so timestamps cost no pickling.
Columnar batches (`ColumnarBatch`) travel as Arrow: an IPC stream of one record batch,
read back without copying, with the same packed timestamps and, when the batch's row
converter is not the default, the converter pickled by reference (a module-level
function: a few bytes). A columnar batch whose converter cannot be pickled so (a lambda,
a local function) travels as its rows, in a D or T frame, and arrives as a
`RecordBatch`. Events are a few fixed-size integers, so a receiver never unpickles
anything to see a barrier, a watermark or a stream status. Frames are only decoded after
the connection proved it knows the job's secret.

    D <pickle of values>                              records without timestamps
    T <uint32 n> <n int64 timestamps> <pickle>        records with timestamps
    A <uint8 flags: 1 timestamps, 2 converter>        columnar records
      [<uint32 n> <n int64 timestamps>]
      [<uint32 m> <m bytes: pickle of the converter>]
      <Arrow IPC stream: schema, one record batch>
    B <int64 checkpoint id> <int64 timestamp> <uint8 flags: 1 savepoint, 2 final,
      4 target> [<utf-8 target folder URI>]           checkpoint barrier (an older 17-byte
                                                      frame without flags is still read)
    X <int64 checkpoint id>                           cancel checkpoint marker
    E                                                 end of partition
    W <int64 timestamp>                               watermark
    S <uint8 0 = ACTIVE, 1 = IDLE>                    stream status
    L <int64 marked time> <int64 vertex> <uint32 subtask>   latency marker
    C <uint32 buffers>                                credit (receiver -> sender)
"""

from __future__ import annotations

import pickle
import struct
import sys
from array import array
from typing import Any

import numpy as np
import pyarrow as pa

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.columnar import AnyBatch, ColumnarBatch, RowConverter, arrow_rows
from barrierflow.runtime.elements import (
    END_OF_PARTITION,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    LatencyMarker,
    StreamStatus,
    Watermark,
)
from barrierflow.runtime.network.named_rows import pickle_values

DATA = b"D"
TIMESTAMPED_DATA = b"T"
ARROW_DATA = b"A"
BARRIER = b"B"
CANCEL = b"X"
END = b"E"
WATERMARK = b"W"
STATUS = b"S"
LATENCY = b"L"
CREDIT = b"C"

_TWO_LONGS = struct.Struct("!qq")
_BARRIER = struct.Struct("!qqB")
_SAVEPOINT_FLAG = 1
_FINAL_FLAG = 2
_TARGET_FLAG = 4
_LONG = struct.Struct("!q")
_UINT = struct.Struct("!I")
_LATENCY = struct.Struct("!qqI")

_ARROW_TIMESTAMPS = 1
_ARROW_CONVERTER = 2
_BIG_ENDIAN_INT64 = np.dtype(">i8")

_IDLE_FRAME = STATUS + b"\x01"
_ACTIVE_FRAME = STATUS + b"\x00"
_BIG_ENDIAN = sys.byteorder == "big"

Event = (
    CheckpointBarrier
    | CancelCheckpointMarker
    | EndOfPartition
    | Watermark
    | StreamStatus
    | LatencyMarker
)


def encode_batch(values: list[Any], timestamps: list[int] | None = None) -> bytes:
    """A data frame for `values` (and their timestamps, one per value, if given)."""
    if timestamps is None:
        return DATA + pickle_values(values)
    packed = array("q", timestamps)
    if not _BIG_ENDIAN:
        packed.byteswap()
    return b"".join(
        (
            TIMESTAMPED_DATA,
            _UINT.pack(len(packed)),
            packed.tobytes(),
            pickle_values(values),
        )
    )


def encode_records(batch: AnyBatch) -> bytes:
    """The data frame of either kind of batch (a columnar one as Arrow if it can travel so)."""
    if type(batch) is ColumnarBatch and travels_as_arrow(batch.converter):
        return encode_arrow(batch.data, batch.timestamp_array, batch.converter)
    return encode_batch(batch.values, batch.timestamps)


def travels_as_arrow(converter: RowConverter) -> bool:
    """Whether a columnar batch with this row converter crosses a channel as Arrow (the
    converter is the default or pickles by reference)."""
    return _converter_pickle(converter) is not None


def encode_arrow(
    data: pa.RecordBatch, timestamps: np.ndarray | None, converter: RowConverter = arrow_rows
) -> bytes:
    """An Arrow data frame; `converter` must travel (`travels_as_arrow`)."""
    pickled = _converter_pickle(converter)
    if pickled is None:
        raise ValueError(f"the row converter {converter!r} cannot travel by reference")
    flags = (_ARROW_TIMESTAMPS if timestamps is not None else 0) | (
        _ARROW_CONVERTER if pickled else 0
    )
    parts: list[Any] = [ARROW_DATA, bytes((flags,))]
    if timestamps is not None:
        parts.append(_UINT.pack(len(timestamps)))
        parts.append(timestamps.astype(_BIG_ENDIAN_INT64, copy=False).tobytes())
    if pickled:
        parts.append(_UINT.pack(len(pickled)))
        parts.append(pickled)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_batch(data)
    parts.append(sink.getvalue())
    return b"".join(parts)


_CONVERTER_PICKLES: dict[Any, bytes | None] = {arrow_rows: b""}
"""Row converter -> its pickle (b"" for the default; None: it cannot travel by reference)."""
_PICKLED_CONVERTERS: dict[bytes, RowConverter] = {}


def _converter_pickle(converter: RowConverter) -> bytes | None:
    try:
        return _CONVERTER_PICKLES[converter]
    except KeyError:
        pass
    except TypeError:  # unhashable: a callable object holding state
        return None
    try:
        pickled: bytes | None = pickle.dumps(converter, protocol=5)
    except Exception:  # a lambda or local function: pickle cannot name it
        pickled = None
    if len(_CONVERTER_PICKLES) < 64:
        _CONVERTER_PICKLES[converter] = pickled
    return pickled


def encode_event(event: Event) -> bytes:
    if isinstance(event, Watermark):
        return WATERMARK + _LONG.pack(event.timestamp)
    if isinstance(event, StreamStatus):
        return _IDLE_FRAME if event is StreamStatus.IDLE else _ACTIVE_FRAME
    if isinstance(event, CheckpointBarrier):
        flags = (
            (_SAVEPOINT_FLAG if event.is_savepoint else 0)
            | (_FINAL_FLAG if event.is_final else 0)
            | (_TARGET_FLAG if event.target is not None else 0)
        )
        frame = BARRIER + _BARRIER.pack(event.checkpoint_id, event.timestamp, flags)
        return frame if event.target is None else frame + event.target.encode()
    if isinstance(event, CancelCheckpointMarker):
        return CANCEL + _LONG.pack(event.checkpoint_id)
    if isinstance(event, EndOfPartition):
        return END
    if isinstance(event, LatencyMarker):
        return LATENCY + _LATENCY.pack(
            event.marked_time_ms, event.source_vertex_id, event.source_subtask
        )
    raise TypeError(f"not a channel event: {event!r}")


def encode_credit(buffers: int) -> bytes:
    return CREDIT + _UINT.pack(buffers)


def decode_credit(frame: bytes) -> int:
    if frame[:1] != CREDIT:
        raise StreamCorruptionError(f"expected a credit frame, got type {frame[:1]!r}")
    return _UINT.unpack_from(frame, 1)[0]


def decode(frame: bytes) -> AnyBatch | Event:
    """A record batch or an event."""
    kind = frame[:1]
    if kind == DATA:
        return RecordBatch(pickle.loads(memoryview(frame)[1:]))
    if kind == TIMESTAMPED_DATA:
        return _decode_timestamped(frame)
    if kind == ARROW_DATA:
        return _decode_arrow(frame)
    if kind == WATERMARK:
        return Watermark(_LONG.unpack_from(frame, 1)[0])
    if kind == STATUS:
        return StreamStatus.IDLE if frame[1:2] == b"\x01" else StreamStatus.ACTIVE
    if kind == BARRIER:
        if len(frame) == 1 + _TWO_LONGS.size:  # written before barriers carried flags
            checkpoint_id, timestamp = _TWO_LONGS.unpack_from(frame, 1)
            return CheckpointBarrier(checkpoint_id, timestamp)
        checkpoint_id, timestamp, flags = _BARRIER.unpack_from(frame, 1)
        target = None
        if flags & _TARGET_FLAG:
            target = bytes(frame[1 + _BARRIER.size :]).decode()
        return CheckpointBarrier(
            checkpoint_id,
            timestamp,
            bool(flags & _SAVEPOINT_FLAG),
            bool(flags & _FINAL_FLAG),
            target,
        )
    if kind == CANCEL:
        return CancelCheckpointMarker(_LONG.unpack_from(frame, 1)[0])
    if kind == END:
        return END_OF_PARTITION
    if kind == LATENCY:
        return LatencyMarker(*_LATENCY.unpack_from(frame, 1))
    raise StreamCorruptionError(f"unknown frame type {kind!r} on a data channel")


def _decode_timestamped(frame: bytes) -> RecordBatch:
    view = memoryview(frame)
    (count,) = _UINT.unpack_from(frame, 1)
    end = 5 + 8 * count
    timestamps = array("q")
    timestamps.frombytes(view[5:end])
    if not _BIG_ENDIAN:
        timestamps.byteswap()
    values = pickle.loads(view[end:])
    if len(values) != count:
        raise StreamCorruptionError(
            f"a data frame holds {len(values)} records but {count} timestamps"
        )
    return RecordBatch(values, timestamps.tolist())


def _decode_arrow(frame: bytes) -> ColumnarBatch:
    view = memoryview(frame)
    flags = frame[1]
    offset = 2
    timestamps = None
    if flags & _ARROW_TIMESTAMPS:
        (count,) = _UINT.unpack_from(frame, offset)
        offset += 4
        timestamps = np.frombuffer(view, _BIG_ENDIAN_INT64, count, offset).astype(np.int64)
        offset += 8 * count
    converter: RowConverter = arrow_rows
    if flags & _ARROW_CONVERTER:
        (size,) = _UINT.unpack_from(frame, offset)
        offset += 4
        converter = _converter_of(bytes(view[offset : offset + size]))
        offset += size
    try:
        batches = list(pa.ipc.open_stream(pa.py_buffer(view[offset:])))
    except (pa.ArrowException, OSError) as error:
        raise StreamCorruptionError(f"an Arrow data frame does not read back: {error}") from None
    if len(batches) == 1:
        data = batches[0]
    else:
        data = pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    if timestamps is not None and len(timestamps) != data.num_rows:
        raise StreamCorruptionError(
            f"an Arrow data frame holds {data.num_rows} records but {len(timestamps)} timestamps"
        )
    return ColumnarBatch(data, timestamps, converter)


def _converter_of(pickled: bytes) -> RowConverter:
    converter = _PICKLED_CONVERTERS.get(pickled)
    if converter is None:
        try:
            converter = pickle.loads(pickled)
        except Exception as error:
            raise StreamCorruptionError(
                f"the row converter of an Arrow data frame cannot be loaded here: "
                f"{type(error).__name__}: {error}"
            ) from None
        if len(_PICKLED_CONVERTERS) < 64:
            _PICKLED_CONVERTERS[pickled] = converter
    return converter
