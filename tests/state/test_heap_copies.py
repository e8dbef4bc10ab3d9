"""The copies a heap snapshot's held values are handed out as (`state/heap_copies.py`): equal
to the value, sharing nothing mutable with it, shared references and cycles kept."""

from __future__ import annotations

import threading
from collections import namedtuple
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow.state.heap_copies import copy_value, is_immutable

Point = namedtuple("Point", "x y")


class Counter:
    """A user object without a copy protocol: copied by a pickle round trip."""

    def __init__(self, items: list[int]) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Counter) and other.items == self.items


class SelfCopying:
    """A user object with `__deepcopy__`: copied by it, and only by it."""

    calls = 0

    def __init__(self, items: set[int]) -> None:
        self.items = items

    def __deepcopy__(self, memo: dict[int, Any]) -> SelfCopying:
        SelfCopying.calls += 1
        return SelfCopying(set(self.items))


def mutable_ids(value: Any, seen: set[int] | None = None) -> set[int]:
    """The ids of every mutable object reachable from `value` (builtin containers and user
    objects' attribute values)."""
    seen = set() if seen is None else seen
    if isinstance(value, (list, dict, set)) or hasattr(value, "__dict__"):
        if id(value) in seen:
            return seen
        seen.add(id(value))
    children: Any = ()
    if isinstance(value, dict):
        children = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = value
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        children = vars(value).values()
    for child in children:
        mutable_ids(child, seen)
    return seen


CASES = [
    ("flat list", [1, "a", 2.5, None]),
    ("flat dict", {"a": 1, 2: "b"}),
    ("flat set", {1, 2, 3}),
    ("dict of lists", {"a": [1], "b": [2, 3]}),
    ("list of sets", [[0, 1], [{1, 2}, {3}], 7]),
    ("set of tuples", {(1, "a"), (2, "b")}),
    ("tuple holding a list", (1, [2, 3])),
    ("dict with tuple keys", {(1, 2): [3], (4, 5): {6: [7]}}),
    ("user object", Counter([1, 2])),
    ("list of user objects", [Counter([1]), Counter([2])]),
]


@pytest.mark.parametrize(("name", "value"), CASES, ids=[name for name, _ in CASES])
def test_a_copy_is_equal_and_shares_nothing_mutable(name, value):
    copied = copy_value(value)
    assert copied == value
    assert not mutable_ids(copied) & mutable_ids(value), name


def test_only_values_that_can_change_in_place_are_copied_at_all():
    for value in [(1, ("a", 2.5)), Point(1, "b"), "s", 7, None, b"x"]:
        assert is_immutable(value)  # the backend hands these out uncopied
    for value in [(1, [2]), Point([1], 2), [1], {1}, Counter([])]:
        assert not is_immutable(value)


def test_a_shared_reference_stays_shared_and_a_cycle_stays_a_cycle():
    inner = [1]
    pair = copy_value({"a": inner, "b": [inner, inner]})
    assert pair["a"] is pair["b"][0] is pair["b"][1] and pair["a"] is not inner
    ring: list[Any] = [1]
    ring.append(ring)
    copied = copy_value(ring)
    assert copied[1] is copied and copied is not ring


def test_an_object_with_deepcopy_copies_itself():
    SelfCopying.calls = 0
    value = SelfCopying({1, 2})
    copied = copy_value(value)
    assert SelfCopying.calls == 1
    assert copied.items == {1, 2} and copied.items is not value.items


def test_a_value_that_cannot_be_pickled_is_handed_out_as_it_is():
    lock = threading.Lock()
    assert copy_value(lock) is lock


BUILTINS = st.recursive(
    st.one_of(st.integers(), st.text(max_size=3), st.none(), st.floats(allow_nan=False)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.integers(), st.text(max_size=2)), children, max_size=4),
        st.sets(st.integers(), max_size=4),
        st.tuples(children, children),
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(BUILTINS)
def test_any_builtin_value_is_copied_equal_sharing_nothing_mutable(value):
    copied = copy_value(value)
    assert copied == value
    assert not mutable_ids(copied) & mutable_ids(value)
