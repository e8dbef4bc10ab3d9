"""AsyncWaitLogic: event by event with calls completed by hand, then with real asyncio.

The hand-driven tests play Flink's `AsyncWaitOperatorTest` cases as events; the asyncio
tests run hundreds of records with random delays through an `AsyncFunctionRunner` and
check the order guarantees, the capacity bound and exactly-once output across a restore.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest
from async_harness import Mailbox, RecordingOutput

from barrierflow.core.async_function import AsyncFunction
from barrierflow.errors import AsyncOperationFailedError, StateRestoreError
from barrierflow.runtime.async_io.queue import Record
from barrierflow.runtime.async_io.runner import AsyncFunctionRunner
from barrierflow.runtime.async_io.wait_logic import (
    AsyncWaitLogic,
    decode_elements,
    encode_elements,
)
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark

W = Watermark


class ManualCalls:
    """An `invoke` whose calls the test completes by hand, in any order it likes."""

    def __init__(self) -> None:
        self.started: list[Any] = []
        self._pending: dict[Any, tuple[Callable[[list[Any]], None], Callable[..., None]]] = {}

    def __call__(self, value: Any, on_complete: Any, on_error: Any) -> None:
        self.started.append(value)
        self._pending[value] = (on_complete, on_error)

    def complete(self, value: Any, results: list[Any] | None = None) -> None:
        on_complete, _ = self._pending.pop(value)
        on_complete([value.upper()] if results is None else results)

    def fail(self, value: Any, error: BaseException) -> None:
        _, on_error = self._pending.pop(value)
        on_error(error)

    @property
    def pending(self) -> list[Any]:
        return list(self._pending)


def manual(mode: str, capacity: int = 10) -> tuple[AsyncWaitLogic, ManualCalls, RecordingOutput]:
    calls, output = ManualCalls(), RecordingOutput()
    factory = AsyncWaitLogic.ordered if mode == "ordered" else AsyncWaitLogic.unordered
    return factory(capacity, calls, output), calls, output


def r(value: str, timestamp: int) -> tuple[str, str, int]:
    """An emitted result: the value upper-cased, with the input's timestamp."""
    return ("r", value.upper(), timestamp)


# ---- event by event ----------------------------------------------------------------------------


def test_ordered_mode_emits_in_input_order_with_watermarks_in_place() -> None:
    logic, calls, output = manual("ordered")
    logic.process_element("a", 1)
    logic.process_element("b", 2)
    logic.process_watermark(W(2))
    logic.process_element("c", 3)
    assert calls.started == ["a", "b", "c"] and output.pop_all() == []

    calls.complete("c")
    calls.complete("b")
    assert output.pop_all() == []
    calls.complete("a")
    assert output.pop_all() == [r("a", 1), r("b", 2), W(2), r("c", 3)]


