"""DataGeneratorSource: every index exactly once, whatever the readers, restores and rate."""

from __future__ import annotations

import math
import pickle
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.clocks import ManualClock

from barrierflow.connectors.datagen import DataGeneratorSource, NumberSequenceSource
from barrierflow.errors import ConfigurationError


def identity(index: int) -> int:
    return index


def readers_for(source, parallelism: int, positions=None):
    """One reader per subtask, with splits dealt as the JobMaster deals them."""
    splits = source.create_splits()
    readers = [source.create_reader(splits[i::parallelism]) for i in range(parallelism)]
    for reader in readers:
        reader.restore(positions or {})
    return readers


def drain(reader, max_records: int) -> list:
    records = []
    while (batch := reader.poll_batch(max_records)) is not None:
        assert 0 < len(batch) <= max_records
        records.extend(batch)
    return records


def test_a_single_reader_emits_the_records_in_index_order():
    source = DataGeneratorSource(lambda i: f"r{i}", 10, num_splits=3)
    (reader,) = readers_for(source, 1)
    assert drain(reader, 4) == [f"r{i}" for i in range(10)]


def test_a_bounded_source_is_bounded_and_an_unbounded_one_is_not():
    assert DataGeneratorSource(identity, 5).bounded is True
    assert DataGeneratorSource(identity, None).bounded is False


def test_an_unbounded_source_keeps_producing():
    (reader,) = readers_for(DataGeneratorSource(identity, None, num_splits=2), 1)
    for _ in range(50):
        batch = reader.poll_batch(100)
    assert batch == list(range(4900, 5000))


def test_a_count_of_zero_ends_at_once():
    (reader,) = readers_for(DataGeneratorSource(identity, 0), 1)
    assert reader.poll_batch(10) is None


def test_a_reader_without_splits_is_at_the_end_at_once_even_unbounded():
    source = DataGeneratorSource(identity, None, num_splits=2)
    assert readers_for(source, 3)[2].poll_batch(10) is None


def test_the_snapshot_is_the_next_index_of_every_split():
    source = DataGeneratorSource(identity, 100, num_splits=4)
    reader = readers_for(source, 2)[1]  # splits 1 and 3
    assert reader.snapshot() == {"1-of-4": 1, "3-of-4": 3}
    assert reader.poll_batch(3) == [1, 3, 5]
    assert reader.snapshot() == {"1-of-4": 9, "3-of-4": 7}


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 300),
    num_splits=st.integers(1, 12),
    parallelism=st.integers(1, 14),
    max_records=st.integers(1, 50),
)
def test_the_union_over_any_number_of_readers_is_exactly_the_range(
    count, num_splits, parallelism, max_records
):
    source = DataGeneratorSource(identity, count, num_splits=num_splits)
    produced = Counter()
    for reader in readers_for(source, parallelism):
        produced.update(drain(reader, max_records))
    assert produced == Counter(range(count))


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 300),
    num_splits=st.integers(1, 10),
    parallelism_before=st.integers(1, 6),
    parallelism_after=st.integers(1, 6),
    polls_before=st.lists(st.integers(0, 8), min_size=6, max_size=6),
    max_records=st.integers(1, 40),
)
def test_a_restore_from_the_positions_resumes_exactly_even_at_another_parallelism(
    count, num_splits, parallelism_before, parallelism_after, polls_before, max_records
):
    source = DataGeneratorSource(identity, count, num_splits=num_splits)
    produced = Counter()
    positions = {}
    for reader, polls in zip(readers_for(source, parallelism_before), polls_before, strict=False):
        for _ in range(polls):
            produced.update(reader.poll_batch(max_records) or [])
        positions.update(reader.snapshot())
    for reader in readers_for(source, parallelism_after, positions):
        produced.update(drain(reader, max_records))
    assert produced == Counter(range(count))


def test_positions_taken_with_another_number_of_splits_are_ignored():
    old = readers_for(DataGeneratorSource(identity, 20, num_splits=4), 1)[0]
    old.poll_batch(8)
    (reader,) = readers_for(DataGeneratorSource(identity, 20, num_splits=5), 1, old.snapshot())
    assert drain(reader, 100) == list(range(20))


