"""The timers of one time domain: Flink's HeapPriorityQueue, deduplicating, per key group."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from barrierflow.runtime.timers.timer import Timer, sort_key, tie_order


class TimerPriorityQueue:
    """Timers of one time domain, deduplicated, indexed per key group.

    `_buckets` maps a timestamp to its timers (each with its key group), and `_heap`
    holds the timestamps, so the heap compares plain ints and a timestamp shared by
    many keys (a window end) costs one heap entry. A timestamp whose bucket emptied
    by deletion stays in the heap until it reaches the top or the heap is compacted.

    A snapshot takes the key groups' sets themselves (`hold`), and the queue copies a held
    set before it next changes it: the barrier pays per key group, not per timer, and a
    key group with no timer added or removed until the next snapshot is never copied.

    With `track_changes` (changelog checkpoints) it also records, per key group, each timer
    added, deleted or fired since `take_changes` last swapped them out: a checkpoint then
    writes those timers (present at the barrier or not) instead of all of them.
    """

    __slots__ = ("_buckets", "_by_key_group", "_changed", "_heap", "_held", "_size")

    def __init__(self) -> None:
        self._buckets: dict[int, dict[Timer, int]] = {}
        self._by_key_group: dict[int, set[Timer]] = {}
        self._heap: list[int] = []
        self._size = 0
        self._held: set[int] = set()
        """Key groups whose set a snapshot holds: copied before their next change."""
        self._changed: dict[int, set[Timer]] | None = None
        """Per key group, the timers added or removed since the last `take_changes` (None:
        not tracked)."""

    def __len__(self) -> int:
        return self._size

    def add(self, timer: Timer, key_group: int) -> None:
        """Add `timer` unless it is already there."""
        timestamp = timer[0]
        bucket = self._buckets.get(timestamp)
        if bucket is None:
            self._buckets[timestamp] = {timer: key_group}
            heapq.heappush(self._heap, timestamp)
        elif timer in bucket:
            return
        else:
            # A bucket being fired is no longer in the heap; the firing loop sees it grow.
            bucket[timer] = key_group
        group = self._by_key_group.get(key_group)
        if group is None:
            self._by_key_group[key_group] = {timer}
            self._held.discard(key_group)  # a new set: no snapshot holds it
        elif key_group in self._held:
            self._writable(key_group).add(timer)
        else:
            group.add(timer)
        self._size += 1
        if self._changed is not None:
            self._record(timer, key_group)

    def remove(self, timer: Timer) -> None:
        """Remove `timer` if it is there."""
        bucket = self._buckets.get(timer[0])
        if bucket is None:
            return
        key_group = bucket.pop(timer, None)
        if key_group is None:
            return
        if not bucket:
            del self._buckets[timer[0]]
        self._forget(timer, key_group)
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._buckets):
            # In place: a firing loop up the stack holds the list.
            self._heap[:] = self._buckets
            heapq.heapify(self._heap)

    def earliest_timestamp(self) -> int | None:
        """The earliest timestamp with a timer, or None; drops emptied ones from the top."""
        heap, buckets = self._heap, self._buckets
        while heap and heap[0] not in buckets:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def fire_until(self, timestamp: int, callback: Callable[[Timer], None]) -> None:
        """Remove and pass to `callback`, in order, every timer due at `timestamp`.

        Timers the callbacks add or delete meanwhile are honoured: added ones fire in
        this call if due, deleted ones do not fire. If a callback raises, the timers
        not yet fired stay registered.
        """
        heap, buckets, by_key_group = self._heap, self._buckets, self._by_key_group
        held = self._held
        while heap and heap[0] <= timestamp:
            bucket_timestamp = heapq.heappop(heap)
            bucket = buckets.get(bucket_timestamp)
            if bucket is None:
                continue
            try:
                while bucket:
                    ordered = sorted(bucket, key=tie_order) if len(bucket) > 1 else list(bucket)
                    for timer in ordered:
                        key_group = bucket.pop(timer, None)
                        if key_group is None:
                            continue  # deleted by an earlier callback
                        group = by_key_group[key_group]
                        if key_group in held:
                            group = self._writable(key_group)
                        group.discard(timer)
                        if not group:
                            del by_key_group[key_group]
                        self._size -= 1
                        if self._changed is not None:
                            self._record(timer, key_group)
                        callback(timer)
            finally:
                if bucket:
                    heapq.heappush(heap, bucket_timestamp)
                elif buckets.get(bucket_timestamp) is bucket:
                    del buckets[bucket_timestamp]

    def timers_of_key_group(self, key_group: int) -> list[Timer]:
        """The timers of one key group, in firing order."""
        return sorted(self._by_key_group.get(key_group, ()), key=sort_key)

    def hold(self) -> dict[int, set[Timer]]:
        """Every key group's timers as they are now, for a snapshot: the sets themselves,
        which this queue copies before it next changes them, so they never change (read
        them on any thread)."""
        self._held.clear()  # in place: `fire_until` may hold it
        self._held.update(self._by_key_group)
        return dict(self._by_key_group)

    def track_changes(self) -> None:
        """Record the timers added and removed from now on (see the class docstring)."""
        self._changed = {}

    def take_changes(self) -> dict[int, set[Timer]]:
        """The timers added or removed per key group since the last call (or since
        `track_changes`), swapped out for an empty record ({} when not tracked)."""
        changed = self._changed
        if changed is None:
            return {}
        self._changed = {}
        return changed

    def _record(self, timer: Timer, key_group: int) -> None:
        assert self._changed is not None
        changed = self._changed.get(key_group)
        if changed is None:
            self._changed[key_group] = {timer}
        else:
            changed.add(timer)

    def _writable(self, key_group: int) -> set[Timer]:
        """Key group `key_group`'s set, copied first if a snapshot holds it."""
        group = self._by_key_group[key_group]
        if key_group in self._held:
            self._held.discard(key_group)
            group = self._by_key_group[key_group] = set(group)
        return group

    def _forget(self, timer: Timer, key_group: int) -> None:
        group = self._writable(key_group)
        group.discard(timer)
        if not group:
            del self._by_key_group[key_group]
        self._size -= 1
        if self._changed is not None:
            self._record(timer, key_group)
