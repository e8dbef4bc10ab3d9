"""The map, flat_map and filter harnesses, keyed (keyed state in `open`, as
`KeyedStream.map` gives it) and not, event by event; a keyed map's state follows its keys
from 2 to 3 subtasks; a failure names the user's function, not the runtime's wrapper."""

from __future__ import annotations

import pytest

from barrierflow.errors import UserFunctionError
from barrierflow.functions import FilterFunction, FlatMapFunction, MapFunction
from barrierflow.state import ValueStateDescriptor
from barrierflow.testing import (
    FilterFunctionHarness,
    FlatMapFunctionHarness,
    KeyedFilterFunctionHarness,
    KeyedFlatMapFunctionHarness,
    KeyedMapFunctionHarness,
    MapFunctionHarness,
    ParallelHarness,
)

COUNT = ValueStateDescriptor("count")


class Numbered(MapFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def map(self, value):
        self.count.update((self.count.value() or 0) + 1)
        return (value, self.count.value())


class Repeat(FlatMapFunction):
    """Emits a word as often as it was seen so far."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def flat_map(self, value):
        self.count.update((self.count.value() or 0) + 1)
        yield from [value] * self.count.value()


class FirstOnly(FilterFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def filter(self, value):
        first = self.count.value() is None
        self.count.update(1)
        return first


WORDS = [("a", 1), ("b", 2), ("a", 3), ("a", 4), ("b", 5)]

# harness, records out after each word
SCENARIOS = {
    "keyed map": (
        lambda: KeyedMapFunctionHarness(Numbered(), str),
        [[(("a", 1), 1)], [(("b", 1), 2)], [(("a", 2), 3)], [(("a", 3), 4)], [(("b", 2), 5)]],
    ),
    "keyed flat_map": (
        lambda: KeyedFlatMapFunctionHarness(Repeat(), str),
        [[("a", 1)], [("b", 2)], [("a", 3)] * 2, [("a", 4)] * 3, [("b", 5)] * 2],
    ),
    "keyed filter": (
        lambda: KeyedFilterFunctionHarness(FirstOnly(), str),
        [[("a", 1)], [("b", 2)], [], [], []],
    ),
    "map": (
        lambda: MapFunctionHarness(str.upper),
        [[("A", 1)], [("B", 2)], [("A", 3)], [("A", 4)], [("B", 5)]],
    ),
    "flat_map": (
        lambda: FlatMapFunctionHarness(lambda w: [w, w]),
        [[(w, t)] * 2 for w, t in WORDS],
    ),
    "filter": (
        lambda: FilterFunctionHarness(lambda w: w == "b"),
        [[], [("b", 2)], [], [], [("b", 5)]],
    ),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_function_event_by_event(name):
    make, expected = SCENARIOS[name]
    harness = make()
    for step, ((word, timestamp), out) in enumerate(zip(WORDS, expected, strict=True)):
        harness.process_element(word, timestamp)
        assert harness.extract_output_records() == out, f"{name}, step {step}"
        harness.clear_output()
    harness.close()


def test_a_keyed_maps_state_follows_its_keys_to_another_parallelism():
    words = [f"w{n % 7}" for n in range(30)]
    one = KeyedMapFunctionHarness(Numbered(), str)
    for word in words:
        one.process_element(word)
    two = ParallelHarness(lambda **s: KeyedMapFunctionHarness(Numbered(), str, **s), 2)
    for word in words[:13]:
        two.process_element(word)
    three = ParallelHarness(
        lambda **s: KeyedMapFunctionHarness(Numbered(), str, **s), 3, restore_from=two.snapshot()
    )
    for word in words[13:]:
        three.process_element(word)
    assert sorted(two.extract_output_values() + three.extract_output_values()) == sorted(
        one.extract_output_values()
    )


def test_a_failing_keyed_map_is_named_by_the_users_function():
    class Fragile(MapFunction):
        def map(self, value):
            return value["missing"]

    harness = KeyedMapFunctionHarness(Fragile(), str)
    with pytest.raises(UserFunctionError, match=r"^Fragile raised TypeError: .* in map\)$"):
        harness.process_element("a")