def test_the_source_and_its_generator_survive_pickling():
    source = pickle.loads(pickle.dumps(NumberSequenceSource(3, 7)))
    assert drain(readers_for(source, 1)[0], 10) == [3, 4, 5, 6, 7]


# ---- throttling ------------------------------------------------------------------------------


def throttled_reader(rate: float, clock: ManualClock, subtask: int = 0, parallelism: int = 1):
    source = DataGeneratorSource(identity, None, rate, num_splits=4, clock=clock.monotonic)
    return readers_for(source, parallelism)[subtask]


def test_a_throttled_reader_returns_nothing_while_ahead_of_schedule():
    clock = ManualClock()
    reader = throttled_reader(100, clock)
    assert reader.poll_batch(1000) == []
    clock.advance(50)
    assert reader.poll_batch(1000) == [0, 1, 2, 3, 4]
    assert reader.poll_batch(1000) == []
    clock.advance(5)
    assert reader.poll_batch(1000) == []
    clock.advance(5)
    assert reader.poll_batch(1000) == [5]


def test_a_throttled_reader_never_returns_more_than_asked():
    clock = ManualClock()
    reader = throttled_reader(1000, clock)
    reader.poll_batch(10)
    clock.advance(500)
    assert [len(reader.poll_batch(200)) for _ in range(4)] == [200, 200, 100, 0]


def test_the_rate_is_shared_by_the_readers_in_proportion_to_their_splits():
    clock = ManualClock()
    # 4 splits over 3 readers: the first has 2 splits, the others 1 each.
    readers = [throttled_reader(400, clock, subtask=i, parallelism=3) for i in range(3)]
    for reader in readers:
        reader.poll_batch(10_000)
    clock.advance(500)
    assert [len(reader.poll_batch(10_000)) for reader in readers] == [100, 50, 50]


def test_a_reader_that_fell_behind_catches_up_by_at_most_one_second_of_records():
    clock = ManualClock()
    reader = throttled_reader(100, clock)
    reader.poll_batch(1000)
    clock.advance(10_000)  # blocked by backpressure for a long time
    assert len(reader.poll_batch(1000)) == 100
    assert reader.poll_batch(1000) == []
    clock.advance(100)
    assert len(reader.poll_batch(1000)) == 10


# ---- NumberSequenceSource and validation -----------------------------------------------------


def test_a_number_sequence_includes_both_ends():
    source = NumberSequenceSource(-2, 2)
    assert source.bounded
    produced = Counter()
    for reader in readers_for(source, 3):
        produced.update(drain(reader, 2))
    assert produced == Counter([-2, -1, 0, 1, 2])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param((identity, -1), "count", id="negative count"),
        pytest.param((identity, True), "count", id="bool count"),
        pytest.param((identity, 2.5), "count", id="float count"),
        pytest.param((identity, 5, 0), "records_per_second", id="zero rate"),
        pytest.param((identity, 5, -3), "records_per_second", id="negative rate"),
        pytest.param((identity, 5, math.nan), "records_per_second", id="nan rate"),
        pytest.param((identity, 5, math.inf), "records_per_second", id="infinite rate"),
        pytest.param((identity, 5, None, 0), "num_splits", id="no splits"),
        pytest.param(("nope", 5), "callable", id="generator not callable"),
    ],
)
def test_invalid_generator_arguments_are_a_configuration_error(arguments, message):
    with pytest.raises(ConfigurationError, match=message):
        DataGeneratorSource(*arguments)


@pytest.mark.parametrize(
    ("start", "end"),
    [pytest.param(5, 4, id="start after end"), pytest.param(0, 1.5, id="float end")],
)
def test_an_invalid_number_sequence_is_a_configuration_error(start, end):
    with pytest.raises(ConfigurationError, match="ints with start <= end"):
        NumberSequenceSource(start, end)
