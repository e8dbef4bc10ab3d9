"""Columnar batches on channels: the Arrow frame, routing, buffering and channel state."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from barrierflow.core.column_key import ColumnKey
from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.channel_state import (
    ChannelStateWriter,
    is_buffer_frame,
    is_channel_state_frame,
    read_channel_state,
)
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.record_writer import EdgeWriter
from barrierflow.runtime.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
)

DATA = pa.record_batch({"auction": [1, 2, 3, 4, 5], "bidder": ["a", "b", "c", "d", "e"]})


def pairs(data: pa.RecordBatch) -> list[Any]:
    """A module-level converter: it pickles by reference, so it travels with the frame."""
    return list(zip(data["auction"].to_pylist(), data["bidder"].to_pylist(), strict=True))


def rows(batch: Any) -> list[tuple[Any, Any]]:
    return list(batch.records())


def test_an_arrow_frame_reads_back_as_the_same_columnar_batch() -> None:
    for stamps in (None, [5, 4, 3, 2, 1]):
        frame = codec.encode_records(ColumnarBatch(DATA, stamps))
        assert frame[:1] == codec.ARROW_DATA
        decoded = codec.decode(frame)
        assert type(decoded) is ColumnarBatch and not decoded.materialized
        assert decoded.data.equals(DATA)
        assert decoded.timestamps == stamps


def test_a_converter_named_by_reference_travels_with_the_batch() -> None:
    frame = codec.encode_records(ColumnarBatch(DATA, [1, 2, 3, 4, 5], pairs))
    assert frame[:1] == codec.ARROW_DATA
    decoded = codec.decode(frame)
    assert decoded.converter is pairs
    assert rows(decoded)[:2] == [((1, "a"), 1), ((2, "b"), 2)]


def test_a_converter_that_cannot_travel_sends_the_rows_instead() -> None:
    batch = ColumnarBatch(DATA.slice(0, 2), [7, 8], lambda data: data["bidder"].to_pylist())
    assert not codec.travels_as_arrow(batch.converter)
    frame = codec.encode_records(batch)
    assert frame[:1] == codec.TIMESTAMPED_DATA
    assert codec.decode(frame) == RecordBatch(["a", "b"], [7, 8])


def test_a_damaged_arrow_frame_is_a_stream_corruption_error() -> None:
    frame = codec.encode_records(ColumnarBatch(DATA))
    with pytest.raises(StreamCorruptionError, match="does not read back"):
        codec.decode(frame[:-40])


def test_arrow_frames_are_buffers_and_channel_state_keeps_them_byte_for_byte() -> None:
    frame = codec.encode_records(ColumnarBatch(DATA, [1, 2, 3, 4, 5], pairs))
    assert is_buffer_frame(frame) and is_channel_state_frame(frame)
    writer = ChannelStateWriter(input_channels=1, output_channels=1)
    writer.start(3)
    writer.add_input(3, 0, [frame])
    writer.add_output(3, 0, [codec.encode_records(ColumnarBatch(DATA))])
    recovered = read_channel_state(writer.finish(3).data, input_channels=1, output_channels=1)
    assert recovered.inputs == {0: [frame]}
    assert rows(codec.decode(recovered.inputs[0][0])) == rows(
        ColumnarBatch(DATA, [1, 2, 3, 4, 5], pairs)
    )


class FakeChannel:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send_buffer(self, frame: bytes) -> None:
        self.frames.append(frame)

    send_event = send_buffer

    def decoded(self) -> list[Any]:
        return [codec.decode(frame) for frame in self.frames]


def edge(channels: int, partitioner: Any, buffer_size: int = 100) -> tuple[EdgeWriter, list[Any]]:
    fakes = [FakeChannel() for _ in range(channels)]
    return EdgeWriter(partitioner, fakes, buffer_size), fakes  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "partitioner",
    [
        ForwardPartitioner(),
        BroadcastPartitioner(),
        RebalancePartitioner(),
        KeyGroupStreamPartitioner(lambda row: row["auction"], 128),
    ],
    ids=["forward", "broadcast", "rebalance", "hash"],
)
def test_each_partitioner_sends_columnar_batches_as_arrow_frames(partitioner: Any) -> None:
    """The records and timestamps each channel gets are the ones the same batch as Python
    rows gets (rebalance: the same number per channel; it slices instead of striding)."""
    count = 1 if isinstance(partitioner, ForwardPartitioner) else 3
    stamps = [10, 20, 30, 40, 50]
    columnar_writer, columnar = edge(count, partitioner)
    columnar_writer.emit(ColumnarBatch(DATA, stamps))
    columnar_writer.flush()
    list_writer, listed = edge(count, type(partitioner)() if not isinstance(
        partitioner, KeyGroupStreamPartitioner) else partitioner)  # fmt: skip
    list_writer.emit(RecordBatch(DATA.to_pylist(), stamps))
    list_writer.flush()
    for arrow_channel, list_channel in zip(columnar, listed, strict=True):
        assert all(frame[:1] == codec.ARROW_DATA for frame in arrow_channel.frames)
        got = [r for batch in arrow_channel.decoded() for r in rows(batch)]
        expected = [r for batch in list_channel.decoded() for r in rows(batch)]
        if isinstance(partitioner, RebalancePartitioner):
            assert len(got) == len(expected)
        else:
            assert got == expected
    everything = [r for c in columnar for b in c.decoded() for r in rows(b)]
    if not isinstance(partitioner, BroadcastPartitioner):
        assert sorted(everything, key=lambda r: r[1]) == rows(ColumnarBatch(DATA, stamps))


def test_rebalance_slices_continue_round_robin_across_batches() -> None:
    partitioner = RebalancePartitioner()
    first = partitioner.route_columnar(ColumnarBatch(DATA), 3)
    assert [(c, len(part)) for c, part in first] == [(0, 2), (1, 2), (2, 1)]
    second = partitioner.route_columnar(ColumnarBatch(DATA.slice(0, 1)), 3)
    assert [(c, len(part)) for c, part in second] == [(0, 1)]
    third = partitioner.route_columnar(ColumnarBatch(DATA.slice(0, 2)), 3)
    assert [c for c, _ in third] == [1, 2]


def test_a_channel_buffers_columnar_parts_until_a_buffers_worth_and_keeps_order() -> None:
    writer, (channel,) = edge(1, ForwardPartitioner(), buffer_size=6)
    writer.emit(ColumnarBatch(DATA.slice(0, 2), [1, 2]))
    writer.emit(ColumnarBatch(DATA.slice(2, 2), [3, 4]))
    assert channel.frames == []
    writer.emit(RecordBatch(["python row"], [5]))  # another kind flushes the Arrow parts
    writer.emit(ColumnarBatch(DATA, [6, 7, 8, 9, 10]))  # ...and the other way round
    writer.emit(ColumnarBatch(DATA.slice(0, 1), [11]))  # 6 rows: full
    writer.emit(ColumnarBatch(DATA.select(["bidder"]), [12, 13, 14, 15, 16]))
    writer.broadcast_event(codec.encode_event(Watermark(99)))
    kinds = [frame[:1] for frame in channel.frames]
    assert kinds == [b"A", b"T", b"A", b"A", b"W"]
    decoded = channel.decoded()
    assert rows(decoded[0]) == rows(ColumnarBatch(DATA.slice(0, 4), [1, 2, 3, 4]))
    assert rows(decoded[1]) == [("python row", 5)]
    assert decoded[2].timestamps == [6, 7, 8, 9, 10, 11]
    assert decoded[3].data.schema.names == ["bidder"]  # another schema: its own frame
    assert decoded[4] == Watermark(99)


@pytest.mark.parametrize("column", ["auction", "bidder"])
def test_a_column_key_routes_a_columnar_batch_as_the_python_rows_are_routed(column: str) -> None:
    data = pa.record_batch(
        {
            "auction": [i * 7919 - 500 for i in range(200)],
            "bidder": [f"b{i % 13}" for i in range(200)],
        }
    )
    partitioner = KeyGroupStreamPartitioner(ColumnKey(column), 128)
    columnar = partitioner.route_columnar(ColumnarBatch(data, list(range(200))), 3)
    as_rows = partitioner.route_with_timestamps(data.to_pylist(), list(range(200)), 3)
    assert [(channel, rows(part)) for channel, part in columnar] == [
        (channel, list(zip(values, stamps, strict=True))) for channel, values, stamps in as_rows
    ]
    with pytest.raises(KeyError, match=r"no column 'price'; their columns are \['auction'"):
        KeyGroupStreamPartitioner(ColumnKey("price"), 128).route_columnar(ColumnarBatch(data), 3)


def test_a_column_key_reads_dicts_by_key_and_other_rows_by_attribute() -> None:
    key = ColumnKey("auction")
    assert key.get_key({"auction": 5}) == 5
    assert key.get_key(pa.record_batch({"auction": [6]}).to_pylist()[0]) == 6

    class Bid:
        auction = 9

    assert key(Bid()) == 9
    with pytest.raises(KeyError, match="no column 'auction'"):
        key.get_key({"price": 1})
