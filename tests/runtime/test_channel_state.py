"""Channel state: which queued frames are in flight, the writer, the file, the reader."""

from __future__ import annotations

import pytest

from barrierflow import _envelope as envelope
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.channel_state import (
    CHANNEL_STATE,
    ChannelStateWriter,
    in_flight_input,
    is_buffer_frame,
    is_channel_state_frame,
    read_channel_state,
)
from barrierflow.runtime.elements import (
    END_OF_PARTITION,
    CancelCheckpointMarker,
    CheckpointBarrier,
    StreamStatus,
    Watermark,
)
from barrierflow.runtime.network import codec

# Frames as they travel. Record frames hold bytes that are no pickle at all: nothing here may
# unpickle them.
D1, D2, D3, D4 = (codec.DATA + b"not a pickle %d" % i for i in range(1, 5))
WATERMARK = codec.encode_event(Watermark(42))
IDLE = codec.encode_event(StreamStatus.IDLE)
END = codec.encode_event(END_OF_PARTITION)


def b(checkpoint_id: int) -> bytes:
    return codec.encode_event(CheckpointBarrier(checkpoint_id, 1_000 * checkpoint_id))


def x(checkpoint_id: int) -> bytes:
    return codec.encode_event(CancelCheckpointMarker(checkpoint_id))


# ---- which queued frames are in flight ---------------------------------------------------------

