"""The record writer and chain outputs: buffering with timestamps, events in order,
watermarks broadcast to every channel, none while the output is IDLE; priority events
(unaligned barriers) and recovered output."""

from __future__ import annotations

from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput, OperatorOutput, RecordWriterOutput
from barrierflow.runtime.elements import CheckpointBarrier, StreamStatus, Watermark
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.channels import OutputChannel
from barrierflow.runtime.network.record_writer import EdgeWriter, RecordWriter
from barrierflow.runtime.partitioners import KeyGroupStreamPartitioner, RebalancePartitioner


class FakeChannel:
    """Records the decoded frames an output channel was asked to send."""

    def __init__(self) -> None:
        self.frames: list = []
        self.backlog = 0

    def send_buffer(self, frame: bytes) -> None:
        self.frames.append(codec.decode(frame))

    def send_event(self, frame: bytes) -> None:
        self.frames.append(codec.decode(frame))


def edge(channels: int, buffer_size: int = 100, partitioner=None):
    fakes = [FakeChannel() for _ in range(channels)]
    return EdgeWriter(partitioner or RebalancePartitioner(), fakes, buffer_size), fakes


def test_a_watermark_flushes_buffered_records_then_goes_to_every_channel():
    writer, (first, second) = edge(2)
    output = RecordWriterOutput([writer])
    output.collect(RecordBatch(["a", "b", "c"], [1, 2, 3]))
    output.emit_watermark(Watermark(3))
    assert first.frames == [RecordBatch(["a", "c"], [1, 3]), Watermark(3)]
    assert second.frames == [RecordBatch(["b"], [2]), Watermark(3)]


def test_records_without_timestamps_joining_a_timestamped_buffer_get_the_marker():
    writer, (channel,) = edge(1)
    writer.emit(RecordBatch(["plain"]))
    writer.emit(RecordBatch(["timed"], [7]))
    writer.emit(RecordBatch(["plain again"]))
    writer.flush()
    assert channel.frames == [
        RecordBatch(["plain", "timed", "plain again"], [NO_TIMESTAMP, 7, NO_TIMESTAMP])
    ]


def test_a_buffer_without_any_timestamp_stays_without_timestamps():
    writer, (channel,) = edge(1, buffer_size=2)
    writer.emit(RecordBatch(["a", "b", "c"]))
    writer.flush()
    assert channel.frames == [RecordBatch(["a", "b", "c"])]  # full buffers flush whole


def test_keyed_routing_keeps_each_timestamp_beside_its_record():
    partitioner = KeyGroupStreamPartitioner(lambda r: r, 128)
    writer, channels = edge(3, partitioner=partitioner)
    values = [f"k{i}" for i in range(30)]
    writer.emit(RecordBatch(values, list(range(30))))
    writer.flush()
    received = [rec for c in channels for frame in c.frames for rec in frame.records()]
    assert sorted(received, key=lambda r: r[1]) == [(v, i) for i, v in enumerate(values)]


def test_an_idle_output_forwards_no_watermark_and_each_status_change_once():
    writer, (channel,) = edge(1)
    output = RecordWriterOutput([writer])
    output.emit_stream_status(StreamStatus.ACTIVE)  # already active: nothing to say
    output.emit_stream_status(StreamStatus.IDLE)
    output.emit_watermark(Watermark(10))
    output.emit_stream_status(StreamStatus.IDLE)
    output.emit_stream_status(StreamStatus.ACTIVE)
    output.emit_watermark(Watermark(11))
    assert channel.frames == [StreamStatus.IDLE, StreamStatus.ACTIVE, Watermark(11)]


def test_side_outputs_get_their_records_and_every_watermark():
    main, side = CollectingOutput(), CollectingOutput()
    output = OperatorOutput(main, {"late": side})
    output.collect(RecordBatch(["m"], [1]))
    output.collect_side("late", RecordBatch(["s"], [0]))
    output.collect_side("unconsumed", RecordBatch(["dropped"]))
    output.emit_watermark(Watermark(5))
    assert main.take() == [("record", "m", 1), ("watermark", 5)]
    assert side.take() == [("record", "s", 0), ("watermark", 5)]


class _Wire:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, frame: bytes) -> None:
        self.sent.append(frame)


def test_a_priority_event_overtakes_queued_output_and_reports_it_per_channel():

    wires = [_Wire(), _Wire(), _Wire()]
    channels = [OutputChannel(wire) for wire in wires]  # type: ignore[arg-type]
    first = EdgeWriter(RebalancePartitioner(), channels[:2], 100)
    second = EdgeWriter(RebalancePartitioner(), channels[2:], 100, source_operator=0)
    writer = RecordWriter([first, second])
    channels[0].add_credit(1)
    channels[2].add_credit(5)
    channels[0].send_buffer(codec.encode_batch(["sent"]))
    channels[0].send_buffer(codec.encode_batch(["queued"]))
    first.emit(RecordBatch(["a", "b"]))  # pending: "a" on channel 0, "b" on channel 1
    second.emit(RecordBatch(["c"]))
    barrier = CheckpointBarrier(3, 30)

    overtaken = writer.broadcast_priority_event(barrier)

    assert overtaken == {
        0: [codec.encode_batch(["queued"]), codec.encode_batch(["a"])],
        1: [codec.encode_batch(["b"])],
    }
    barrier_frame = codec.encode_event(barrier)
    assert wires[0].sent == [codec.encode_batch(["sent"]), barrier_frame]
    assert wires[1].sent == [barrier_frame]
    assert wires[2].sent == [codec.encode_batch(["c"]), barrier_frame]  # had credit: not state


def test_recovered_output_is_sent_per_channel_index_before_new_output():

    wires = [_Wire(), _Wire()]
    channels = [OutputChannel(wire) for wire in wires]  # type: ignore[arg-type]
    writer = RecordWriter([EdgeWriter(RebalancePartitioner(), channels, 100)])
    recovered = codec.encode_batch(["old"])
    watermark = codec.encode_event(Watermark(4))
    writer.send_recovered({1: [recovered, watermark]})
    writer.edges[0].emit(RecordBatch(["x", "y"]))
    writer.flush()
    assert wires[0].sent == [] and wires[1].sent == []  # no credit yet: all queued in order
    channels[1].add_credit(2)
    assert wires[1].sent == [recovered, watermark, codec.encode_batch(["y"])]
