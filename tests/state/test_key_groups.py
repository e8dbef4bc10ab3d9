"""Key groups: a stable hash, and ranges that split [0, max parallelism) over subtasks."""

from __future__ import annotations

import decimal
import enum
import fractions
import itertools
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import threading
from collections import namedtuple
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow.errors import ConfigurationError
from barrierflow.state.key_groups import (
    DEFAULT_MAX_PARALLELISM,
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_for_hash,
    key_group_range_for_subtask,
    stable_hash,
    subtask_for_key_group,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1


class Tag(enum.StrEnum):
    NEWS = "news"


@dataclass(frozen=True)
class UserKey:
    tenant: str
    user: int
    note: str = field(default="", compare=False)


class PlainKey:
    """A picklable value class without special support: hashed through the pickle fallback."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainKey) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class KeyWithLock:
    def __init__(self) -> None:
        self.lock = threading.Lock()


# ---- the hash is part of the savepoint format: these values must never change ----------------

PINNED = [
    ("", 0),
    ("alice", 1712320549),
    ("hello world", 2096964264),
    ("grüße", 1184983356),
    (0, 0),
    (1, 2654435769),
    (7, 1401181202),
    (2**32, 2546182016),
    (-1, 1937595159),
    (2**100, 299749443),
    (1.5, 3448471941),
    (float("nan"), 652394811),
    (b"alice", 4242387301),
    (None, 1315925605),
    (("alice", 7), 3697882108),
    (frozenset({"a", "b"}), 3230355829),
    (Color.RED, 3891115916),
]


def case_id(value: object) -> str:
    """A test id that is the same in every process (xdist workers compare their collections):
    no memory addresses, a set's items in sorted order."""
    if isinstance(value, frozenset | set):
        return f"{type(value).__name__}({sorted(map(repr, value))})"
    return re.sub(r" (object )?at 0x[0-9a-f]+", "", repr(value))


@pytest.mark.parametrize(("key", "expected"), PINNED, ids=[case_id(k) for k, _ in PINNED])
def test_stable_hash_keeps_its_pinned_value_so_savepoints_stay_readable(key, expected):
    assert stable_hash(key) == expected


def test_key_groups_of_pinned_keys_never_change():
    keys = ["alice", "bob", "carol", 0, 1, 42, ("alice", 7)]
    assert [assign_to_key_group(k, 128) for k in keys] == [37, 50, 83, 0, 57, 110, 124]


# Run in a child process with another PYTHONHASHSEED: str, bytes and frozenset iteration
# order all change with it, the stable hash must not.
SAMPLES_SOURCE = textwrap.dedent(
    """
    import dataclasses, enum

    class Color(enum.Enum):
        RED = "red"

    @dataclasses.dataclass(frozen=True)
    class UserKey:
        tenant: str
        user: int

    SAMPLES = [
        "alice", "", "grüße", "a" * 1000, b"bytes", 0, 7, -3, 2**40, 2**200, 1.25, -0.0,
        None, True, ("alice", 7), ["x", ("y", b"z")],
        frozenset({"apple", "banana", "cherry", "date", "elderberry", "fig"}),
        frozenset({("a", 1), ("b", 2), ("c", 3)}), Color.RED, UserKey("acme", 3),
    ]
    """
)
CHILD_SOURCE = SAMPLES_SOURCE + textwrap.dedent(
    """
        import json
        from barrierflow.state.key_groups import stable_hash
        print(json.dumps([stable_hash(k) for k in SAMPLES]))
        """
)


def hashes_in_a_child_process(seed: str) -> list[int]:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    result = subprocess.run(
        [sys.executable, "-c", CHILD_SOURCE],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(result.stdout)


def test_stable_hash_is_the_same_in_processes_with_other_hash_seeds():
    namespace: dict = {"__name__": "samples"}
    exec(compile(SAMPLES_SOURCE, "samples", "exec", dont_inherit=True), namespace)
    here = [stable_hash(k) for k in namespace["SAMPLES"]]
    assert hashes_in_a_child_process("1") == here
    assert hashes_in_a_child_process("987654") == here


# ---- equal keys hash equal, as with hash() --------------------------------------------------

Point = namedtuple("Point", "x y")

EQUAL_KEYS = [
    (1, 1.0),
    (1, True),
    (0, False),
    (0, -0.0),
    (2**70, float(2**70)),
    (1, Level.LOW),
    ("news", Tag.NEWS),
    (b"abc", bytearray(b"abc")),
    (b"abc", memoryview(b"abc")),
    (frozenset({1, 2}), {2, 1}),
    ((1, 2), Point(1, 2)),
    (0.5, fractions.Fraction(1, 2)),
    (3, fractions.Fraction(6, 2)),
    (3, decimal.Decimal("3.000")),
    (0.25, decimal.Decimal("0.25")),
    (2.5, complex(2.5, 0)),
    (UserKey("acme", 1, note="x"), UserKey("acme", 1, note="y")),
    (PlainKey("p"), PlainKey("p")),
]


@pytest.mark.parametrize(
    ("a", "b"), EQUAL_KEYS, ids=[f"{case_id(a)}=={case_id(b)}" for a, b in EQUAL_KEYS]
)
def test_keys_that_compare_equal_have_the_same_stable_hash(a, b):
    assert a == b
    assert stable_hash(a) == stable_hash(b)


def test_numpy_numbers_hash_as_the_python_numbers_they_equal():
    np = pytest.importorskip("numpy")
    assert stable_hash(np.int64(12345678901)) == stable_hash(12345678901)
    assert stable_hash(np.int32(7)) == stable_hash(7)
    assert stable_hash(np.float64(1.5)) == stable_hash(1.5)
    assert stable_hash(np.str_("alice")) == stable_hash("alice")


DIFFERENT_KEYS = [
    ("1", 1),
    ("abc", b"abc"),
    (("a", "b"), ("b", "a")),
    ((1,), 1),
    ((), None),
    (Color.RED, Color.BLUE),
    (UserKey("acme", 1), UserKey("acme", 2)),
    (-1, 0),
    (1.5, 2.5),
]


@pytest.mark.parametrize(
    ("a", "b"), DIFFERENT_KEYS, ids=[f"{case_id(a)}!={case_id(b)}" for a, b in DIFFERENT_KEYS]
)
def test_typical_different_keys_have_different_stable_hashes(a, b):
    assert stable_hash(a) != stable_hash(b)


def test_a_key_that_cannot_be_pickled_is_a_configuration_error_naming_its_type():
    with pytest.raises(ConfigurationError, match="KeyWithLock") as caught:
        stable_hash(KeyWithLock())
    assert "cannot be hashed stably" in str(caught.value)


def test_an_unpicklable_element_of_a_tuple_key_is_reported_too():
    with pytest.raises(ConfigurationError, match=r"_thread\.lock"):
        stable_hash(("ok", threading.Lock()))


keys = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.frozensets(st.text() | st.integers(), max_size=4)
    ),
    max_leaves=12,
)


