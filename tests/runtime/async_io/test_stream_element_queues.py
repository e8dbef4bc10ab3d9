"""The ordered and unordered stream element queues, event by event and as properties.

Scenario tables: each step feeds one event to a fresh queue and lists exactly what may
leave the queue right after it, and nothing else (Flink's `OrderedStreamElementQueueTest`,
`UnorderedStreamElementQueueTest` and `StreamElementQueueTest`, as data). A record "x"
completes with the result "X"; `W(n)` is a watermark.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow.errors import AsyncOperationFailedError
from barrierflow.runtime.async_io.queue import (
    CompletedRecord,
    OrderedStreamElementQueue,
    QueueEntry,
    Record,
    StreamElementQueue,
    UnorderedStreamElementQueue,
)
from barrierflow.runtime.elements import Watermark

W = Watermark
QUEUES = [OrderedStreamElementQueue, UnorderedStreamElementQueue]


@dataclass(frozen=True)
class Step:
    """One event and what must leave the queue right after it."""

    action: str  # "put", "wm" or "done"
    arg: str | int
    expected: tuple[str | Watermark, ...]

    def __str__(self) -> str:
        return f"{self.action}({self.arg})"


def put(value: str, *expected: str | Watermark) -> Step:
    return Step("put", value, expected)


def wm(timestamp: int, *expected: str | Watermark) -> Step:
    return Step("wm", timestamp, expected)


def done(value: str, *expected: str | Watermark) -> Step:
    return Step("done", value, expected)


def drain(queue: StreamElementQueue) -> list[str | Watermark]:
    """Everything the queue lets out now, results shown by their single result."""
    out: list[str | Watermark] = []
    while queue.has_completed_head():
        element = queue.poll()
        if isinstance(element, CompletedRecord):
            (result,) = element.results
            out.append(result)
        else:
            assert isinstance(element, Watermark)
            out.append(element)
    assert queue.poll() is None, "poll() returned an element has_completed_head() denied"
    return out


def play(queue: StreamElementQueue, steps: list[Step]) -> None:
    entries: dict[str, QueueEntry] = {}
    for number, step in enumerate(steps, 1):
        if step.action == "put":
            entry = queue.try_put(Record(step.arg, timestamp=0))
            assert entry is not None
            entries[str(step.arg)] = entry
        elif step.action == "wm":
            assert queue.try_put(Watermark(int(step.arg))) is not None
        else:
            queue.complete(entries[str(step.arg)], [str(step.arg).upper()])
        emitted = drain(queue)
        assert emitted == list(step.expected), f"step {number} ({step}) let out {emitted}"


ORDERED_SCENARIOS = {
    "records leave in input order whatever order they complete in": [
        put("a"),
        put("b"),
        put("c"),
        done("c"),
        done("a", "A"),
        done("b", "B", "C"),
    ],
    "a watermark waits for the records before it": [
        put("a"),
        wm(5),
        put("b"),
        done("b"),
        done("a", "A", W(5), "B"),
    ],
    "a watermark at the head leaves at once": [
        wm(5, W(5)),
        put("a"),
        wm(6),
        done("a", "A", W(6)),
    ],
    "records after a watermark wait for it": [
        put("a"),
        wm(5),
        put("b"),
        wm(6),
        put("c"),
        done("c"),
        done("b"),
        done("a", "A", W(5), "B", W(6), "C"),
    ],
}

UNORDERED_SCENARIOS = {
    "records leave in completion order": [
        put("a"),
        put("b"),
        put("c"),
        done("c", "C"),
        done("a", "A"),
        done("b", "B"),
    ],
    "a record after a watermark waits for it": [
        put("a"),
        wm(5),
        put("b"),
        done("b"),
        done("a", "A", W(5), "B"),
    ],
    "a watermark after a drained segment leaves at once": [
        put("a"),
        done("a", "A"),
        wm(5, W(5)),
        put("b"),
        done("b", "B"),
    ],
    "a watermark at the head of an empty queue leaves at once": [
        wm(5, W(5)),
        wm(6, W(6)),
    ],
    "consecutive watermarks leave together once the records before them left": [
        put("a"),
        wm(5),
        wm(6),
        put("b"),
        done("b"),
        done("a", "A", W(5), W(6), "B"),
    ],
    "records reorder within their segment only": [
        put("a"),
        wm(5),
        put("b"),
        put("c"),
        wm(6),
        put("d"),
        done("d"),
        done("c"),
        done("a", "A", W(5), "C"),
        done("b", "B", W(6), "D"),
    ],
    "a completed segment waits for the segment before it": [
        put("a"),
        wm(5),
        put("b"),
        wm(6),
        done("b"),
        put("c"),
        done("c"),
        done("a", "A", W(5), "B", W(6), "C"),
    ],
}


@pytest.mark.parametrize("steps", ORDERED_SCENARIOS.values(), ids=ORDERED_SCENARIOS.keys())
def test_ordered_queue_scenario(steps: list[Step]) -> None:
    play(OrderedStreamElementQueue(capacity=10), steps)


@pytest.mark.parametrize("steps", UNORDERED_SCENARIOS.values(), ids=UNORDERED_SCENARIOS.keys())
def test_unordered_queue_scenario(steps: list[Step]) -> None:
    play(UnorderedStreamElementQueue(capacity=10), steps)


# ---- capacity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("queue_class", QUEUES)
def test_a_full_queue_refuses_records_and_watermarks_until_an_element_leaves(
    queue_class: type[OrderedStreamElementQueue],
) -> None:
    queue = queue_class(capacity=3)
    first = queue.try_put(Record("a"))
    assert queue.try_put(Watermark(1)) is not None
    assert queue.try_put(Record("b")) is not None
    assert queue.size == 3

    assert queue.try_put(Record("c")) is None
    assert queue.try_put(Watermark(2)) is None
    assert queue.size == 3, "a refused element must not be added"

    assert first is not None
    queue.complete(first, ["A"])
    assert queue.poll() == CompletedRecord(("A",), None)
    assert queue.size == 2
    assert queue.try_put(Record("c")) is not None
    assert queue.try_put(Record("d")) is None


@pytest.mark.parametrize("queue_class", QUEUES)
def test_completing_a_record_frees_no_space_before_it_leaves(
    queue_class: type[OrderedStreamElementQueue],
) -> None:
    queue = queue_class(capacity=2)
    a = queue.try_put(Record("a"))
    b = queue.try_put(Record("b"))
    assert a is not None and b is not None
    queue.complete(b, ["B"])
    assert queue.try_put(Record("c")) is None
    assert queue.size == 2 and not queue.is_empty


@pytest.mark.parametrize("queue_class", QUEUES)
@pytest.mark.parametrize("capacity", [0, -1, 1.5, True])
def test_a_queue_needs_a_positive_int_capacity(
    queue_class: type[OrderedStreamElementQueue], capacity: object
) -> None:
    with pytest.raises(ValueError, match="capacity"):
        queue_class(capacity)  # type: ignore[arg-type]


@pytest.mark.parametrize("queue_class", QUEUES)
def test_a_queue_takes_only_records_and_watermarks(
    queue_class: type[OrderedStreamElementQueue],
) -> None:
    with pytest.raises(TypeError, match="Record or a Watermark"):
        queue_class(1).try_put("a bare value")  # type: ignore[arg-type]


# ---- results and timestamps --------------------------------------------------------------------


@pytest.mark.parametrize("queue_class", QUEUES)
def test_results_carry_the_timestamp_of_their_input_record(
    queue_class: type[OrderedStreamElementQueue],
) -> None:
    queue = queue_class(capacity=4)
    entry = queue.try_put(Record("a", timestamp=17))
    assert entry is not None
    queue.complete(entry, iter(["x", "y"]))
    assert queue.poll() == CompletedRecord(("x", "y"), 17)


@pytest.mark.parametrize("queue_class", QUEUES)
def test_a_record_with_no_results_leaves_as_an_empty_completion(
    queue_class: type[OrderedStreamElementQueue],
) -> None:
    queue = queue_class(capacity=4)
    entry = queue.try_put(Record("a", timestamp=3))
    assert entry is not None
    queue.complete(entry, [])
    assert queue.poll() == CompletedRecord((), 3)
    assert queue.is_empty


@pytest.mark.parametrize("queue_class", QUEUES)
def test_an_entry_cannot_be_completed_twice(queue_class: type[OrderedStreamElementQueue]) -> None:
    queue = queue_class(capacity=4)
    entry = queue.try_put(Record("a"))
    assert entry is not None
    queue.complete(entry, ["A"])
    with pytest.raises(ValueError, match="completed already"):
        queue.complete(entry, ["again"])


@pytest.mark.parametrize("queue_class", QUEUES)
def test_a_watermark_entry_cannot_be_completed(
    queue_class: type[OrderedStreamElementQueue],
) -> None:
    queue = queue_class(capacity=4)
    entry = queue.try_put(Watermark(3))
    assert entry is not None
    with pytest.raises(ValueError, match="watermark"):
        queue.complete(entry, ["x"])


@pytest.mark.parametrize("queue_class", QUEUES)
def test_a_failed_call_fails_naming_the_record_and_chaining_the_cause(
    queue_class: type[OrderedStreamElementQueue],
) -> None:
    queue = queue_class(capacity=4)
    entry = queue.try_put(Record({"user": 42}))
    assert entry is not None
    cause = ConnectionError("connection reset")
    with pytest.raises(AsyncOperationFailedError, match=r"\{'user': 42\}") as failure:
        queue.complete_exceptionally(entry, cause)
    assert failure.value.__cause__ is cause
    assert not queue.has_completed_head(), "a failed record must never be emitted"


# ---- snapshot contents -------------------------------------------------------------------------


def test_the_ordered_snapshot_holds_every_element_not_yet_emitted_in_input_order() -> None:
    queue = OrderedStreamElementQueue(capacity=10)
    a = queue.try_put(Record("a", 1))
    queue.try_put(Watermark(1))
    b = queue.try_put(Record("b", 2))
    queue.try_put(Record("c", 3))
    assert a is not None and b is not None
    queue.complete(b, ["B"])  # completed but held back behind "a": still in the snapshot
    assert queue.values() == [Record("a", 1), Watermark(1), Record("b", 2), Record("c", 3)]

    queue.complete(a, ["A"])
    drain(queue)
    assert queue.values() == [Record("c", 3)]


def test_the_unordered_snapshot_holds_segments_in_order_and_records_in_input_order() -> None:
    queue = UnorderedStreamElementQueue(capacity=10)
    a = queue.try_put(Record("a", 1))
    b = queue.try_put(Record("b", 2))
    queue.try_put(Watermark(2))
    c = queue.try_put(Record("c", 3))
    d = queue.try_put(Record("d", 4))
    assert a is not None and b is not None and c is not None and d is not None
    queue.complete(d, ["D"])  # completed, but behind the watermark: not emitted
    queue.complete(b, ["B"])
    assert drain(queue) == ["B"]
    assert queue.values() == [Record("a", 1), Watermark(2), Record("c", 3), Record("d", 4)]


@pytest.mark.parametrize("queue_class", QUEUES)
def test_the_snapshot_is_a_copy(queue_class: type[OrderedStreamElementQueue]) -> None:
    queue = queue_class(capacity=4)
    queue.try_put(Record("a"))
    values = queue.values()
    values.clear()
    assert queue.values() == [Record("a")]


# ---- properties --------------------------------------------------------------------------------

Token = tuple[str, int]  # ("r", record id) or ("w", watermark timestamp)


def run_random_program(
    queue: StreamElementQueue, data: st.DataObject
) -> tuple[list[Token], list[Token]]:
    """Feed a random mix of puts, watermarks and completions, draining after each event,
    then complete what is left in a random order. Returns the input and the output."""
    inputs: list[Token] = []
    outputs: list[Token] = []
    in_flight: dict[int, QueueEntry] = {}
    next_id = 0
    next_watermark = 0
    for _ in range(data.draw(st.integers(0, 60), label="events")):
        choice = data.draw(st.sampled_from(["record", "record", "watermark", "complete"]))
        if choice == "complete" and in_flight:
            record_id = data.draw(st.sampled_from(sorted(in_flight)))
            queue.complete(in_flight.pop(record_id), [record_id])
        elif choice == "watermark":
            next_watermark += 1
            if queue.try_put(Watermark(next_watermark)) is not None:
                inputs.append(("w", next_watermark))
        else:
            entry = queue.try_put(Record(next_id))
            if entry is not None:
                inputs.append(("r", next_id))
                in_flight[next_id] = entry
                next_id += 1
        outputs.extend(_drain_tokens(queue))
        assert queue.size == len(inputs) - len(outputs)
    for record_id in data.draw(st.permutations(sorted(in_flight)), label="last completions"):
        queue.complete(in_flight.pop(record_id), [record_id])
        outputs.extend(_drain_tokens(queue))
    assert queue.is_empty and queue.values() == []
    return inputs, outputs


def _drain_tokens(queue: StreamElementQueue) -> list[Token]:
    tokens: list[Token] = []
    while queue.has_completed_head():
        element = queue.poll()
        if isinstance(element, CompletedRecord):
            tokens.append(("r", element.results[0]))
        else:
            assert isinstance(element, Watermark)
            tokens.append(("w", element.timestamp))
    return tokens


def segment_of_each(tokens: list[Token]) -> dict[Token, int]:
    """For every token, how many watermarks came before it."""
    segments: dict[Token, int] = {}
    watermarks = 0
    for token in tokens:
        segments[token] = watermarks
        if token[0] == "w":
            watermarks += 1
    return segments


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 8), data=st.data())
def test_the_ordered_queue_emits_exactly_its_input_in_order(
    capacity: int, data: st.DataObject
) -> None:
    queue = OrderedStreamElementQueue(capacity)
    inputs, outputs = run_random_program(queue, data)
    assert outputs == inputs


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 8), data=st.data())
def test_the_unordered_queue_never_moves_a_record_across_a_watermark(
    capacity: int, data: st.DataObject
) -> None:
    queue = UnorderedStreamElementQueue(capacity)
    inputs, outputs = run_random_program(queue, data)
    assert sorted(outputs) == sorted(inputs) and len(set(outputs)) == len(outputs)
    assert segment_of_each(outputs) == segment_of_each(inputs)
    assert [t for t in outputs if t[0] == "w"] == [t for t in inputs if t[0] == "w"]


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 8), data=st.data())
def test_the_unordered_queue_holds_back_a_completed_record_only_behind_a_watermark(
    capacity: int, data: st.DataObject
) -> None:
    """After a drain, every completed record still queued sits behind a queued watermark."""
    queue = UnorderedStreamElementQueue(capacity)
    in_flight: dict[int, QueueEntry] = {}
    queued: list[Token] = []  # what the queue holds, in input order
    for step in range(data.draw(st.integers(0, 60))):
        choice = data.draw(st.sampled_from(["record", "record", "watermark", "complete"]))
        if choice == "complete" and in_flight:
            record_id = data.draw(st.sampled_from(sorted(in_flight)))
            queue.complete(in_flight.pop(record_id), [record_id])
        elif choice == "watermark":
            if queue.try_put(Watermark(step)) is not None:
                queued.append(("w", step))
        else:
            entry = queue.try_put(Record(step))
            if entry is not None:
                in_flight[step] = entry
                queued.append(("r", step))
        for token in _drain_tokens(queue):
            queued.remove(token)
        first_watermark = next((i for i, t in enumerate(queued) if t[0] == "w"), len(queued))
        assert first_watermark > 0 or not queued, "a watermark at the head was not emitted"
        assert all(record_id in in_flight for _, record_id in queued[:first_watermark]), (
            "a completed record before the first queued watermark was not emitted"
        )


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(1, 8), data=st.data())
def test_the_ordered_queue_holds_back_nothing_once_its_head_is_complete(
    capacity: int, data: st.DataObject
) -> None:
    queue = OrderedStreamElementQueue(capacity)
    in_flight: dict[int, QueueEntry] = {}
    for step in range(data.draw(st.integers(0, 60))):
        choice = data.draw(st.sampled_from(["record", "watermark", "complete"]))
        if choice == "complete" and in_flight:
            record_id = data.draw(st.sampled_from(sorted(in_flight)))
            queue.complete(in_flight.pop(record_id), [record_id])
        elif choice == "watermark":
            queue.try_put(Watermark(step))
        else:
            entry = queue.try_put(Record(step))
            if entry is not None:
                in_flight[step] = entry
        _drain_tokens(queue)
        head = queue.values()[:1]
        assert head == [] or (isinstance(head[0], Record) and head[0].value in in_flight)
