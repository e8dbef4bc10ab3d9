"""OutputChannel priority events (unaligned barriers) and re-sending recovered output."""

from __future__ import annotations

from barrierflow.runtime.channel_state import ChannelStateWriter, read_channel_state
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier, Watermark
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.channels import OutputChannel

D1, D2, D3 = (codec.encode_batch([n]) for n in (1, 2, 3))
WATERMARK = codec.encode_event(Watermark(42))
BARRIER_1 = codec.encode_event(CheckpointBarrier(1, 1_000))
BARRIER_2 = codec.encode_event(CheckpointBarrier(2, 2_000))
CANCEL_1 = codec.encode_event(CancelCheckpointMarker(1))


class _Recorder:
    """The wire: records every frame written to it."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, frame: bytes) -> None:
        self.sent.append(frame)


def _channel_with_backlog() -> tuple[OutputChannel, _Recorder]:
    """A channel whose receiver granted no credit yet, holding D1, WATERMARK, D2 in its queue."""
    wire = _Recorder()
    channel = OutputChannel(wire)  # type: ignore[arg-type]
    channel.send_buffer(D1)
    channel.send_event(WATERMARK)
    channel.send_buffer(D2)
    assert wire.sent == [] and channel.backlog == 3
    return channel, wire


def test_a_priority_event_is_written_at_once_ahead_of_the_queue_and_without_credit() -> None:
    channel, wire = _channel_with_backlog()
    channel.send_priority_event(BARRIER_2)
    assert wire.sent == [BARRIER_2]
    assert channel.credit == 0


def test_a_priority_event_returns_the_stream_frames_it_overtook_in_order() -> None:
    channel, _ = _channel_with_backlog()
    assert channel.send_priority_event(BARRIER_2) == [D1, WATERMARK, D2]


def test_the_overtaken_frames_stay_queued_and_are_still_sent_in_order_after_the_barrier() -> None:
    channel, wire = _channel_with_backlog()
    channel.send_priority_event(BARRIER_2)
    assert channel.backlog == 3
    channel.add_credit(1)
    assert wire.sent == [BARRIER_2, D1, WATERMARK]
    channel.add_credit(5)
    assert wire.sent == [BARRIER_2, D1, WATERMARK, D2] and channel.credit == 4


def test_queued_barriers_and_markers_are_overtaken_but_are_not_channel_state() -> None:
    wire = _Recorder()
    channel = OutputChannel(wire)  # type: ignore[arg-type]
    channel.send_buffer(D1)
    channel.send_event(BARRIER_1)
    channel.send_event(CANCEL_1)
    channel.send_buffer(D2)
    assert channel.send_priority_event(BARRIER_2) == [D1, D2]
    channel.add_credit(2)
    assert wire.sent == [BARRIER_2, D1, BARRIER_1, CANCEL_1, D2]


def test_a_priority_event_with_nothing_queued_overtakes_nothing() -> None:
    wire = _Recorder()
    channel = OutputChannel(wire)  # type: ignore[arg-type]
    channel.add_credit(1)
    channel.send_buffer(D1)
    assert channel.send_priority_event(BARRIER_1) == []
    assert wire.sent == [D1, BARRIER_1] and channel.backlog == 0


def test_recovered_output_is_resent_before_new_output_with_buffers_under_credit() -> None:
    # Checkpoint 2 persisted what its barrier overtook; a restored task re-sends exactly that.
    writer = ChannelStateWriter(input_channels=0, output_channels=1)
    writer.start(2)
    channel, _ = _channel_with_backlog()
    writer.add_output(2, 0, channel.send_priority_event(BARRIER_2))
    recovered = read_channel_state(writer.finish(2).data).outputs[0]

    wire = _Recorder()
    restored = OutputChannel(wire)  # type: ignore[arg-type]
    restored.send_recovered(recovered)
    restored.send_buffer(D3)
    assert wire.sent == [] and restored.backlog == 4
    restored.add_credit(1)
    # the watermark is an event: it needs no credit and follows D1 at once
    assert wire.sent == [D1, WATERMARK]
    restored.add_credit(2)
    assert wire.sent == [D1, WATERMARK, D2, D3] and restored.credit == 0
