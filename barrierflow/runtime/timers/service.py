"""The timer service of one keyed operator (Flink's InternalTimerServiceImpl): register,
fire, snapshot per key group, restore any key-group range."""

from __future__ import annotations

import pickle
from collections.abc import Hashable, Iterator, Sequence

from barrierflow import _envelope as checkpoint_format
from barrierflow import _fs
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.timers import changelog
from barrierflow.runtime.timers.changelog import TimerChangelogSnapshot
from barrierflow.runtime.timers.priority_queue import TimerPriorityQueue
from barrierflow.runtime.timers.snapshot import (
    DOMAINS,
    HEADER_VERSION,
    SNAPSHOT_KIND,
    TimerSnapshot,
    decode_sections,
)
from barrierflow.runtime.timers.timer import (
    MIN_WATERMARK,
    Timer,
    Triggerable,
    checked_timestamp,
    new_timer,
)
from barrierflow.state.heap_changelog import DirtyLog
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group
from barrierflow.state.rocksdb_encoding import section_kind

_NONE: frozenset[Timer] = frozenset()


class InternalTimerService:
    """Event-time and processing-time timers of one keyed operator, for one key-group range.

    Guarantees: each (key, namespace, timestamp) is registered at most once per time
    domain; timers fire in timestamp order (ties in `Timer` order); an event-time
    timer fires once the watermark reaches its timestamp, including timers that the
    callbacks register during the same advance; the watermark never goes backwards.
    Assumes one thread (the task's mailbox thread) and keys of this subtask's
    key-group range. Keys and namespaces must be hashable and picklable.

    >>> from barrierflow.state.key_groups import KeyGroupRange
    >>> class Collect:
    ...     def __init__(self):
    ...         self.fired = []
    ...     def on_event_time(self, timer):
    ...         self.fired.append((timer.key, timer.timestamp))
    ...     def on_processing_time(self, timer):
    ...         pass
    >>> out = Collect()
    >>> service = InternalTimerService(KeyGroupRange(0, 127), 128, out)
    >>> for key, ts in [("a", 30), ("b", 10), ("a", 20)]:
    ...     service.register_event_time_timer(key, None, ts)
    >>> service.advance_watermark(25)
    >>> out.fired
    [('b', 10), ('a', 20)]
    >>> service.current_watermark
    25
    """

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        triggerable: Triggerable,
    ) -> None:
        if max_parallelism < 1:
            raise ValueError(f"max_parallelism must be at least 1, got {max_parallelism}")
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self._triggerable = triggerable
        self._first_key_group = key_group_range.start
        self._last_key_group = key_group_range.end
        self._event_time = TimerPriorityQueue()
        self._processing_time = TimerPriorityQueue()
        self._current_watermark = MIN_WATERMARK
        self._log: DirtyLog | None = None
        """Changelog checkpoints: the chain and the changes not yet in it (None: off)."""

    def enable_changelog(self) -> None:
        """Checkpoints from now on write the timers added and removed since the last
        completed one, not all (`changelog.py`). Call before `restore`."""
        self._log = DirtyLog()
        self._event_time.track_changes()
        self._processing_time.track_changes()

    # -- Properties ---------------------------------------------------------

    @property
    def current_watermark(self) -> int:
        """The highest watermark seen, MIN_WATERMARK before the first one."""
        return self._current_watermark

    def num_event_time_timers(self) -> int:
        """How many event-time timers are registered."""
        return len(self._event_time)

    def num_processing_time_timers(self) -> int:
        """How many processing-time timers are registered."""
        return len(self._processing_time)

    def next_processing_time(self) -> int | None:
        """The earliest registered processing-time timestamp, or None.

        The task schedules one wake-up for it and re-reads it after every call that
        may register, delete or fire a processing-time timer.
        """
        return self._processing_time.earliest_timestamp()

    def event_time_timers(self, key: Hashable) -> Iterator[Timer]:
        """The event-time timers of `key`, in firing order.

        Costs one pass over the timers of the key's key group (not of all keys).
        """
        return self._timers_of_key(self._event_time, key)

    def processing_time_timers(self, key: Hashable) -> Iterator[Timer]:
        """The processing-time timers of `key`, in firing order (one key group's pass)."""
        return self._timers_of_key(self._processing_time, key)

    # -- Registration -------------------------------------------------------

    def register_event_time_timer(self, key: Hashable, namespace: Hashable, timestamp: int) -> None:
        """Fire `on_event_time` once the watermark reaches `timestamp`; no-op if registered."""
        timer = new_timer(Timer, (checked_timestamp(timestamp), key, namespace))
        self._event_time.add(timer, self._key_group_of(key))

    def register_processing_time_timer(
        self, key: Hashable, namespace: Hashable, timestamp: int
    ) -> None:
        """Fire `on_processing_time` once processing time reaches `timestamp`; no-op if registered.

        The task must then re-read `next_processing_time()`: it is earlier if this
        timer is the earliest.
        """
        timer = new_timer(Timer, (checked_timestamp(timestamp), key, namespace))
        self._processing_time.add(timer, self._key_group_of(key))

    def delete_event_time_timer(self, key: Hashable, namespace: Hashable, timestamp: int) -> None:
        """Forget an event-time timer; no-op if it is not registered."""
        self._key_group_of(key)
        self._event_time.remove(Timer(checked_timestamp(timestamp), key, namespace))

    def delete_processing_time_timer(
        self, key: Hashable, namespace: Hashable, timestamp: int
    ) -> None:
        """Forget a processing-time timer; no-op if it is not registered."""
        self._key_group_of(key)
        self._processing_time.remove(Timer(checked_timestamp(timestamp), key, namespace))

    # -- Firing ---------------------------------------------------------------

    def advance_watermark(self, watermark_ms: int) -> None:
        """Fire every event-time timer with timestamp <= `watermark_ms`, in order.

        A timer registered by a callback fires in the same call if it is due too. A
        watermark at or below the current one changes nothing and fires nothing.
        """
        watermark_ms = checked_timestamp(watermark_ms)
        if watermark_ms <= self._current_watermark:
            return
        self._current_watermark = watermark_ms
        self._event_time.fire_until(watermark_ms, self._triggerable.on_event_time)

    def on_processing_time(self, now_ms: int) -> None:
        """Fire every processing-time timer with timestamp <= `now_ms`, in order.

        Timers registered by the callbacks fire in the same call if they are due.
        Afterwards the task re-reads `next_processing_time()` to schedule its wake-up.
        """
        now_ms = checked_timestamp(now_ms)
        self._processing_time.fire_until(now_ms, self._triggerable.on_processing_time)

    # -- Snapshot and restore -------------------------------------------------

    def snapshot(self) -> bytes:
        """All timers, copied now, as a "timers" envelope in its canonical form (timestamps
        ascending; `snapshot.py`)."""
        return self.hold().encode(ordered=True)

    def hold(self, checkpoint_id: int | None = None) -> TimerSnapshot | TimerChangelogSnapshot:
        """The synchronous part of a snapshot: each key group's timers of both domains as
        they are now (copy-on-write, `TimerPriorityQueue.hold`), encoded later on the
        uploader thread. With changelog checkpoints and a `checkpoint_id`, also the changes
        since the last snapshot, swapped out (a savepoint's fold into the next delta)."""
        event_time, processing_time = self._event_time.hold(), self._processing_time.hold()
        held = TimerSnapshot(
            self.max_parallelism,
            (self._first_key_group, self._last_key_group),
            [
                (group, event_time.get(group, _NONE), processing_time.get(group, _NONE))
                for group in sorted(event_time.keys() | processing_time.keys())
            ],
        )
        if self._log is None or checkpoint_id is None:
            return held
        changes = zip(DOMAINS, (self._event_time, self._processing_time), strict=True)
        dirty = {domain: queue.take_changes() for domain, queue in changes}
        live = len(self._event_time) + len(self._processing_time)
        confirmed, records = self._log.snapshot(checkpoint_id, dirty, live)
        return TimerChangelogSnapshot(held, confirmed, records)

    def checkpoint(self, checkpoint_id: int) -> TimerSnapshot | TimerChangelogSnapshot | None:
        """What checkpoint (or savepoint) `checkpoint_id` holds of the timers (`hold`), or
        None when there are none. With changelog checkpoints the chain then ends: once that
        checkpoint completes, no retained one may need the chain's files, so the next
        checkpoint with timers writes a new base."""
        if self.num_event_time_timers() or self.num_processing_time_timers():
            return self.hold(checkpoint_id)
        if self._log is not None:
            self._forget_chain()
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Changelog: later deltas build on this checkpoint's chain."""
        if self._log is not None:
            self._log.complete(checkpoint_id)

    def restore(self, snapshots: Sequence[bytes], base: _fs.Location | None = None) -> None:
        """Add the timers of this service's key groups found in `snapshots`.

        `snapshots` may come from any number of subtasks with any key-group ranges
        (rescaling); sections of other key groups are skipped without unpickling. A
        changelog manifest is read with its chain, whose files resolve against `base`
        (the checkpoint's folder). Processing-time timers already in the past fire at the
        next `on_processing_time` call. The watermark is not part of a snapshot.
        """
        for data in snapshots:
            if section_kind(data) == changelog.MANIFEST_KIND:
                data = changelog.changelog_to_canonical(data, base, self.key_group_range)
            header, body = checkpoint_format.decode(data, SNAPSHOT_KIND)
            version = header.get("version") if isinstance(header, dict) else None
            if version != HEADER_VERSION:
                raise StateRestoreError(
                    f"timer snapshot header version {version!r}; this barrierflow reads "
                    f"version {HEADER_VERSION}"
                )
            if header.get("max_parallelism") != self.max_parallelism:
                raise StateRestoreError(
                    f"timer snapshot has max parallelism {header.get('max_parallelism')}, "
                    f"this job has {self.max_parallelism}: key groups cannot be mapped"
                )
            try:
                for key_group, (event_time, processing_time) in decode_sections(
                    header["key_groups"], body, DOMAINS, self.key_group_range
                ):
                    for timer in event_time:
                        self._event_time.add(timer, key_group)
                    for timer in processing_time:
                        self._processing_time.add(timer, key_group)
            except (KeyError, TypeError, ValueError, pickle.UnpicklingError) as error:
                raise StateRestoreError(f"timer snapshot cannot be read: {error!r}") from error
        if self._log is not None:
            self._forget_chain()

    # -- Internals ------------------------------------------------------------

    def _forget_chain(self) -> None:
        """Changelog: the next checkpoint writes a new base (the changes so far are in it)."""
        assert self._log is not None
        self._event_time.take_changes()
        self._processing_time.take_changes()
        self._log.restored(None)

    def _key_group_of(self, key: Hashable) -> int:
        key_group = assign_to_key_group(key, self.max_parallelism)
        if not self._first_key_group <= key_group <= self._last_key_group:
            raise ValueError(
                f"key {key!r} is in key group {key_group}, outside this timer service's "
                f"key-group range {self._first_key_group}..{self._last_key_group}"
            )
        return key_group

    def _timers_of_key(self, queue: TimerPriorityQueue, key: Hashable) -> Iterator[Timer]:
        timers = queue.timers_of_key_group(self._key_group_of(key))
        return iter([timer for timer in timers if timer[1] == key])