@given(keys)
def test_stable_hash_is_a_deterministic_32_bit_value(key):
    first = stable_hash(key)
    assert 0 <= first < 2**32
    assert stable_hash(key) == first


@given(st.integers(), st.integers(1, 4096))
def test_the_key_group_is_the_hash_modulo_max_parallelism(key, max_parallelism):
    group = assign_to_key_group(key, max_parallelism)
    assert 0 <= group < max_parallelism
    assert group == compute_key_group_for_hash(stable_hash(key), max_parallelism)


# ---- spread: 10k keys over the key groups, chi-square against uniform -------------------------

_rng = random.Random(20240501)
KEY_FAMILIES = {
    "user-i strings": [f"user-{i}" for i in range(10_000)],
    "zero-padded numbers": [f"{i:08d}" for i in range(10_000)],
    "random words": list(
        {
            "".join(_rng.choices("abcdefghijklmnopqrstuvwxyz", k=_rng.randint(3, 9)))
            for _ in range(10_500)
        }
    )[:10_000],
    "sequential ints": list(range(10_000)),
    "multiples of 128": [i * 128 for i in range(10_000)],
    "multiples of 2**16": [i << 16 for i in range(10_000)],
    "negative ints": [-i for i in range(1, 10_001)],
    "epoch milliseconds": [1_700_000_000_000 + i * 1000 for i in range(10_000)],
    "(str, int) tuples": [(f"tenant-{i % 10}", i // 10) for i in range(10_000)],
    "floats": [i / 7 for i in range(1, 10_001)],
}


@pytest.mark.parametrize("max_parallelism", [128, 100])
@pytest.mark.parametrize("family", list(KEY_FAMILIES))
def test_keys_spread_evenly_over_key_groups(family, max_parallelism):
    keys = KEY_FAMILIES[family]
    assert len(set(keys)) == len(keys) == 10_000
    counts = [0] * max_parallelism
    for key in keys:
        counts[assign_to_key_group(key, max_parallelism)] += 1
    expected = len(keys) / max_parallelism
    chi_square = sum((c - expected) ** 2 / expected for c in counts)
    degrees = max_parallelism - 1
    # Uniform keys give chi-square ~ degrees +- sqrt(2 * degrees); allow four deviations.
    assert chi_square < degrees + 4 * (2 * degrees) ** 0.5, counts


# ---- ranges ---------------------------------------------------------------------------------


def test_default_max_parallelism_is_128():
    assert DEFAULT_MAX_PARALLELISM == 128


def test_key_group_range_is_inclusive_at_both_ends():
    r = KeyGroupRange(3, 5)
    assert len(r) == 3
    assert list(r) == [3, 4, 5]
    assert 3 in r and 5 in r
    assert 2 not in r and 6 not in r
    assert "3" not in r


def test_empty_key_group_range_has_no_key_groups():
    empty = KeyGroupRange.empty()
    assert len(empty) == 0
    assert list(empty) == []
    assert 0 not in empty


def test_intersection_of_overlapping_ranges_is_their_common_part():
    assert KeyGroupRange(0, 42).intersection(KeyGroupRange(40, 85)) == KeyGroupRange(40, 42)
    assert KeyGroupRange(40, 85).intersection(KeyGroupRange(0, 42)) == KeyGroupRange(40, 42)


def test_intersection_of_disjoint_ranges_is_empty():
    assert len(KeyGroupRange(0, 42).intersection(KeyGroupRange(43, 85))) == 0
    assert KeyGroupRange(50, 60).intersection(KeyGroupRange(0, 3)) == KeyGroupRange.empty()


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (5, 3)])
def test_an_invalid_key_group_range_is_a_configuration_error(start, end):
    with pytest.raises(ConfigurationError, match="invalid key-group range"):
        KeyGroupRange(start, end)


