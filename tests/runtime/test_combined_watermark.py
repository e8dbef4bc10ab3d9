"""IndexedCombinedWatermarkStatus: the minimum over a two-input operator's inputs.

Scenario table: one event per step, with the exact output it must cause.
"""

from __future__ import annotations

import pytest

from barrierflow.runtime.combined_watermark import IndexedCombinedWatermarkStatus
from barrierflow.runtime.elements import StreamStatus, Watermark
from barrierflow.runtime.watermarks import MIN_WATERMARK

IDLE, ACTIVE = StreamStatus.IDLE, StreamStatus.ACTIVE


class Recorder:
    def __init__(self) -> None:
        self.events: list = []

    def emit_watermark(self, watermark: Watermark) -> None:
        self.events.append(watermark.timestamp)

    def emit_stream_status(self, status: StreamStatus) -> None:
        self.events.append(status)


def wm(timestamp: int, input_index: int):
    return ("wm", timestamp, input_index)


def status(value: StreamStatus, input_index: int):
    return ("status", value, input_index)


# Each step: (event, what it emits).
SCENARIOS = {
    "nothing until both inputs sent a watermark": [
        (wm(10, 0), []),
        (wm(20, 0), []),
        (wm(5, 1), [5]),
    ],
    "the minimum grows as the slower input advances": [
        (wm(10, 0), []),
        (wm(3, 1), [3]),
        (wm(8, 1), [8]),
        (wm(15, 1), [10]),
        (wm(12, 0), [12]),
    ],
    "a watermark that does not grow its input is ignored": [
        (wm(10, 0), []),
        (wm(10, 1), [10]),
        (wm(7, 0), []),
        (wm(10, 0), []),
    ],
    "an idle input does not hold the minimum back": [
        (wm(10, 0), []),
        (status(IDLE, 1), [10]),
        (wm(20, 0), [20]),
    ],
    "both idle emits IDLE once, one back emits ACTIVE first": [
        (wm(10, 0), []),
        (status(IDLE, 0), []),
        (status(IDLE, 1), [IDLE]),
        (status(IDLE, 1), []),
        (wm(30, 1), []),
        (status(ACTIVE, 1), [ACTIVE, 30]),
    ],
    "an input back from idle behind the combined watermark never moves it back": [
        (wm(10, 0), []),
        (wm(50, 1), [10]),
        (status(IDLE, 0), [50]),
        (status(ACTIVE, 0), []),
        (wm(40, 0), []),
        (wm(60, 0), []),
        (wm(70, 1), [60]),
    ],
    "watermarks of an idle input count once it is back": [
        (wm(10, 0), []),
        (status(IDLE, 1), [10]),
        (wm(5, 1), []),
        (status(ACTIVE, 1), []),
        (wm(20, 0), []),
        (wm(15, 1), [15]),
    ],
}


@pytest.mark.parametrize("steps", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_the_combination_emits_what_the_scenario_says(steps):
    recorder = Recorder()
    combined = IndexedCombinedWatermarkStatus(2, recorder)
    for number, ((kind, value, input_index), expected) in enumerate(steps):
        if kind == "wm":
            combined.input_watermark(Watermark(value), input_index)
        else:
            combined.input_stream_status(value, input_index)
        assert recorder.events == expected, f"step {number}: {kind} {value} on {input_index}"
        recorder.events.clear()


def test_three_inputs_take_the_minimum_of_all_three():
    recorder = Recorder()
    combined = IndexedCombinedWatermarkStatus(3, recorder)
    combined.input_watermark(Watermark(7), 0)
    combined.input_watermark(Watermark(9), 1)
    assert recorder.events == []
    combined.input_watermark(Watermark(8), 2)
    assert recorder.events == [7]
    assert combined.combined_watermark == 7


def test_it_starts_active_at_the_minimum_watermark():
    combined = IndexedCombinedWatermarkStatus(2, Recorder())
    assert combined.combined_watermark == MIN_WATERMARK and not combined.is_idle


def test_an_input_index_out_of_range_is_an_error():
    combined = IndexedCombinedWatermarkStatus(2, Recorder())
    with pytest.raises(IndexError):
        combined.input_watermark(Watermark(1), 2)
