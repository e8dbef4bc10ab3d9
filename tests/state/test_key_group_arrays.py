"""Vectorized key groups equal the Python ones value for value (checkpointed state depends on
it), for every column type the partitioner hashes vectorized and for the fallback."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from barrierflow.state.key_group_arrays import key_groups_of_array
from barrierflow.state.key_groups import assign_to_key_group, assign_to_key_groups

MAX_P = st.sampled_from([1, 2, 7, 128, 32768])


def python_groups(keys: list[Any], max_p: int) -> list[int]:
    return [assign_to_key_group(key, max_p) for key in keys]


@given(st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))), MAX_P)
def test_int64_columns(keys: list[int | None], max_p: int) -> None:
    array = pa.array(keys, pa.int64())
    assert key_groups_of_array(array, max_p).tolist() == python_groups(keys, max_p)


@given(st.lists(st.integers(0, 2**64 - 1)), MAX_P)
def test_uint64_columns(keys: list[int], max_p: int) -> None:
    array = pa.array(keys, pa.uint64())
    assert key_groups_of_array(array, max_p).tolist() == python_groups(keys, max_p)


@given(st.lists(st.integers(-(2**31), 2**31 - 1)), MAX_P)
def test_int32_columns(keys: list[int], max_p: int) -> None:
    array = pa.array(keys, pa.int32())
    assert key_groups_of_array(array, max_p).tolist() == python_groups(keys, max_p)


@given(st.lists(st.one_of(st.none(), st.text())), MAX_P)
def test_string_columns_plain_large_and_dictionary_encoded(keys: list[str | None], max_p: int):
    expected = python_groups(keys, max_p)
    for kind in (pa.string(), pa.large_string()):
        assert key_groups_of_array(pa.array(keys, kind), max_p).tolist() == expected
    encoded = pa.array(keys, pa.string()).dictionary_encode()
    assert key_groups_of_array(encoded, max_p).tolist() == expected


@given(st.lists(st.one_of(st.none(), st.binary())), MAX_P)
def test_binary_columns(keys: list[bytes | None], max_p: int) -> None:
    assert key_groups_of_array(pa.array(keys, pa.binary()), max_p).tolist() == python_groups(
        keys, max_p
    )


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.booleans(),
        )
    ),
    MAX_P,
)
def test_boolean_columns(keys: list[bool | None], max_p: int) -> None:
    assert key_groups_of_array(pa.array(keys, pa.bool_()), max_p).tolist() == python_groups(
        keys, max_p
    )


@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=False))), MAX_P)
def test_other_types_take_the_python_path(keys: list[float | None], max_p: int) -> None:
    assert key_groups_of_array(pa.array(keys, pa.float64()), max_p).tolist() == python_groups(
        keys, max_p
    )


def test_chunked_columns() -> None:
    chunked = pa.chunked_array([[1, 2], [3, 2**40]])
    assert key_groups_of_array(chunked, 128).tolist() == python_groups([1, 2, 3, 2**40], 128)


@given(
    st.lists(
        st.one_of(
            st.integers(),
            st.text(),
            st.none(),
            st.tuples(st.text(), st.integers()),
            st.booleans(),
            st.floats(allow_nan=False),
        )
    ),
    MAX_P,
)
def test_the_inline_python_loop_equals_one_call_per_key(keys: list[Any], max_p: int) -> None:
    assert assign_to_key_groups(keys, max_p) == python_groups(keys, max_p)
