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