def test_unordered_mode_emits_on_completion_but_not_across_a_watermark() -> None:
    logic, calls, output = manual("unordered")
    logic.process_element("a", 1)
    logic.process_element("b", 2)
    logic.process_watermark(W(2))
    logic.process_element("c", 3)

    calls.complete("b")
    assert output.pop_all() == [r("b", 2)]
    calls.complete("c")
    assert output.pop_all() == []
    calls.complete("a")
    assert output.pop_all() == [r("a", 1), W(2), r("c", 3)]


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_a_watermark_with_nothing_before_it_is_forwarded_at_once(mode: str) -> None:
    logic, _, output = manual(mode)
    logic.process_watermark(W(5))
    assert output.pop_all() == [W(5)]


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_every_result_of_a_record_is_emitted_with_its_timestamp(mode: str) -> None:
    logic, calls, output = manual(mode)
    logic.process_element("a", 7)
    calls.complete("a", ["x", "y", "z"])
    assert output.pop_all() == [("r", "x", 7), ("r", "y", 7), ("r", "z", 7)]


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_a_full_queue_holds_the_input_and_refuses_more_until_a_completion_makes_room(
    mode: str,
) -> None:
    # Issue 9, defect 4: a full queue must not wait on the mailbox; it holds and returns.
    logic, calls, output = manual(mode, capacity=2)
    logic.process_element("a", 1)
    logic.process_element("b", 2)
    assert logic.accepts_input()
    logic.process_element("c", 3)  # returns at once: "c" is held, not called
    assert calls.started == ["a", "b"] and not logic.accepts_input()
    assert logic.snapshot_state() == [Record("a", 1), Record("b", 2), Record("c", 3)]

    calls.complete("b")
    if mode == "ordered":
        # "b" completing frees no room (it waits behind "a"): "c" stays held.
        assert calls.started == ["a", "b"] and not logic.accepts_input()
        assert output.pop_all() == []
        calls.complete("a")
        assert output.pop_all() == [r("a", 1), r("b", 2)]
    else:
        assert output.pop_all() == [r("b", 2)]
    assert calls.started == ["a", "b", "c"] and logic.accepts_input()
    assert logic.queue.size <= 2


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_held_input_keeps_its_order_with_watermarks_and_later_watermarks_merge(
    mode: str,
) -> None:
    logic, calls, output = manual(mode, capacity=1)
    logic.process_element("a", 1)
    logic.process_element("b", 2)
    logic.process_watermark(W(2))
    logic.process_watermark(W(3))  # held next to W(2): says all W(2) says
    logic.process_element("c", 4)
    assert logic.held == 3 and not logic.accepts_input()
    assert logic.snapshot_state() == [Record("a", 1), Record("b", 2), W(3), Record("c", 4)]
    for value in ("a", "b", "c"):
        calls.complete(value)
    assert output.pop_all() == [r("a", 1), r("b", 2), W(3), r("c", 4)]
    assert logic.is_drained and logic.accepts_input()


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_after_the_end_of_input_input_is_refused_until_every_element_has_left(mode: str) -> None:
    logic, calls, output = manual(mode)
    logic.process_element("a", 1)
    logic.process_watermark(W(1))
    logic.process_element("b", 2)
    logic.process_watermark(W(MAX_WATERMARK))
    assert not logic.accepts_input() and not logic.is_drained
    calls.complete("b")
    assert not logic.accepts_input()
    calls.complete("a")
    assert output.pop_all() == [r("a", 1), W(1), r("b", 2), W(MAX_WATERMARK)]
    assert logic.is_drained and logic.accepts_input()
    logic.process_watermark(W(MAX_WATERMARK))  # replayed after a restore: dropped
    assert output.pop_all() == []


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_a_failed_call_fails_the_task_when_its_mail_runs(mode: str) -> None:
    logic, calls, output = manual(mode)
    logic.process_element("a", 1)
    logic.process_element("b", 2)
    with pytest.raises(AsyncOperationFailedError, match="'b'") as failure:
        calls.fail("b", ConnectionError("reset"))
    assert isinstance(failure.value.__cause__, ConnectionError)
    assert output.pop_all() == []


# ---- snapshot and restore, by hand -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_a_restore_reissues_the_snapshot_in_queue_order_and_the_output_stays_exactly_once(
    mode: str,
) -> None:
    before, calls, output = manual(mode)
    before.process_element("a", 1)
    before.process_element("b", 2)
    before.process_watermark(W(2))
    before.process_element("c", 3)
    calls.complete("b")
    calls.complete("c")
    emitted_before_checkpoint = output.pop_all()
    snapshot = before.snapshot_state()
    # ... the task fails here; "a" never completes in this attempt.

    if mode == "ordered":
        assert emitted_before_checkpoint == []
        assert snapshot == [Record("a", 1), Record("b", 2), W(2), Record("c", 3)]
    else:
        assert emitted_before_checkpoint == [r("b", 2)]
        assert snapshot == [Record("a", 1), W(2), Record("c", 3)]

    after, calls_after, output_after = manual(mode)
    after.restore_state(decode_elements(encode_elements(snapshot)))
    assert calls_after.started == [e.value for e in snapshot if isinstance(e, Record)]
    for value in reversed(calls_after.pending):
        calls_after.complete(value)

    total = emitted_before_checkpoint + output_after.pop_all()
    if mode == "ordered":
        assert total == [r("a", 1), r("b", 2), W(2), r("c", 3)]
    else:
        # "b" left before the checkpoint; after the restore "c" waits for the watermark.
        assert total == [r("b", 2), r("a", 1), W(2), r("c", 3)]


