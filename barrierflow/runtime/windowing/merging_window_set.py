"""The in-flight windows of one key of a merging assigner (Flink's MergingWindowSet).

Mailbox thread only. When windows merge, one of the merged windows' state
windows is kept as the state window of the result (the namespace its contents
live in), so merging moves only the other windows' contents. The set maps each
in-flight window to its state window; `WindowLogic` restores it per key from
state, adds or retires windows, and writes it back when it changed.

>>> from barrierflow.core.windows.sessions import EventTimeSessionWindows
>>> from barrierflow.core.windows.window import TimeWindow
>>> windows = MergingWindowSet(EventTimeSessionWindows.with_gap(3))
>>> merges = []
>>> def on_merge(result, merged, state_window, merged_state_windows):
...     merges.append((result, merged, state_window, merged_state_windows))
>>> windows.add_window(TimeWindow(0, 3), on_merge)
TimeWindow(start=0, end=3)
>>> windows.add_window(TimeWindow(2, 5), on_merge)
TimeWindow(start=0, end=5)
>>> merges
[(TimeWindow(start=0, end=5), [TimeWindow(start=0, end=3)], TimeWindow(start=0, end=3), [])]
>>> windows.get_state_window(TimeWindow(0, 5))
TimeWindow(start=0, end=3)
>>> windows.snapshot()
[(TimeWindow(start=0, end=5), TimeWindow(start=0, end=3))]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from barrierflow.core.windows.assigners import MergingWindowAssigner

__all__ = ["MergeFunction", "MergingWindowSet"]

MergeFunction = Callable[[Any, list[Any], Any, list[Any]], None]
"""Called for each merge: (merge result, merged windows, state window of the result,
merged state windows). Merged windows never include the window being added, and
merged state windows never include the result's state window."""


class _CollectMerges:
    """The MergeCallback handed to the assigner: records merge result -> merged windows."""

    def __init__(self) -> None:
        self.results: dict[Any, list[Any]] = {}

    def merge(self, to_be_merged: Iterable[Any], merge_result: Any) -> None:
        self.results[merge_result] = list(dict.fromkeys(to_be_merged))


class MergingWindowSet:
    """In-flight windows of one key, each mapped to the window its state lives in.

    Guarantees (Flink's): `add_window` returns the window the new window ended up
    in, the merge function sees every merge that involved an existing window, and
    the result's state window is one of the merged windows' state windows.
    Assumes the assigner's `merge_windows(windows, callback)` reports each merge
    once through `callback.merge(to_be_merged, merge_result)`.
    """

    def __init__(
        self,
        assigner: MergingWindowAssigner,
        restored: Iterable[tuple[Hashable, Hashable]] | None = None,
    ) -> None:
        self._assigner = assigner
        self._mapping: dict[Hashable, Hashable] = {}
        for window, state_window in restored or ():
            self._mapping[window] = state_window
        self._initial = dict(self._mapping)

    # ---- queries --------------------------------------------------------------------------

    def get_state_window(self, window: Hashable) -> Hashable | None:
        """The state window of in-flight `window`, or None if it is not in flight."""
        return self._mapping.get(window)

    def windows(self) -> list[Hashable]:
        """The in-flight windows."""
        return list(self._mapping)

    def __len__(self) -> int:
        return len(self._mapping)

    def changed(self) -> bool:
        """Whether the mapping differs from the one this set was restored from."""
        return self._mapping != self._initial

    def snapshot(self) -> list[tuple[Hashable, Hashable]]:
        """The mapping as plain data: (window, state window) pairs; restore with the constructor."""
        return list(self._mapping.items())

    # ---- changes --------------------------------------------------------------------------

    def retire_window(self, window: Hashable) -> None:
        """Remove `window` from the in-flight windows; a ValueError if it is not one."""
        if self._mapping.pop(window, None) is None:
            raise ValueError(f"Window {window} is not in in-flight window set.")

    def add_window(self, new_window: Hashable, merge_function: MergeFunction) -> Hashable:
        """Add `new_window`, merging as the assigner says; returns the window it ended up in.

        That is `new_window` itself if it merged with nothing, or the merge result.
        Add elements and call the trigger only for the returned window.
        """
        collected = _CollectMerges()
        self._assigner.merge_windows([*self._mapping, new_window], collected)

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in collected.results.items():
            # If the new window is among the merged windows, the merge result is where it ended up.
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result

            # Keep the state window of one of the merged windows for the result.
            merged_state_window = self._mapping.get(merged_windows[0])

            merged_state_windows = []
            for merged_window in merged_windows:
                state_window = self._mapping.pop(merged_window, None)
                if state_window is not None:
                    merged_state_windows.append(state_window)

            self._mapping[merge_result] = merged_state_window

            # The kept state window is the target, not a source.
            if merged_state_window in merged_state_windows:
                merged_state_windows.remove(merged_state_window)

            # Merging one existing window into itself, unextended, is no merge: the new
            # window never had state of its own.
            if not (len(merged_windows) == 1 and merge_result in merged_windows):
                merge_function(
                    merge_result,
                    merged_windows,
                    self._mapping[merge_result],
                    merged_state_windows,
                )

        # The new window is a new, self-contained window.
        if not collected.results or (result_window == new_window and not merged_new_window):
            # Deliberate deviation from Flink, which overwrites here: a window that is already
            # in flight keeps its state window. Otherwise adding a window identical to a merged
            # window (dynamic session gaps: (1, 2) merged into (0, 3), then (0, 3) again) would
            # point it at an empty namespace and orphan the contents gathered so far.
            self._mapping.setdefault(result_window, result_window)

        return result_window
