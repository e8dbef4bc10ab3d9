"""ChainInputs: a task's input channels into its first operator, one valve per operator input."""

from __future__ import annotations

from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_inputs import ChainInputs
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.operators.base import TwoInputStreamOperator
from barrierflow.runtime.operators.stateless import MapOperator

IDLE, ACTIVE = StreamStatus.IDLE, StreamStatus.ACTIVE


def one_input(channels: int):
    head, out = MapOperator("m", "m", lambda x: x), CollectingOutput()
    head.output = out
    return ChainInputs(head, [0] * channels), out


def test_records_pass_through_and_the_watermark_is_the_minimum_over_channels():
    inputs, out = one_input(3)
    inputs.records(1, RecordBatch(["a"], [4]))
    inputs.watermark(0, Watermark(10))
    inputs.watermark(1, Watermark(7))
    assert out.take() == [("record", "a", 4)]
    inputs.watermark(2, Watermark(8))
    assert out.take() == [("watermark", 7)]
    inputs.watermark(1, Watermark(12))
    assert out.take() == [("watermark", 8)]


def test_an_ended_channel_no_longer_holds_the_watermark_back():
    inputs, out = one_input(2)
    inputs.watermark(0, Watermark(10))
    inputs.end_of_partition(1)
    assert out.take() == [("watermark", 10)]
    inputs.end_of_partition(0)
    assert out.take() == [("watermark", MAX_WATERMARK)]


def test_a_channel_that_ends_while_idle_still_counts_as_the_maximum():
    inputs, out = one_input(2)
    inputs.stream_status(1, IDLE)
    inputs.watermark(0, Watermark(5))
    inputs.end_of_partition(1)
    inputs.end_of_partition(0)
    assert out.take() == [("watermark", 5), ("watermark", MAX_WATERMARK)]


def test_the_operator_goes_idle_when_every_channel_is_idle():
    inputs, out = one_input(2)
    inputs.stream_status(0, IDLE)
    inputs.stream_status(1, IDLE)
    inputs.stream_status(1, ACTIVE)
    assert out.take() == [("status", IDLE), ("status", ACTIVE)]


class Both(TwoInputStreamOperator):
    """Tags each record with its input; watermarks reach it combined."""

    def process_batch1(self, batch):
        self.output.collect(RecordBatch([(1, v) for v in batch.values], batch.timestamps))

    def process_batch2(self, batch):
        self.output.collect(RecordBatch([(2, v) for v in batch.values], batch.timestamps))


def two_inputs(channel_inputs):
    head, out = Both("two", "two"), CollectingOutput()
    head.setup(None, out)  # type: ignore[arg-type]
    return ChainInputs(head, channel_inputs), out


def test_a_two_input_operator_gets_each_inputs_records_and_the_minimum_of_their_watermarks():
    # Channels 0 and 2 feed input 1; channel 1 feeds input 2.
    inputs, out = two_inputs([0, 1, 0])
    inputs.records(0, RecordBatch(["x"]))
    inputs.records(1, RecordBatch(["y"]))
    inputs.watermark(0, Watermark(20))
    inputs.watermark(1, Watermark(5))
    assert out.take() == [("record", (1, "x"), None), ("record", (2, "y"), None)]
    inputs.watermark(2, Watermark(30))  # input 1 is now at 20
    assert out.take() == [("watermark", 5)]
    inputs.watermark(1, Watermark(25))
    assert out.take() == [("watermark", 20)]


def test_an_idle_input_of_a_two_input_operator_does_not_hold_the_other_back():
    inputs, out = two_inputs([0, 1])
    inputs.watermark(0, Watermark(50))
    inputs.stream_status(1, IDLE)
    assert out.take() == [("watermark", 50)]
    inputs.stream_status(0, IDLE)
    assert out.take() == [("status", IDLE)]