def test_an_unordered_restore_emits_each_result_once_in_total() -> None:
    before, calls, output = manual("unordered")
    for value, timestamp in [("a", 1), ("b", 2), ("c", 3)]:
        before.process_element(value, timestamp)
    calls.complete("b")
    emitted_before_checkpoint = output.pop_all()
    snapshot = before.snapshot_state()

    after, calls_after, output_after = manual("unordered")
    after.restore_state(snapshot)
    for value in list(calls_after.pending):
        calls_after.complete(value)

    total = emitted_before_checkpoint + output_after.pop_all()
    assert sorted(total) == [r("a", 1), r("b", 2), r("c", 3)]


def test_a_restore_larger_than_the_capacity_holds_the_rest_and_returns_at_once() -> None:
    after, calls, output = manual("ordered", capacity=2)
    snapshot = [Record("a", 1), Record("b", 2), W(2), Record("c", 3)]
    after.restore_state(snapshot)
    assert calls.started == ["a", "b"] and not after.accepts_input()
    assert after.snapshot_state() == snapshot  # a checkpoint now holds all of it again
    for value in ("a", "b", "c"):
        calls.complete(value)
    assert output.pop_all() == [r("a", 1), r("b", 2), W(2), r("c", 3)]
    assert after.accepts_input()


def test_an_unknown_snapshot_element_is_a_restore_error() -> None:
    logic, _, _ = manual("ordered")
    with pytest.raises(StateRestoreError):
        logic.restore_state(["not an element"])  # type: ignore[list-item]
    with pytest.raises(StateRestoreError):
        decode_elements([["x", 1]])


def test_snapshot_elements_encode_to_plain_lists_and_back() -> None:
    elements = [Record({"k": 1}, 5), W(5), Record("b", None)]
    encoded = encode_elements(elements)
    assert encoded == [["r", {"k": 1}, 5], ["w", 5], ["r", "b", None]]
    assert decode_elements(encoded) == elements


# ---- real asyncio with random delays -----------------------------------------------------------


class RandomDelays(AsyncFunction):
    """Sleeps a random, per-value delay; counts the calls in flight (on the loop thread)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0

    async def async_invoke(self, value: int) -> list[Any]:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.rng.choice([0, 0, 0.0005, 0.002, 0.004]))
        finally:
            self.in_flight -= 1
        return [value * 10]


def random_input(seed: int, records: int) -> list[Any]:
    """Records 0..records-1 (timestamp = value) with a watermark after about one in eight."""
    rng = random.Random(seed)
    items: list[Any] = []
    for value in range(records):
        items.append(value)
        if rng.random() < 0.125:
            items.append(W(value))
    return items


def expected_output(items: list[Any]) -> list[Any]:
    return [W(i.timestamp) if isinstance(i, Watermark) else ("r", i * 10, i) for i in items]


def feed(logic: AsyncWaitLogic, mailbox: Mailbox, items: list[Any]) -> None:
    """What the task does: run pending mails between inputs, and only mails while the
    logic refuses input."""
    for item in items:
        mailbox.run_pending()
        while not logic.accepts_input():
            mailbox.run_one()
        if isinstance(item, Watermark):
            logic.process_watermark(item)
        else:
            logic.process_element(item, item)


def finish(logic: AsyncWaitLogic, mailbox: Mailbox) -> None:
    """End of input as the task sees it: the maximum watermark, then mails until drained."""
    feed(logic, mailbox, [W(MAX_WATERMARK)])
    while not logic.accepts_input():
        mailbox.run_one()
    assert logic.is_drained


def segments(tokens: list[Any]) -> list[list[Any]]:
    """The output cut at watermarks: each segment's records, sorted, then the watermark."""
    cut: list[list[Any]] = [[]]
    for token in tokens:
        if isinstance(token, Watermark):
            cut[-1].sort()
            cut[-1].append(token)
            cut.append([])
        else:
            cut[-1].append(token)
    cut[-1].sort()
    return cut


