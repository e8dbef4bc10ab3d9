"""Partitioners split batches over channels: every record once, to the right channel."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from barrierflow.runtime.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
)
from barrierflow.state.key_groups import assign_to_key_group, subtask_for_key_group


def test_rebalance_continues_round_robin_across_batches():
    partitioner = RebalancePartitioner()
    first = dict(partitioner.route(["a", "b", "c"], 2))
    second = dict(partitioner.route(["d", "e"], 2))
    assert first == {0: ["a", "c"], 1: ["b"]}
    assert second == {1: ["d"], 0: ["e"]}


def test_broadcast_sends_the_whole_batch_to_every_channel():
    assert BroadcastPartitioner().route([1, 2], 3) == [(0, [1, 2]), (1, [1, 2]), (2, [1, 2])]


def test_forward_uses_the_single_channel():
    assert ForwardPartitioner().route([1, 2], 1) == [(0, [1, 2])]


@given(st.lists(st.text(max_size=5), max_size=200), st.integers(1, 6))
def test_hash_partitioning_sends_each_record_once_to_its_key_groups_subtask(words, channels):
    partitioner = KeyGroupStreamPartitioner(lambda w: w, 128)
    routed = partitioner.route(words, channels)
    seen = []
    for channel, part in routed:
        for word in part:
            assert subtask_for_key_group(128, channels, assign_to_key_group(word, 128)) == channel
        seen.extend(part)
    assert sorted(seen) == sorted(words)


@given(st.lists(st.integers(), max_size=100), st.integers(1, 5))
def test_rebalance_sends_each_record_exactly_once(values, channels):
    routed = RebalancePartitioner().route(values, channels)
    assert sorted(v for _, part in routed for v in part) == sorted(values)
