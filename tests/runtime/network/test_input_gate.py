"""The input gate returns one credit per consumed record batch, none for events."""

from __future__ import annotations

from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import StreamStatus, Watermark
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.input_gate import InputGate


class FakeConnection:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)


def test_every_consumed_batch_returns_one_credit_and_events_return_none():
    gate = InputGate(1)
    conn = FakeConnection()
    gate.connected(0, conn)  # type: ignore[arg-type]
    for element in [RecordBatch([1]), Watermark(3), StreamStatus.IDLE, RecordBatch([2], [5])]:
        gate.received(0, element)
    polled = [gate.poll(lambda channel: False) for _ in range(4)]
    assert [element for _, element in polled] == [
        RecordBatch([1]),
        Watermark(3),
        StreamStatus.IDLE,
        RecordBatch([2], [5]),
    ]
    assert conn.sent == [codec.encode_credit(1)] * 2


def test_queued_frames_are_the_received_bytes_in_order():
    gate = InputGate(2)
    batch = codec.encode_batch([1, 2])
    watermark = codec.encode_event(Watermark(7))
    gate.received(0, codec.decode(batch), batch)
    gate.received(1, Watermark(3), codec.encode_event(Watermark(3)))
    gate.received(0, codec.decode(watermark), watermark)
    assert gate.queued_frames(0) == [batch, watermark]
    assert gate.queued_frames(1) == [codec.encode_event(Watermark(3))]


def test_an_element_queued_without_its_frame_is_encoded_again():
    gate = InputGate(1)
    gate.received(0, RecordBatch([1], [5]))
    gate.received(0, StreamStatus.IDLE)
    assert gate.queued_frames(0) == [
        codec.encode_batch([1], [5]),
        codec.encode_event(StreamStatus.IDLE),
    ]


def test_recovered_elements_come_first_in_their_order_and_return_no_credit():
    gate = InputGate(1)
    conn = FakeConnection()
    gate.connected(0, conn)  # type: ignore[arg-type]
    gate.received(0, RecordBatch(["new"]), codec.encode_batch(["new"]))
    recovered = [codec.encode_batch(["old-1"]), codec.encode_batch(["old-2"])]
    gate.prepend_recovered(0, [(codec.decode(frame), frame) for frame in recovered])
    assert gate.queued_frames(0) == [*recovered, codec.encode_batch(["new"])]
    assert gate.poll(lambda channel: False) == (0, RecordBatch(["old-1"]))
    assert gate.poll(lambda channel: False) == (0, RecordBatch(["old-2"]))
    assert conn.sent == []
    assert gate.poll(lambda channel: False) == (0, RecordBatch(["new"]))
    assert conn.sent == [codec.encode_credit(1)]
    assert gate.poll(lambda channel: False) is None
