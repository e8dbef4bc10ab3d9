"""Operator state round-trips as msgpack inside the versioned envelope."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow import _envelope as state_format
from barrierflow.errors import StateRestoreError
from barrierflow.state.operator_state import (
    OPERATOR_STATE,
    OPERATOR_STATE_VERSION,
    decode_operator_state,
    encode_operator_state,
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
)
dict_keys = st.text() | st.integers(-(2**63), 2**63 - 1)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(dict_keys, children, max_size=4)
    ),
    max_leaves=20,
)


@given(values)
def test_msgpack_able_operator_state_round_trips_exactly(value):
    assert decode_operator_state(encode_operator_state(value)) == value


def test_source_positions_keep_their_int_and_str_keys():
    positions = {"split-0": 1200, "split-1": {"file": "in/b.txt", "offset": 7}, 3: [1, 2]}
    restored = decode_operator_state(encode_operator_state(positions))
    assert restored == positions
    assert list(restored) == ["split-0", "split-1", 3]


def test_tuples_come_back_as_lists():
    assert decode_operator_state(encode_operator_state({"t": (1, ("a", b"b"))})) == {
        "t": [1, ["a", b"b"]]
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"files": {"a", "b"}}, r"at state\['files'\] is a set"),
        ({(1, 2): "x"}, r"key \(1, 2\) at state is a tuple"),
        ([1, object()], r"at state\[1\] is a object"),
        ({"n": 2**64}, "beyond 64 bits"),
    ],
    ids=["set", "tuple key", "object", "huge int"],
)
def test_state_that_would_not_round_trip_is_refused_when_encoded(value, message):
    with pytest.raises(TypeError, match=message):
        encode_operator_state(value)


def test_a_newer_operator_state_version_is_refused():
    data = state_format.encode(OPERATOR_STATE, {"version": OPERATOR_STATE_VERSION + 1, "state": 1})
    with pytest.raises(
        StateRestoreError, match="version 2; this barrierflow reads versions 1 to 1"
    ):
        decode_operator_state(data)


def test_a_header_without_state_is_refused():
    data = state_format.encode(OPERATOR_STATE, {"version": 1})
    with pytest.raises(StateRestoreError, match="must hold 'version' and 'state'"):
        decode_operator_state(data)


def test_another_kind_of_file_is_not_taken_for_operator_state():
    data = state_format.encode("keyed-state", {"version": 1, "state": 1})
    with pytest.raises(StateRestoreError, match="expected a 'operator-state' file"):
        decode_operator_state(data)