def run_with_asyncio(mode: str, seed: int, capacity: int) -> tuple[list[Any], list[Any], int]:
    items = random_input(seed, records=400)
    mailbox, output = Mailbox(), RecordingOutput()
    function = RandomDelays(seed)
    runner = AsyncFunctionRunner(function, mailbox, timeout_ms=10_000)
    runner.start()
    factory = AsyncWaitLogic.ordered if mode == "ordered" else AsyncWaitLogic.unordered
    logic = factory(capacity, runner.invoke, output)
    try:
        feed(logic, mailbox, items)
        finish(logic, mailbox)
    finally:
        runner.close()
    assert function.calls == 400
    assert 1 < function.max_in_flight <= capacity
    assert output.emitted[-1] == W(MAX_WATERMARK)
    return items, output.emitted[:-1], function.max_in_flight


@pytest.mark.parametrize("seed", range(5))
def test_ordered_wait_with_random_delays_emits_exactly_the_input_order(seed: int) -> None:
    items, emitted, _ = run_with_asyncio("ordered", seed, capacity=16)
    assert emitted == expected_output(items)


@pytest.mark.parametrize("seed", range(5))
def test_unordered_wait_with_random_delays_reorders_only_between_watermarks(seed: int) -> None:
    items, emitted, _ = run_with_asyncio("unordered", seed, capacity=16)
    expected = expected_output(items)
    assert segments(emitted) == segments(expected)
    assert len(emitted) == len(expected)


def test_unordered_wait_with_random_delays_does_reorder() -> None:
    """The reordering test above checks something: the output is not simply in input order."""
    reordered = 0
    for seed in range(5):
        items, emitted, _ = run_with_asyncio("unordered", seed, capacity=16)
        reordered += emitted != expected_output(items)
    assert reordered > 0


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_no_more_calls_than_the_capacity_are_ever_in_flight(mode: str) -> None:
    _, _, max_in_flight = run_with_asyncio(mode, seed=7, capacity=4)
    assert max_in_flight <= 4


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
@pytest.mark.parametrize("seed", range(3))
def test_a_restore_from_a_mid_run_snapshot_gives_exactly_once_output(mode: str, seed: int) -> None:
    items = random_input(seed, records=300)
    cut = len(items) // 2
    factory = AsyncWaitLogic.ordered if mode == "ordered" else AsyncWaitLogic.unordered

    # First attempt: take in half the input, snapshot at a barrier, run on, then fail.
    mailbox, output = Mailbox(), RecordingOutput()
    runner = AsyncFunctionRunner(RandomDelays(seed), mailbox, timeout_ms=10_000)
    runner.start()
    logic = factory(8, runner.invoke, output)
    feed(logic, mailbox, items[:cut])
    emitted_before_checkpoint = list(output.emitted)
    snapshot = encode_elements(logic.snapshot_state())
    feed(logic, mailbox, items[cut : cut + 20])  # output after the barrier is discarded
    runner.close()
    mailbox.discard_pending()

    # Second attempt: restore and replay the input after the barrier.
    mailbox, output = Mailbox(), RecordingOutput()
    runner = AsyncFunctionRunner(RandomDelays(seed + 100), mailbox, timeout_ms=10_000)
    runner.start()
    logic = factory(8, runner.invoke, output)
    try:
        logic.restore_state(decode_elements(snapshot))
        feed(logic, mailbox, items[cut:])
        finish(logic, mailbox)
    finally:
        runner.close()

    assert output.emitted[-1] == W(MAX_WATERMARK)
    total = emitted_before_checkpoint + output.emitted[:-1]
    if mode == "ordered":
        assert total == expected_output(items)
    else:
        assert segments(total) == segments(expected_output(items))
        assert len(total) == len(expected_output(items))


def test_a_failing_call_surfaces_as_an_error_of_the_mail_that_delivers_it() -> None:
    async def fail_on_three(value: int) -> list[int]:
        if value == 3:
            raise ValueError("no such user: 3")
        return [value]

    mailbox, output = Mailbox(), RecordingOutput()
    runner = AsyncFunctionRunner(fail_on_three, mailbox)
    runner.start()
    logic = AsyncWaitLogic.ordered(10, runner.invoke, output)
    try:
        for value in range(5):  # room for all: no mail runs yet
            logic.process_element(value, value)
        with pytest.raises(AsyncOperationFailedError, match="3") as failure:
            finish(logic, mailbox)
    finally:
        runner.close()
    assert isinstance(failure.value.__cause__, ValueError)
    assert ("r", 3, 3) not in output.emitted
