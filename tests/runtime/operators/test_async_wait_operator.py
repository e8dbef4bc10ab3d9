"""The AsyncWaitOperator driven directly, with its real asyncio runner: ordered and unordered
output, watermarks as barriers of the unordered queue, backpressure at capacity, and
in-flight records in the snapshot, called again after a restore (no Spark, no sleeps: the
calls wait on events the test sets)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from operator_harness import ManualClock, started

from barrierflow import AsyncDataStream
from barrierflow.functions import AsyncFunction
from barrierflow.runtime.async_io import AsyncWaitSpec, OutputMode
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark
from barrierflow.runtime.operators.async_wait import AsyncWaitOperator
from barrierflow.runtime.operators.base import RestoredState


class Gated(AsyncFunction):
    """Completes the call for `value` once the test releases it: ["<value>!"]."""

    def __init__(self) -> None:
        self.gates: dict[object, threading.Event] = {}
        self.calls: list[object] = []

    def gate(self, value) -> threading.Event:
        return self.gates.setdefault(value, threading.Event())

    async def async_invoke(self, value):
        self.calls.append(value)
        await asyncio.get_running_loop().run_in_executor(None, self.gate(value).wait, 30)
        return [f"{value}!"]


class Immediate(AsyncFunction):
    async def async_invoke(self, value):
        return [f"{value}!"]


def async_operator(function, mode=OutputMode.ORDERED, capacity=10, restored=None):
    spec = AsyncWaitSpec.create(function, timeout=0, capacity=capacity, output_mode=mode)
    operator = AsyncWaitOperator("a", "a", spec)
    started(operator, ManualClock(), restored)
    return operator, operator.output


def drain(operator) -> None:
    """What the task does at the end of input: the maximum watermark drains every call."""
    operator.process_watermark(Watermark(MAX_WATERMARK))


def test_ordered_output_keeps_the_input_order_whatever_order_calls_complete_in():
    function = Gated()
    operator, out = async_operator(function)
    operator.process_batch(RecordBatch(["a", "b", "c"], [1, 2, 3]))
    for value in ("c", "b", "a"):
        function.gate(value).set()
    drain(operator)
    assert out.take() == [
        ("record", "a!", 1),
        ("record", "b!", 2),
        ("record", "c!", 3),
        ("watermark", MAX_WATERMARK),
    ]
    operator.close()


def test_unordered_output_never_moves_a_record_across_a_watermark():
    function = Gated()
    operator, out = async_operator(function, OutputMode.UNORDERED)
    operator.process_batch(RecordBatch(["a", "b"], [1, 2]))
    operator.process_watermark(Watermark(5))
    operator.process_batch(RecordBatch(["c"], [6]))
    function.gate("c").set()
    function.gate("b").set()
    assert operator.next_wakeup() is not None  # calls in flight: the task keeps polling
    function.gate("a").set()
    drain(operator)
    events = out.take()
    assert set(events[:2]) == {("record", "a!", 1), ("record", "b!", 2)}
    assert events[2:] == [("watermark", 5), ("record", "c!", 6), ("watermark", MAX_WATERMARK)]
    assert operator.next_wakeup() is None
    operator.close()


def test_a_full_queue_blocks_the_input_until_a_call_completes():
    function = Gated()
    operator, out = async_operator(function, capacity=1)
    function.gate("a").set()
    operator.process_batch(RecordBatch(["a", "b"]))  # "b" waits until "a" leaves
    assert out.take() == [("record", "a!", None)]
    function.gate("b").set()
    drain(operator)
    assert out.take() == [("record", "b!", None), ("watermark", MAX_WATERMARK)]
    operator.close()


def test_records_in_flight_are_in_the_snapshot_and_called_again_after_a_restore():
    function = Gated()
    operator, out = async_operator(function)
    function.gate("a").set()
    operator.process_batch(RecordBatch(["a"], [1]))
    operator.process_watermark(Watermark(1))  # waits behind "a", which completes
    operator.process_batch(RecordBatch(["b", "c"], [2, 3]))
    operator.process_watermark(Watermark(3))
    snapshot = operator.snapshot_state(1)
    assert snapshot is not None
    for gate in function.gates.values():
        gate.set()
    operator.abort()

    again, out2 = async_operator(
        Immediate(), restored=RestoredState(operator=[(0, snapshot.operator)])
    )
    drain(again)
    before = [e for e in out.take() if e[0] == "record"]
    after = out2.take()
    assert ("record", "b!", 2) in after and ("record", "c!", 3) in after  # were in flight
    # Exactly once across the restore: "a" came out before the snapshot or after it.
    assert before + [e for e in after if e[0] == "record"] == [
        ("record", "a!", 1),
        ("record", "b!", 2),
        ("record", "c!", 3),
    ]
    assert [e for e in after if e[0] == "watermark"][-2:] == [
        ("watermark", 3),
        ("watermark", MAX_WATERMARK),
    ]
    again.close()


def test_ordered_wait_adds_an_async_operator_to_the_pipeline():
    from barrierflow import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    stream = AsyncDataStream.unordered_wait(env.from_collection([1]), Immediate(), 1_000, 5)
    stream.print()
    assert [v.name for v in env.get_job_graph().vertices] == [
        "Collection -> AsyncWait(Unordered) -> Print"
    ]
    with pytest.raises(TypeError):
        AsyncDataStream.ordered_wait(env.from_collection([1]), lambda v: [v], 1_000)