def test_ranges_match_flinks_for_128_key_groups_over_3_subtasks():
    assert [key_group_range_for_subtask(128, 3, i) for i in range(3)] == [
        KeyGroupRange(0, 42),
        KeyGroupRange(43, 85),
        KeyGroupRange(86, 127),
    ]


@given(st.integers(1, 600).flatmap(lambda m: st.tuples(st.just(m), st.integers(1, m))))
def test_subtask_ranges_partition_all_key_groups_and_agree_with_subtask_for_key_group(args):
    max_parallelism, parallelism = args
    ranges = [
        key_group_range_for_subtask(max_parallelism, parallelism, i) for i in range(parallelism)
    ]
    assert ranges[0].start == 0
    assert ranges[-1].end == max_parallelism - 1
    for before, after in itertools.pairwise(ranges):
        assert after.start == before.end + 1
    for index, key_groups in enumerate(ranges):
        assert len(key_groups) >= 1
        for key_group in key_groups:
            assert subtask_for_key_group(max_parallelism, parallelism, key_group) == index


@pytest.mark.parametrize(
    ("parallelism", "index", "message"),
    [(0, 0, "parallelism 0"), (129, 0, "parallelism 129"), (4, 4, "index 4"), (4, -1, "index -1")],
)
def test_impossible_subtasks_are_configuration_errors(parallelism, index, message):
    with pytest.raises(ConfigurationError, match=message):
        key_group_range_for_subtask(128, parallelism, index)
