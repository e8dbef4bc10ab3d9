"""Count windows (issue 24 item 15) through the WindowOperator, event by event, no Spark:
PyFlink's count assigners number each key's elements in keyed state, so a window fires
once it holds `size` elements, and the count so far survives a snapshot, a restore and
a rescale."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.clocks import ManualClock
from support.operator_harness import context, started

from barrierflow import _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend, HashMapStateBackend
from barrierflow.core.windows.count_assigners import sliding_window_ids
from barrierflow.errors import ConfigurationError
from barrierflow.functions import ProcessWindowFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.window import WindowOperator
from barrierflow.state.backend import canonical_section
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group
from barrierflow.window import (
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    PurgingTrigger,
)


class Elements(ProcessWindowFunction):
    """(key, window id, the window's values in arrival order)."""

    def process(self, key, context, elements):
        yield (key, context.window().id, [v for _, v in elements])


def count_operator(assigner, restored=None, key_group_range=None, trigger=None):
    operator = WindowOperator(
        "w", "w", lambda r: r[0], assigner, ("process", Elements(), None), trigger
    )
    settings = {"key_group_range": key_group_range} if key_group_range else {}
    started(operator, ManualClock(), restored, **settings)
    return operator


def feed(operator, *records):
    """One record per batch (records arrive one by one); what each emitted."""
    fired = []
    for record in records:
        operator.process_batch(RecordBatch([record]))
        fired.append([event[1] for event in operator.output.take() if event[0] == "record"])
    return fired


def test_a_tumbling_count_window_fires_every_size_elements_of_its_key():
    operator = count_operator(CountTumblingWindowAssigner.of(3))
    fired = feed(operator, ("a", 1), ("a", 2), ("b", 1), ("a", 3), ("a", 4), ("b", 2),
                 ("b", 3), ("a", 5), ("a", 6))  # fmt: skip
    assert fired == [
        [], [], [],
        [("a", 0, [1, 2, 3])],
        [], [],
        [("b", 0, [1, 2, 3])],
        [],
        [("a", 1, [4, 5, 6])],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("size", "slide", "expected"),
    [
        # PyFlink's sliding count windows: window k holds elements k*slide .. k*slide+size-1
        # and fires once it has them all; the first result comes after `size` elements.
        # PyFlink 2.3.0 run here: count_window(4, 2) over 1..8 gives 1234, 3456, 5678 and
        # count_window(3) gives 123, 456 (a reduce concatenating digits).
        (4, 2, {4: [1, 2, 3, 4], 6: [3, 4, 5, 6], 8: [5, 6, 7, 8]}),
        (
            3,
            1,
            {3: [1, 2, 3], 4: [2, 3, 4], 5: [3, 4, 5], 6: [4, 5, 6], 7: [5, 6, 7], 8: [6, 7, 8]},
        ),
        # a slide beyond the size skips the elements between windows
        (2, 3, {2: [1, 2], 5: [4, 5], 8: [7, 8]}),
    ],
    ids=["size4-slide2", "size3-slide1", "size2-slide3"],
)
def test_a_sliding_count_window_fires_every_slide_elements_over_the_last_size(
    size, slide, expected
):
    operator = count_operator(CountSlidingWindowAssigner.of(size, slide))
    fired = feed(operator, *[("k", n) for n in range(1, 9)])
    got = {n: out[0][2] for n, out in enumerate(fired, start=1) if out}
    assert got == expected
    assert all(len(out) <= 1 for out in fired)


def test_sliding_window_ids_are_pyflinks_latest_first():
    assert [sliding_window_ids(4, 2, n) for n in range(6)] == [
        [0], [0], [1, 0], [1, 0], [2, 1], [2, 1]
    ]  # fmt: skip


def test_a_fired_count_window_leaves_no_contents_or_trigger_count_behind():
    operator = count_operator(CountTumblingWindowAssigner.of(2))
    feed(operator, ("a", 1), ("a", 2))
    backend = operator.backend
    # only the assigner's element count of key "a" remains
    assert sorted(backend.keys("window-contents")) == []
    assert sorted(backend.keys("count")) == []
    assert sorted(backend.keys("tumble-count-assigner")) == ["a"]


def test_the_count_so_far_and_the_open_window_survive_a_snapshot_and_restore():
    operator = count_operator(CountTumblingWindowAssigner.of(3))
    feed(operator, ("a", 1), ("a", 2), ("b", 1))
    snapshot = operator.snapshot_state(1)
    restored = RestoredState(keyed=[canonical_section(snapshot.keyed)])
    again = count_operator(CountTumblingWindowAssigner.of(3), restored=restored)
    fired = feed(again, ("b", 2), ("a", 3), ("b", 3))
    assert fired == [[], [("a", 0, [1, 2, 3])], [("b", 0, [1, 2, 3])]]


def test_after_a_rescale_each_subtask_continues_the_counts_of_its_own_keys():
    operator = count_operator(CountTumblingWindowAssigner.of(2))
    keys = [f"k{i}" for i in range(8)]
    feed(operator, *[(key, 1) for key in keys])
    keyed = canonical_section(operator.snapshot_state(1).keyed)
    halves = [KeyGroupRange(0, 63), KeyGroupRange(64, 127)]
    fired = []
    for key_groups in halves:
        part = count_operator(
            CountTumblingWindowAssigner.of(2),
            restored=RestoredState(keyed=[keyed]),
            key_group_range=key_groups,
        )
        own = [key for key in keys if assign_to_key_group(key, 128) in key_groups]
        for out in feed(part, *[(key, 2) for key in own]):
            fired.extend(out)
    assert sorted(fired) == [(key, 0, [1, 2]) for key in keys]


def test_a_count_window_reaches_the_window_function_as_a_count_window():
    operator = count_operator(
        CountTumblingWindowAssigner.of(1), trigger=PurgingTrigger.of(CountTrigger.of(1))
    )
    feed(operator, ("a", 1))
    assert CountWindow(0).max_timestamp() == 2**63 - 1
    assert operator.logic.trigger.nested_trigger.count == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_a_count_window_size_that_is_no_positive_int_is_refused_when_built(bad):
    with pytest.raises(ConfigurationError, match="positive int"):
        CountTumblingWindowAssigner.of(bad)
    with pytest.raises(ConfigurationError, match="positive int"):
        CountSlidingWindowAssigner.of(3, bad)


def test_count_windows_without_a_keyed_runtime_context_are_refused():
    with pytest.raises(ConfigurationError, match="keyed stream"):
        CountTumblingWindowAssigner.of(2).assign_windows("x", 0, None)


@pytest.mark.parametrize("backend", [HashMapStateBackend(), EmbeddedRocksDBStateBackend()],
                         ids=["hashmap", "rocksdb"])  # fmt: skip
def test_count_windows_restored_from_a_checkpoint_on_either_backend_go_on_where_they_were(
    tmp_path, backend
):
    def operator(local, restored=None):
        made = WindowOperator(
            "w", "w", lambda r: r[0], CountSlidingWindowAssigner.of(3, 1),
            ("process", Elements(), None),
        )  # fmt: skip
        settings = replace(context(ManualClock()), state_backend=backend, local_dir=str(local))
        made.setup(settings, CollectingOutput())
        made.initialize_state(restored)
        made.open()
        return made

    records = [(key, n) for n in range(1, 6) for key in ("a", "b")]
    unstopped = operator(tmp_path / "local-0")
    expected = [out for out in feed(unstopped, *records) if out]
    unstopped.close()

    first = operator(tmp_path / "local-1")
    before = [out for out in feed(first, *records[:5]) if out]
    snapshot = first.snapshot_state(1)
    checkpoint = _fs.location(tmp_path / "chk-1")
    try:
        section = snapshot.keyed.write(checkpoint.child("subtask-0.state.files-0"))
    finally:
        snapshot.keyed.release()
    first.abort()
    second = operator(tmp_path / "local-2", RestoredState(keyed=[section], base=checkpoint))
    after = [out for out in feed(second, *records[5:]) if out]
    second.close()
    assert before + after == expected
    assert expected[0] == [("a", 0, [1, 2, 3])]


def test_count_trigger_and_assigners_take_pyflinks_argument_names():
    assert CountTrigger(window_size=3).count == CountTrigger.of(window_size=3).count == 3
    assert repr(CountTumblingWindowAssigner.of(window_size=2)) == "CountTumblingWindowAssigner(2)"
    assert repr(CountSlidingWindowAssigner.of(window_size=4, window_slide=2)) == (
        "CountSlidingWindowAssigner(4, 2)"
    )