IN_FLIGHT = [
    # queue of one input channel (oldest first), checkpoint, the in-flight frames
    pytest.param([], 3, [], id="an empty queue holds nothing in flight"),
    pytest.param([D1, D2], 3, [D1, D2], id="with no barrier queued everything queued is in flight"),
    pytest.param([D1, b(3), D2], 3, [D1], id="the walk stops at the checkpoint's barrier"),
    pytest.param(
        [D1, b(2), D2, x(1), D3, b(3), D4], 3, [D1, D2, D3],
        id="barriers and markers of older checkpoints are stepped over, not kept",
    ),
    pytest.param([D1, b(4), D2], 3, [D1], id="the walk stops at a newer checkpoint's barrier"),
    pytest.param([D1, x(3), D2], 3, [D1], id="the walk stops at the checkpoint's cancellation"),
    pytest.param([D1, END], 3, [D1], id="the walk stops at the end of partition"),
    pytest.param(
        [WATERMARK, D1, IDLE, b(3)], 3, [WATERMARK, D1, IDLE],
        id="watermarks and stream status are stream content and kept in order",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("queued", "checkpoint_id", "expected"), IN_FLIGHT)
def test_the_in_flight_input_is_the_stream_content_before_the_barrier(
    queued: list[bytes], checkpoint_id: int, expected: list[bytes]
) -> None:
    assert in_flight_input(queued, checkpoint_id) == expected


def test_the_in_flight_input_accepts_any_bytes_like_frames_and_returns_bytes() -> None:
    frames = in_flight_input([bytearray(D1), memoryview(D2), b(1)], 1)
    assert frames == [D1, D2] and all(type(frame) is bytes for frame in frames)


FRAME_KINDS = [
    # frame, kept in channel state, travels as a buffer
    pytest.param(codec.encode_batch([1, 2]), True, True, id="a record batch"),
    pytest.param(codec.encode_batch([1], [5]), True, True, id="a record batch with timestamps"),
    pytest.param(WATERMARK, True, False, id="a watermark"),
    pytest.param(IDLE, True, False, id="a stream status"),
    pytest.param(b(1), False, False, id="a barrier"),
    pytest.param(x(1), False, False, id="a cancellation marker"),
    pytest.param(END, False, False, id="an end of partition"),
    pytest.param(codec.encode_credit(3), False, False, id="a credit"),
    pytest.param(b"", False, False, id="nothing"),
]  # fmt: skip


@pytest.mark.parametrize(("frame", "is_state", "is_buffer"), FRAME_KINDS)
def test_only_stream_content_is_channel_state_and_only_records_travel_as_buffers(
    frame: bytes, is_state: bool, is_buffer: bool
) -> None:
    assert is_channel_state_frame(frame) is is_state
    assert is_buffer_frame(frame) is is_buffer


# ---- writing and reading -----------------------------------------------------------------------


def test_the_channel_state_reads_back_per_channel_in_order() -> None:
    writer = ChannelStateWriter(input_channels=3, output_channels=2)
    writer.start(5)
    writer.add_input(5, 2, [D1])
    writer.add_input(5, 0, [D2, WATERMARK])
    writer.add_output(5, 1, [D3])
    writer.add_input(5, 2, [D4])
    snapshot = writer.finish(5)
    inputs, outputs = read_channel_state(snapshot.data, input_channels=3, output_channels=2)
    assert inputs == {0: [D2, WATERMARK], 2: [D1, D4]}
    assert list(inputs) == [0, 2]
    assert outputs == {1: [D3]}
    assert snapshot.persisted_bytes == sum(map(len, [D1, D2, WATERMARK, D3, D4]))


def test_the_file_is_a_versioned_channel_state_envelope_with_per_channel_offsets() -> None:
    writer = ChannelStateWriter(input_channels=2, output_channels=1)
    writer.start(9)
    writer.add_input(9, 0, [D1, D2])
    writer.add_input(9, 1, [D3])
    writer.add_output(9, 0, [D4])
    header, body = envelope.decode(writer.finish(9).data, CHANNEL_STATE)
    assert header == {
        "version": 1,
        "checkpoint_id": 9,
        "input_channels": 2,
        "output_channels": 1,
        "inputs": [[0, 0, [len(D1), len(D2)]], [1, len(D1) + len(D2), [len(D3)]]],
        "outputs": [[0, len(D1) + len(D2) + len(D3), [len(D4)]]],
    }
    assert bytes(body) == D1 + D2 + D3 + D4


def test_a_checkpoint_with_nothing_in_flight_has_an_empty_channel_state() -> None:
    writer = ChannelStateWriter(input_channels=2, output_channels=2)
    writer.start(1)
    snapshot = writer.finish(1)
    assert snapshot.persisted_bytes == 0
    assert read_channel_state(snapshot.data) == ({}, {})


def test_checkpoints_are_collected_independently_and_forgotten_when_finished_or_aborted() -> None:
    writer = ChannelStateWriter(input_channels=1, output_channels=0)
    writer.start(1)
    writer.start(2)
    writer.add_input(1, 0, [D1])
    writer.add_input(2, 0, [D2])
    assert writer.checkpoint_ids == (1, 2)
    writer.abort(1)
    writer.abort(7)  # never started: nothing to drop
    assert read_channel_state(writer.finish(2).data).inputs == {0: [D2]}
    assert writer.checkpoint_ids == ()
    with pytest.raises(ValueError, match="checkpoint 1 is not being collected"):
        writer.add_input(1, 0, [D3])
    with pytest.raises(ValueError, match="checkpoint 2 is not being collected"):
        writer.finish(2)


def test_a_checkpoint_cannot_be_started_twice() -> None:
    writer = ChannelStateWriter(input_channels=1, output_channels=1)
    writer.start(3)
    with pytest.raises(ValueError, match="checkpoint 3 is already started"):
        writer.start(3)


@pytest.mark.parametrize("frame", [b(1), x(1), END, b""], ids=["barrier", "marker", "end", "empty"])
def test_the_writer_refuses_frames_that_are_not_stream_content(frame: bytes) -> None:
    writer = ChannelStateWriter(input_channels=1, output_channels=1)
    writer.start(1)
    with pytest.raises(ValueError, match="not stream content"):
        writer.add_input(1, 0, [D1, frame])
    with pytest.raises(ValueError, match="not stream content"):
        writer.add_output(1, 0, [frame])


@pytest.mark.parametrize(("side", "channel"), [("input", 2), ("input", -1), ("output", 1)])
def test_the_writer_refuses_a_channel_the_subtask_does_not_have(side: str, channel: int) -> None:
    writer = ChannelStateWriter(input_channels=2, output_channels=1)
    writer.start(1)
    add = writer.add_input if side == "input" else writer.add_output
    with pytest.raises(ValueError, match=f"{side} channel {channel} is not one of"):
        add(1, channel, [D1])


# ---- restoring ---------------------------------------------------------------------------------


def _one_of_each(input_channels: int = 2, output_channels: int = 2) -> bytes:
    writer = ChannelStateWriter(input_channels, output_channels)
    writer.start(4)
    writer.add_input(4, 1, [D1])
    writer.add_output(4, 0, [D2])
    return writer.finish(4).data


@pytest.mark.parametrize(
    ("inputs", "outputs", "message"),
    [
        (3, 2, "with 2 input channels, and this subtask has 3"),
        (2, 1, "with 2 output channels, and this subtask has 1"),
    ],
)
def test_restoring_with_other_channel_counts_is_refused_because_rescaling_is_unsupported(
    inputs: int, outputs: int, message: str
) -> None:
    with pytest.raises(StateRestoreError, match=f"{message}.*unchanged parallelism"):
        read_channel_state(_one_of_each(), input_channels=inputs, output_channels=outputs)


def test_another_kind_of_file_is_refused() -> None:
    with pytest.raises(StateRestoreError, match="expected a 'channel-state' file"):
        read_channel_state(envelope.encode("subtask-state", {}, b""))


def test_a_damaged_file_is_refused() -> None:
    data = bytearray(_one_of_each())
    data[-1] ^= 0xFF
    with pytest.raises(StateRestoreError, match="checksum"):
        read_channel_state(bytes(data))


def _with_header(**changes: object) -> bytes:
    header, body = envelope.decode(_one_of_each(), CHANNEL_STATE)
    header.update(changes)
    return envelope.encode(CHANNEL_STATE, header, bytes(body))


BAD_HEADERS = [
    pytest.param({"version": 2}, "version 2; this barrierflow reads 1 to 1", id="a newer version"),
    pytest.param({"input_channels": "2"}, "no valid input channel count", id="a count not int"),
    pytest.param({"outputs": None}, "no output channel list", id="a missing channel list"),
    pytest.param(
        {"outputs": []}, "describes 15 bytes, the body holds 30",
        id="frames that do not tile the body",
    ),
    pytest.param(
        {"inputs": [[1, 5, [len(D1)]]]}, "input channel 1 starts at byte 5, expected 0",
        id="an offset that skips bytes",
    ),
    pytest.param(
        {"inputs": [[2, 0, [len(D1)]]]}, "input channel 2 is out of order or not one of the 2",
        id="a channel outside the counts",
    ),
    pytest.param(
        {"inputs": [[1, 0, [len(D1) + len(D2) + 1]]], "outputs": []}, "past the",
        id="frames past the end of the body",
    ),
    pytest.param(
        {"inputs": [[1, 0, [0]]]}, "malformed channel-state input entry", id="an empty frame",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "message"), BAD_HEADERS)
def test_a_header_that_does_not_describe_the_body_is_refused(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(StateRestoreError, match=message):
        read_channel_state(_with_header(**changes))
