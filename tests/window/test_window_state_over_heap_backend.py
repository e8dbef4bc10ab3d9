"""The window state protocol over the heap keyed state backend: the thin adapter the window
operator needs (one MapState per state name, keyed by window), checked against the
in-memory twin, including a snapshot and restore of the backend mid-stream."""

from __future__ import annotations

from typing import Any

import pytest
from window_harness import WindowHarness, add

from barrierflow.runtime.operators.window import BackendWindowState
from barrierflow.runtime.windowing import (
    InMemoryWindowTimers,
    ListWindowContents,
    ReducingWindowContents,
    WindowResult,
)
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.window import (
    CountTrigger,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
)


class HeapWindowState(BackendWindowState):
    """The window operator's adapter, plus a size for comparing with the in-memory twin."""

    def __len__(self) -> int:
        """How many values the states used here hold (for comparing with the twin)."""
        count = 0
        for name in ("window-contents", "merging-window-set", "count"):
            for key in list(self._backend.keys(name)):
                count += len(self._map(name, key).keys())
        return count


def new_backend() -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)


EVENTS = [
    ("a", 1, 3),
    ("b", 2, 4),
    ("a", 4, 11),
    ("wm", 9, None),
    ("b", 8, 2),  # late for [-5, 5) and [0, 10), or merging into a session
    ("a", 16, 13),
    ("c", 32, 40),
    ("wm", 14, None),
    ("a", 64, 14),
    ("b", 128, 30),
    ("wm", 60, None),
]


def sliding() -> dict[str, Any]:
    return {"assigner": SlidingEventTimeWindows.of(10, 5), "contents": ReducingWindowContents(add)}


def session_counts() -> dict[str, Any]:
    return {
        "assigner": EventTimeSessionWindows.with_gap(5),
        "contents": ListWindowContents(lambda key, ctx, values: [(key, sorted(values))]),
        "trigger": CountTrigger.of(2),
        "allowed_lateness": 3,
    }


@pytest.mark.parametrize("setup", [sliding, session_counts], ids=["sliding", "sessions"])
@pytest.mark.parametrize("restore_at", [None, 2, 4, 8])
def test_the_heap_backend_behind_the_protocol_gives_the_same_results(setup, restore_at):
    expected = WindowHarness(side_output_late_data=True, **setup())
    backend = new_backend()
    actual = WindowHarness(side_output_late_data=True, state=HeapWindowState(backend), **setup())

    emitted = []
    for step, (key, value, timestamp) in enumerate(EVENTS):
        if step == restore_at:
            restored = new_backend()
            restored.restore([canonical_bytes(backend)])
            backend = restored
            actual = WindowHarness(
                side_output_late_data=True,
                state=HeapWindowState(restored),
                timers=InMemoryWindowTimers.restore(actual.timers.snapshot()),
                watermark=actual.watermark,
                **setup(),
            )
        if key == "wm":
            out = expected.advance_watermark(value)
            assert actual.advance_watermark(value) == out
        else:
            out = expected.element(value, timestamp, key)
            assert actual.element(value, timestamp, key) == out
        emitted += out
        assert len(actual.state) == len(expected.state)

    assert actual.advance_watermark(2**63 - 1) == expected.advance_watermark(2**63 - 1)
    assert any(isinstance(item, WindowResult) for item in emitted)
    assert actual.is_empty() and expected.is_empty()
