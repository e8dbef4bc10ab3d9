"""The pure pieces of a window join: tagged union, union key selector, co-group window
function, and the join's pairs in Flink's order."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow.core.functions import KeySelector, MapFunction
from barrierflow.core.join_functions import (
    CoGroupFunction,
    FlatJoinFunction,
    JoinFunction,
)
from barrierflow.runtime.joins.window_join import (
    CoGroupWindowFunction,
    JoinCoGroupFunction,
    TaggedUnion,
    UnionKeySelector,
    co_group_window_contents,
    join_window_contents,
    tag_first,
    tag_second,
)

ONE, TWO = TaggedUnion.one, TaggedUnion.two


def concat(first: str, second: str) -> str:
    return f"{first}+{second}"


def first_letter(value: str) -> str:
    return value[0]


def last_letter(value: str) -> str:
    return value[-1]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 99)), max_size=30))
def test_a_window_join_is_a_nested_loop_first_side_outer_both_in_arrival_order(
    contents: list[tuple[bool, int]],
) -> None:
    elements = [TaggedUnion(value, is_one) for is_one, value in contents]
    firsts = [value for is_one, value in contents if is_one]
    seconds = [value for is_one, value in contents if not is_one]
    assert join_window_contents(elements, lambda a, b: (a, b)) == [
        (a, b) for a in firsts for b in seconds
    ]


def test_a_join_function_object_gives_one_output_per_pair() -> None:
    class Concat(JoinFunction):
        def join(self, first: Any, second: Any) -> Any:
            return concat(first, second)

    contents = [ONE("a"), TWO("x"), TWO("y")]
    assert join_window_contents(contents, Concat()) == ["a+x", "a+y"]


def test_a_flat_join_function_gives_any_number_of_outputs_per_pair() -> None:
    class Repeat(FlatJoinFunction):
        def join(self, first: Any, second: Any) -> Any:
            if second == "skip":
                return None
            yield from [concat(first, second)] * 2

    contents = [ONE("a"), TWO("x"), TWO("skip")]
    assert join_window_contents(contents, Repeat()) == ["a+x", "a+x"]


def test_a_join_of_one_sided_contents_is_empty() -> None:
    assert join_window_contents([ONE("a"), ONE("b")], concat) == []
    assert join_window_contents([TWO("x")], concat) == []


def test_a_co_group_sees_both_sides_in_arrival_order_even_when_one_is_empty() -> None:
    calls = []

    class Record(CoGroupFunction):
        def co_group(self, first: list[Any], second: list[Any]) -> Any:
            calls.append((first, second))
            return [len(first), len(second)]

    assert co_group_window_contents([ONE("b"), TWO("x"), ONE("a")], Record()) == [2, 1]
    assert co_group_window_contents([TWO("y")], Record()) == [0, 1]
    assert calls == [(["b", "a"], ["x"]), ([], ["y"])]


def test_a_plain_co_group_callable_may_return_none() -> None:
    assert co_group_window_contents([ONE("a")], lambda first, second: None) == []


def test_the_co_group_window_function_has_the_window_function_signature() -> None:
    function = CoGroupWindowFunction(JoinCoGroupFunction(concat))
    assert function.apply("key", "window", [ONE("a"), TWO("x")]) == ["a+x"]


def test_open_and_close_reach_the_wrapped_join_function() -> None:
    events = []

    class Tracked(JoinFunction):
        def open(self, runtime_context: Any) -> None:
            events.append(("open", runtime_context))

        def close(self) -> None:
            events.append("close")

        def join(self, first: Any, second: Any) -> Any:
            return concat(first, second)

    function = CoGroupWindowFunction(JoinCoGroupFunction(Tracked()))
    function.open("ctx")
    function.close()
    assert events == [("open", "ctx"), "close"]


@pytest.mark.parametrize(
    "function",
    [MapFunction, "not a function"],
    ids=["another kind of function", "string"],
)
def test_what_is_not_a_join_function_is_refused(function: Any) -> None:
    if function is MapFunction:

        class Upper(MapFunction):
            def map(self, value: Any) -> Any:
                return value

        function = Upper()
    with pytest.raises(TypeError, match="join function"):
        JoinCoGroupFunction(function)


# ---- tagging and keys --------------------------------------------------------------------------


def test_taggers_mark_each_input() -> None:
    assert tag_first("a") == ONE("a") and tag_first("a").is_one
    assert tag_second("x") == TWO("x") and tag_second("x").is_two
    assert ONE("a").get_one() == "a" and TWO("x").get_two() == "x"
    with pytest.raises(ValueError, match="second input"):
        TWO("x").get_one()
    with pytest.raises(ValueError, match="first input"):
        ONE("a").get_two()


def test_the_union_key_selector_keys_each_element_with_its_own_inputs_selector() -> None:
    class LastLetter(KeySelector):
        def get_key(self, value: Any) -> Any:
            return last_letter(value)

    selector = UnionKeySelector(first_letter, LastLetter())
    assert selector.get_key(ONE("abc")) == "a"
    assert selector.get_key(TWO("abc")) == "c"


def test_the_window_join_pieces_survive_pickling() -> None:
    selector = pickle.loads(pickle.dumps(UnionKeySelector(first_letter, last_letter)))
    assert selector.get_key(TWO("xyz")) == "z"
    function = pickle.loads(pickle.dumps(CoGroupWindowFunction(JoinCoGroupFunction(concat))))
    assert function.apply(None, None, [ONE("a"), TWO("x")]) == ["a+x"]
    assert pickle.loads(pickle.dumps(ONE("a"))) == ONE("a")
