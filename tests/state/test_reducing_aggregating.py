"""ReducingState and AggregatingState in keyed functions (`get_reducing_state`,
`get_aggregating_state`): add, get and clear per key, through snapshot and restore, on
the heap backend and, where it is built, the on-disk one; and through a keyed process
operator driven directly, with a TTL on its manual processing-time clock."""

from __future__ import annotations

import operator as op
from collections.abc import Iterator
from typing import Any

import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow.errors import ConfigurationError
from barrierflow.functions import AggregateFunction, KeyedProcessFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.keyed import KeyedProcessOperator
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.state import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from barrierflow.state.handles import keyed_state_handle
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange


class Average(AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator: tuple[int, int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


def _kinds() -> list[str]:
    try:
        from barrierflow.state.backends import create_keyed_backend  # noqa: F401
        from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend  # noqa: F401
    except ImportError:
        return ["heap"]
    return ["heap", "rocksdb"]


@pytest.fixture(params=_kinds())
def backends(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    made: list[Any] = []

    def make() -> Any:
        if request.param == "heap":
            backend: Any = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
        else:
            from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
            from barrierflow.state.backends import create_keyed_backend

            folder = tmp_path / f"db{len(made)}"
            folder.mkdir()
            backend = create_keyed_backend(
                EmbeddedRocksDBStateBackend(), KeyGroupRange(0, 127), 128, folder
            )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        if hasattr(backend, "dispose"):
            backend.dispose()


def snapshot_bytes(snapshot: Any) -> bytes:
    """A backend's snapshot (or an operator snapshot's keyed part) as canonical bytes."""
    if isinstance(snapshot, bytes):
        return snapshot
    try:
        return snapshot.write(None)
    finally:
        snapshot.release()


def test_add_get_and_clear_per_key(backends: Any) -> None:
    backend = backends()
    total = keyed_state_handle(backend, ReducingStateDescriptor("sum", op.add), None)
    average = keyed_state_handle(backend, AggregatingStateDescriptor("avg", Average()), None)
    backend.set_current_key("a")
    assert (total.get(), average.get()) == (None, None)
    for value in (1, 2, 6):
        total.add(value)
        average.add(value)
    backend.set_current_key("b")
    total.add(10)
    average.add(10)
    assert (total.get(), average.get()) == (10, 10.0)
    backend.set_current_key("a")
    assert (total.get(), average.get()) == (9, 3.0)
    total.clear()
    average.clear()
    assert (total.get(), average.get()) == (None, None)
    average.add(4)  # starts again from create_accumulator()
    assert average.get() == 4.0
    backend.set_current_key("b")
    assert (total.get(), average.get()) == (10, 10.0)


def test_none_cannot_be_added(backends: Any) -> None:
    backend = backends()
    backend.set_current_key("a")
    with pytest.raises(ValueError, match="None"):
        keyed_state_handle(backend, ReducingStateDescriptor("sum", op.add), None).add(None)
    with pytest.raises(ValueError, match="None"):
        keyed_state_handle(backend, AggregatingStateDescriptor("avg", Average()), None).add(None)


def test_they_are_stored_as_value_state_and_survive_snapshot_and_restore(backends: Any) -> None:
    backend = backends()
    total = keyed_state_handle(backend, ReducingStateDescriptor("sum", op.add), None)
    average = keyed_state_handle(backend, AggregatingStateDescriptor("avg", Average()), None)
    for key in range(20):
        backend.set_current_key(key)
        total.add(key)
        total.add(1)
        average.add(key)
        average.add(key + 2)
    data = snapshot_bytes(backend.snapshot())
    restored = backends()
    restored.restore([data])
    total = keyed_state_handle(restored, ReducingStateDescriptor("sum", op.add), None)
    average = keyed_state_handle(restored, AggregatingStateDescriptor("avg", Average()), None)
    for key in range(20):
        restored.set_current_key(key)
        assert (total.get(), average.get()) == (key + 1, key + 1.0)
    restored.set_current_key(3)
    # stored as value state: the folded value and the accumulator
    assert restored.get_value_state(ValueStateDescriptor("sum")).value() == 4
    assert restored.get_value_state(ValueStateDescriptor("avg")).value() == (8, 2)


def test_an_aggregating_descriptor_needs_an_aggregate_function() -> None:
    with pytest.raises(ConfigurationError, match="create_accumulator, add, get_result"):
        AggregatingStateDescriptor("avg", lambda a, b: a + b)


# ---- through the runtime context of a keyed process operator -------------------------------


class Stats(KeyedProcessFunction):
    """Per key: the sum (reducing state) and the average (aggregating state) of the values
    seen; a TTL of 100 ms on the average. A record (key, None) clears both."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_reducing_state(ReducingStateDescriptor("sum", op.add))
        averages = AggregatingStateDescriptor("avg", Average())
        averages.enable_time_to_live(StateTtlConfig.new_builder(100).build())
        self.average = runtime_context.get_aggregating_state(averages)

    def process_element(self, value: Any, ctx: Any) -> Any:
        key, amount = value
        if amount is None:
            self.total.clear()
            self.average.clear()
            return
        self.total.add(amount)
        self.average.add(amount)
        yield (key, self.total.get(), self.average.get())


def stats_operator(clock: ManualClock, restored: RestoredState | None = None) -> Any:
    operator = KeyedProcessOperator("kp", "kp", lambda r: r[0], Stats())
    started(operator, clock, restored)
    return operator


def records(*pairs: tuple[Any, Any]) -> RecordBatch:
    return RecordBatch(list(pairs))


def test_a_keyed_function_gets_reducing_and_aggregating_state_with_a_ttl() -> None:
    clock = ManualClock(1_000)
    operator = stats_operator(clock)
    operator.process_batch(records(("a", 2), ("b", 5), ("a", 4)))
    clock.advance(99)
    operator.process_batch(records(("a", 6)))
    clock.advance(100)  # a's average was written at 1_099: expired at 1_199; b's at 1_000
    operator.process_batch(records(("a", 1), ("b", 1), ("b", None), ("b", 7)))
    assert [r for kind, r, _ in operator.output.take() if kind == "record"] == [
        ("a", 2, 2.0),
        ("b", 5, 5.0),
        ("a", 6, 3.0),
        ("a", 12, 4.0),
        ("a", 13, 1.0),  # the sum never expires, the average started again
        ("b", 6, 1.0),
        ("b", 7, 7.0),
    ]

    snapshot = operator.snapshot_state(1)
    assert snapshot is not None
    restored = RestoredState(keyed=[snapshot_bytes(snapshot.keyed)])
    clock.advance(50)
    again = stats_operator(clock, restored)
    clock.advance(49)  # a's and b's averages were written at 1_199: live until 1_298
    again.process_batch(records(("a", 3), ("b", 3)))
    clock.advance(100)
    again.process_batch(records(("a", 0)))
    assert [r for kind, r, _ in again.output.take() if kind == "record"] == [
        ("a", 16, 2.0),
        ("b", 10, 5.0),
        ("a", 16, 0.0),
    ]


def test_one_name_cannot_be_two_kinds_of_state_in_one_function() -> None:
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
    operator = KeyedProcessOperator("kp", "kp", lambda r: r[0], Stats())
    started(operator, ManualClock())
    context = TaskRuntimeContext(operator.context, backend)
    context.get_reducing_state(ReducingStateDescriptor("x", op.add))
    assert context.get_reducing_state(ReducingStateDescriptor("x", op.add)) is (
        context.get_reducing_state(ReducingStateDescriptor("x", op.add))
    )
    with pytest.raises(ConfigurationError, match="give each state its own name"):
        context.get_aggregating_state(AggregatingStateDescriptor("x", Average()))
    with pytest.raises(ConfigurationError, match="expected a ReducingStateDescriptor"):
        context.get_reducing_state(ValueStateDescriptor("y"))


# ---- per-window state ------------------------------------------------------------------------


def test_window_state_has_aggregating_state_that_merges_with_the_accumulators() -> None:
    from barrierflow.runtime.windowing.partitioned_state import (
        WindowKeyedStateStore,
        merge_namespaces,
    )
    from barrierflow.runtime.windowing.window_state import InMemoryWindowState

    access = InMemoryWindowState()
    descriptor = AggregatingStateDescriptor("avg", Average())
    first = WindowKeyedStateStore(access, "k", "w1").get_aggregating_state(descriptor)
    second = WindowKeyedStateStore(access, "k", "w2").get_aggregating_state(descriptor)
    first.add(1)
    first.add(3)
    second.add(8)
    assert (first.get(), second.get()) == (2.0, 8.0)
    merge_namespaces(access, descriptor, "k", "w1", ["w2"])
    assert (first.get(), second.get()) == (4.0, None)
    first.clear()
    assert first.get() is None
    with pytest.raises(ConfigurationError, match="expected a AggregatingStateDescriptor"):
        WindowKeyedStateStore(access, "k", "w1").get_aggregating_state(
            ReducingStateDescriptor("r", op.add)
        )
