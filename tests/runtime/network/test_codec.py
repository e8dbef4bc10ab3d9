"""Channel frames round-trip: record batches with and without timestamps, and every event."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import (
    END_OF_PARTITION,
    MAX_WATERMARK,
    CancelCheckpointMarker,
    CheckpointBarrier,
    StreamStatus,
    Watermark,
)
from barrierflow.runtime.network import codec

LONGS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.mark.parametrize(
    "event",
    [
        Watermark(0),
        Watermark(-(2**63)),
        Watermark(MAX_WATERMARK),
        Watermark(1_700_000_000_123),
        StreamStatus.IDLE,
        StreamStatus.ACTIVE,
        CheckpointBarrier(7, 99),
        CancelCheckpointMarker(3),
        END_OF_PARTITION,
    ],
    ids=repr,
)
def test_every_event_survives_a_round_trip(event):
    assert codec.decode(codec.encode_event(event)) == event


def test_watermark_and_status_frames_are_small_and_never_pickled():
    assert codec.encode_event(Watermark(5)) == b"W" + (5).to_bytes(8, "big")
    assert codec.encode_event(StreamStatus.IDLE) == b"S\x01"
    assert codec.encode_event(StreamStatus.ACTIVE) == b"S\x00"


def test_a_batch_without_timestamps_stays_a_plain_data_frame():
    frame = codec.encode_batch(["a", ("b", 1)])
    assert frame[:1] == codec.DATA
    assert codec.decode(frame) == RecordBatch(["a", ("b", 1)], None)


@given(st.lists(st.tuples(st.text(max_size=5), LONGS), max_size=50))
def test_a_batch_with_timestamps_survives_a_round_trip(records):
    values = [value for value, _ in records]
    timestamps = [timestamp for _, timestamp in records]
    frame = codec.encode_batch(values, timestamps)
    assert frame[:1] == codec.TIMESTAMPED_DATA
    assert codec.decode(frame) == RecordBatch(values, timestamps)


def test_a_record_without_a_timestamp_keeps_the_marker_inside_a_timestamped_batch():
    decoded = codec.decode(codec.encode_batch(["x", "y"], [NO_TIMESTAMP, 4]))
    assert list(decoded.records()) == [("x", None), ("y", 4)]


def test_a_frame_whose_counts_disagree_is_corruption():
    frame = bytearray(codec.encode_batch(["x", "y"], [1, 2]))
    frame[1:5] = (1).to_bytes(4, "big")  # claims one timestamp, then the values' pickle
    with pytest.raises(StreamCorruptionError):
        codec.decode(bytes(frame[:13]) + codec.encode_batch(["x", "y"])[1:])


def test_an_unknown_frame_type_is_corruption():
    with pytest.raises(StreamCorruptionError, match="unknown frame"):
        codec.decode(b"Q")


def test_a_savepoint_barrier_keeps_its_flag_through_the_frame():
    frame = codec.encode_event(CheckpointBarrier(9, 1_234, is_savepoint=True))
    assert len(frame) == 18
    assert codec.decode(frame) == CheckpointBarrier(9, 1_234, is_savepoint=True)
    assert codec.decode(codec.encode_event(CheckpointBarrier(9, 1_234))).is_savepoint is False


def test_a_barrier_frame_of_an_older_release_without_flags_is_still_read():
    old_frame = codec.BARRIER + struct.pack("!qq", 5, 77)
    assert len(old_frame) == 17
    assert codec.decode(old_frame) == CheckpointBarrier(5, 77)


def test_a_final_barrier_keeps_its_flag_through_the_frame():
    barrier = CheckpointBarrier(3, 8, is_final=True)
    assert codec.decode(codec.encode_event(barrier)) == barrier
    assert barrier.must_align and not CheckpointBarrier(3, 8).must_align
