"""The AsyncWaitOperator driven directly, with its real asyncio runner and a test mailbox:
ordered and unordered output, watermarks as barriers of the unordered queue, backpressure
without blocking, in-flight and held records in the snapshot, called again after a
restore, and the end of input drained through mails (no Spark, no sleeps: the calls wait
on events the test sets, and their outcomes run only when the test runs the mails).

Issue 9, defect 4: the operator used to wait up to 300 s on its own queue whenever the
element queue was full, at the end of input and on restore, so the task's mailbox (and
with it checkpoints, cancellation, credit) stood still. The tests marked `never_blocks`
hang on such an operator and fail by their timeout.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from support.clocks import ManualClock
from support.operator_harness import QueuedMailbox, started

from barrierflow import AsyncDataStream
from barrierflow.functions import AsyncFunction
from barrierflow.runtime.async_io import AsyncWaitSpec, OutputMode
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark
from barrierflow.runtime.operators.async_wait import AsyncWaitOperator
from barrierflow.runtime.operators.base import RestoredState

never_blocks = pytest.mark.timeout(30)
"""The old operator blocked here for up to 300 s; this one must return at once."""


class Gated(AsyncFunction):
    """Completes the call for `value` once the test releases it: ["<value>!"]."""

    def __init__(self) -> None:
        self.gates: dict[object, threading.Event] = {}
        self.calls: list[object] = []
        self.released = False

    def gate(self, value) -> threading.Event:
        gate = self.gates.setdefault(value, threading.Event())
        if self.released:
            gate.set()
        return gate

    async def async_invoke(self, value):
        self.calls.append(value)
        await asyncio.get_running_loop().run_in_executor(None, self.gate(value).wait, 30)
        return [f"{value}!"]

    def release_all(self) -> None:
        """Complete every call, those in flight and those still to come."""
        self.released = True
        for gate in list(self.gates.values()):
            gate.set()


class Immediate(AsyncFunction):
    async def async_invoke(self, value):
        return [f"{value}!"]


def async_operator(function, mode=OutputMode.ORDERED, capacity=10, restored=None, timeout=0):
    spec = AsyncWaitSpec.create(function, timeout=timeout, capacity=capacity, output_mode=mode)
    operator = AsyncWaitOperator("a", "a", spec)
    mailbox = QueuedMailbox()
    started(operator, ManualClock(), restored, mailbox=mailbox)
    return operator, operator.output, mailbox


def end_input(operator, mailbox) -> None:
    """What the task does at the end of input: the maximum watermark, then only mails
    until the operator accepts input again."""
    operator.process_watermark(Watermark(MAX_WATERMARK))
    mailbox.run_until(operator.accepts_input)


def test_ordered_output_keeps_the_input_order_whatever_order_calls_complete_in():
    function = Gated()
    operator, out, mailbox = async_operator(function)
    operator.process_batch(RecordBatch(["a", "b", "c"], [1, 2, 3]))
    for value in ("c", "b", "a"):
        function.gate(value).set()
    end_input(operator, mailbox)
    assert out.take() == [
        ("record", "a!", 1),
        ("record", "b!", 2),
        ("record", "c!", 3),
        ("watermark", MAX_WATERMARK),
    ]
    operator.close()


def test_unordered_output_never_moves_a_record_across_a_watermark():
    function = Gated()
    operator, out, mailbox = async_operator(function, OutputMode.UNORDERED)
    operator.process_batch(RecordBatch(["a", "b"], [1, 2]))
    operator.process_watermark(Watermark(5))
    operator.process_batch(RecordBatch(["c"], [6]))
    function.gate("c").set()
    function.gate("b").set()
    assert mailbox.run_one() and mailbox.run_one()  # two completions arrive as mails
    assert out.take() == [("record", "b!", 2)]  # "c" waits behind the watermark
    function.gate("a").set()
    end_input(operator, mailbox)
    assert out.take() == [
        ("record", "a!", 1),
        ("watermark", 5),
        ("record", "c!", 6),
        ("watermark", MAX_WATERMARK),
    ]
    assert operator.next_wakeup() is None  # no polling: completions are mails
    operator.close()


@never_blocks
@pytest.mark.parametrize("mode", [OutputMode.ORDERED, OutputMode.UNORDERED])
def test_a_full_queue_returns_at_once_and_refuses_input_until_a_completion_mail(mode):
    function = Gated()  # no call completes until the test says so
    operator, out, mailbox = async_operator(function, mode, capacity=2)
    operator.process_batch(RecordBatch(["a", "b", "c", "d"]))  # returns: "c", "d" are held
    assert not operator.accepts_input()
    assert out.take() == [] and mailbox.pending == 0

    function.gate("a").set()
    mailbox.run_one()  # "a" completes: room for "c", still not for "d"
    assert out.take() == [("record", "a!", None)]
    assert not operator.accepts_input()
    function.gate("b").set()
    mailbox.run_one()
    assert out.take() == [("record", "b!", None)]
    assert operator.accepts_input()  # "c" and "d" are in the queue: nothing held

    function.release_all()
    end_input(operator, mailbox)
    rest = [e[1] for e in out.take()]
    if mode == OutputMode.UNORDERED:
        rest[:2] = sorted(rest[:2])  # "c" and "d" leave in completion order
    assert rest == ["c!", "d!", MAX_WATERMARK]
    assert function.calls == ["a", "b", "c", "d"]
    operator.close()


@never_blocks
def test_each_completion_is_one_mail_and_results_leave_in_input_order():
    function = Gated()
    operator, out, mailbox = async_operator(function, capacity=3)
    operator.process_batch(RecordBatch(["a", "b", "c"], [1, 2, 3]))
    for value in ("c", "b"):
        function.gate(value).set()
        assert mailbox.run_one() == "async-io a: a call completed"
        assert out.take() == []  # held behind "a"
    function.gate("a").set()
    mailbox.run_one()
    assert out.take() == [("record", "a!", 1), ("record", "b!", 2), ("record", "c!", 3)]
    assert mailbox.pending == 0
    operator.close()


@never_blocks
@pytest.mark.parametrize("mode", [OutputMode.ORDERED, OutputMode.UNORDERED])
def test_a_snapshot_holds_in_flight_and_held_records_and_a_restore_calls_them_again(mode):
    function = Gated()
    operator, out, mailbox = async_operator(function, mode, capacity=2)
    operator.process_batch(RecordBatch(["a", "b"], [1, 2]))
    operator.process_watermark(Watermark(2))
    operator.process_batch(RecordBatch(["c"], [3]))  # a, b in flight; W(2), c held
    assert not operator.accepts_input()
    snapshot = operator.snapshot_state(1)  # taken while the queue is full: no waiting
    assert snapshot is not None
    assert out.take() == []
    function.release_all()
    operator.abort()
    mailbox.run_until(lambda: mailbox.pending == 0)  # stale outcomes change nothing
    assert out.take() == []

    again, out2, mailbox2 = async_operator(
        Gated(), mode, capacity=2, restored=RestoredState(operator=[(0, snapshot.operator)])
    )
    restored_function = again.spec.async_function
    assert not again.accepts_input()  # open() returned with the rest held, calls running
    assert again.snapshot_state(2).operator == snapshot.operator  # nothing lost meanwhile
    restored_function.release_all()
    end_input(again, mailbox2)
    assert out2.take() == [
        ("record", "a!", 1),
        ("record", "b!", 2),
        ("watermark", 2),
        ("record", "c!", 3),
        ("watermark", MAX_WATERMARK),
    ]
    assert restored_function.calls == ["a", "b", "c"]
    again.close()


@never_blocks
def test_the_end_of_input_is_drained_through_mails_and_close_needs_it_drained():
    function = Gated()
    operator, out, mailbox = async_operator(function)
    operator.process_batch(RecordBatch(["a", "b"], [1, 2]))
    operator.process_watermark(Watermark(MAX_WATERMARK))  # returns at once
    assert not operator.accepts_input()
    assert out.take() == []
    with pytest.raises(RuntimeError, match="still held"):
        operator.close()  # the task never does this: it waits for accepts_input()
    operator, out, mailbox = async_operator(function := Gated())
    operator.process_batch(RecordBatch(["a", "b"], [1, 2]))
    operator.process_watermark(Watermark(MAX_WATERMARK))
    function.gate("b").set()
    mailbox.run_one()
    assert not operator.accepts_input() and out.take() == []
    function.gate("a").set()
    mailbox.run_one()
    assert operator.accepts_input()
    assert out.take() == [
        ("record", "a!", 1),
        ("record", "b!", 2),
        ("watermark", MAX_WATERMARK),
    ]
    operator.close()


class SlowWithFallback(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(30)
        return [value]

    def timeout(self, value):
        return [f"{value}: timed out"]


@never_blocks
def test_a_timed_out_call_delivers_its_fallback_as_a_mail():
    operator, out, mailbox = async_operator(SlowWithFallback(), capacity=1, timeout=20)
    operator.process_batch(RecordBatch(["a", "b"]))
    assert not operator.accepts_input()
    mailbox.run_until(operator.accepts_input)
    end_input(operator, mailbox)
    assert out.take() == [
        ("record", "a: timed out", None),
        ("record", "b: timed out", None),
        ("watermark", MAX_WATERMARK),
    ]
    operator.close()


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
