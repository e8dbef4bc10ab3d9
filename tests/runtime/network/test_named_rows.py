"""A batch of one plain named tuple class crosses a channel as plain tuples and arrives as
the same named tuples; any other batch is pickled as it was."""

from __future__ import annotations

import collections
import copyreg
import pickle
from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow.nexmark.model import Bid
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.named_rows import pickle_values, rebuild

Pair = collections.namedtuple("Pair", "key count")


class Reading(NamedTuple):
    sensor: str
    value: float = 0.0

    def doubled(self) -> float:
        return self.value * 2


class WithAttributes(Pair):  # no __slots__: instances have a __dict__
    pass


class Doubling(Pair):
    __slots__ = ()

    def __new__(cls, key, count):
        return super().__new__(cls, key, count * 2)


class Reduced(Pair):
    __slots__ = ()

    def __reduce__(self):
        return (Pair, ("reduced", 0))


class Registered(Pair):
    __slots__ = ()


copyreg.pickle(Registered, lambda value: (Pair, ("registered", 0)))


def is_sent_plain(values: list) -> bool:
    """Whether the pickle names `rebuild` (the batch went as plain tuples)."""
    return b"rebuild" in pickle_values(values)


@pytest.mark.parametrize(
    "values",
    [
        [Pair("a", 1), Pair("b", 2)],
        [Reading("s", 1.5), Reading("t")],
        [Bid(1, 2, 3, "channel", "url", 4, "extra")],
    ],
    ids=["namedtuple", "typing.NamedTuple", "nexmark bid"],
)
def test_a_batch_of_one_plain_named_tuple_class_goes_as_tuples_and_comes_back_equal(values):
    assert is_sent_plain(values)
    back = pickle.loads(pickle_values(values))
    assert back == values
    assert [type(value) for value in back] == [type(value) for value in values]


def test_methods_and_defaults_of_a_typed_named_tuple_still_work_after_the_trip():
    (reading,) = pickle.loads(pickle_values([Reading("s", 2.0)]))
    assert reading.doubled() == 4.0 and reading._replace(value=1.0) == Reading("s", 1.0)


@pytest.mark.parametrize(
    "values",
    [
        [],
        [("a", 1), ("b", 2)],
        [Pair("a", 1), ("b", 2)],  # mixed classes
        [Pair("a", 1), Reading("s")],
        [1, "two", None],
    ],
    ids=["empty", "plain tuples", "named and plain", "two named classes", "scalars"],
)
def test_any_other_batch_is_pickled_as_before(values):
    assert not is_sent_plain(values)
    assert pickle_values(values) == pickle.dumps(values, protocol=5)


def test_a_subclass_with_attributes_keeps_them():
    value = WithAttributes("a", 1)
    value.note = "kept"
    assert not is_sent_plain([value])
    assert pickle.loads(pickle_values([value]))[0].note == "kept"


@pytest.mark.parametrize("kind", [Doubling, Reduced, Registered], ids=lambda k: k.__name__)
def test_a_class_with_its_own_new_or_pickling_hook_unpickles_exactly_as_pickle_does(kind):
    values = [kind("a", 1)]
    assert not is_sent_plain(values)
    assert pickle.loads(pickle_values(values)) == pickle.loads(pickle.dumps(values))


def test_rebuild_makes_instances_of_the_class_without_calling_python_code():
    rows = rebuild(Pair, [("a", 1), ("b", 2)])
    assert rows == [Pair("a", 1), Pair("b", 2)] and type(rows[0]) is Pair


@given(st.lists(st.tuples(st.text(max_size=5), st.integers()), max_size=50))
def test_a_timestamped_frame_of_named_tuples_round_trips(fields):
    values = [Pair(*pair) for pair in fields]
    timestamps = list(range(len(values)))
    batch = codec.decode(codec.encode_batch(values, timestamps))
    assert batch.values == values and batch.timestamps == timestamps
    assert all(type(value) is Pair for value in batch.values)
