"""State TTL: value, list and map state whose entries expire, over any keyed backend.

`enable_time_to_live(StateTtlConfig...)` on a descriptor makes `keyed_state_handle`
(`state/handles.py`) wrap the backend's own handle in a TTL handle (`state/ttl_states.py`);
this module holds what those handles apply: the records, their expiry and the cleanup
sweeps. Built over the
protocol's value/list/map handles only, so the heap and the on-disk backend both have
TTL without code of their own.

Storage, as in Flink: a value is stored as a record `("ttl", value, last_access)`
(epoch milliseconds on the operator's processing-time clock); a list state stores one
record per element and a map state one per entry, so list elements and map entries
expire one by one. A record expires when `last_access + ttl <= now`. Snapshots store the
records as the state's kind stores any value (`docs/savepoint-format.md`).

Reads: an expired record is removed when a read meets it; with `NeverReturnExpired` it
reads as absent, with `ReturnExpiredIfNotCleanedUp` that read still returns it.
`OnReadAndWrite` rewrites a record read live with the current time. A record restored
from a snapshot counts from its stored time, so a value restored after its TTL passed
reads as absent: expired state is never restored as live.

Cleanup (memory and snapshot size only; with `NeverReturnExpired` it never changes what
a read returns):
- full snapshot: the backend's snapshot filter (`set_snapshot_filter`) leaves expired
  records out of what a snapshot writes;
- incremental: each access to the state also checks up to `cleanup_size` further keys of
  it, from a cursor over `backend.keys(name)` that persists across accesses and starts
  over at the end, and removes their expired records; after a complete pass it rests
  until the earliest moment something can have expired. A batched call for n keys
  (`TtlValueState.get_many` & co., `state/batched.py`) is n accesses. With
  `run_cleanup_for_every_record` the sweep also runs for every record: on every
  `set_current_key` of the backend (`RecordSweeps`), and per record of a keyed batch
  (`records_processed`);
- RocksDB compaction filter: rocksdict exposes no compaction-filter callback, so the
  incremental sweep stands in for it (Flink's default size, 5 keys per access).

>>> from barrierflow.core.state_descriptors import ValueStateDescriptor
>>> from barrierflow.core.state_ttl import StateTtlConfig
>>> from barrierflow.state.handles import keyed_state_handle
>>> from barrierflow.state.heap_backend import HeapKeyedStateBackend
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> now = [1_000]
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> descriptor = ValueStateDescriptor("last")
>>> descriptor.enable_time_to_live(StateTtlConfig.new_builder(100).build())
>>> last = keyed_state_handle(backend, descriptor, lambda: now[0])
>>> backend.set_current_key("a")
>>> last.update("x")
>>> now[0] = 1_099
>>> last.value()
'x'
>>> now[0] = 1_100
>>> last.value() is None
True
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from barrierflow.state.backend import KeyedStateBackend

Clock = Callable[[], int]
"""The operator's processing-time clock: epoch milliseconds."""


TTL_RECORD = "ttl"
"""The first item of every TTL record (tells records from values stored without TTL)."""

Record = tuple[str, Any, int]
"""A stored value with its last-access time: `(TTL_RECORD, value, last_access)`, epoch
milliseconds on the operator's processing-time clock. A plain tuple of the value and two
immutables, so pickles, the on-disk backend and the heap backend's copy-on-write handle it
at a plain tuple's cost."""


def ttl_record(value: Any, last_access: int) -> Record:
    """The record that stores `value` as written (or read) at `last_access`."""
    return (TTL_RECORD, value, last_access)


def is_record(stored: Any) -> bool:
    """Whether `stored` is a TTL record."""
    return type(stored) is tuple and len(stored) == 3 and stored[0] == TTL_RECORD


def expired(record: Record, ttl_ms: int, now: int) -> bool:
    """Whether `record` expired at `now` (Flink's rule: at exactly `last_access + ttl`)."""
    return record[2] + ttl_ms <= now


# ---- what survives a cleanup (pure: the snapshot filter and the sweep use them) -----------


def live_value(stored: Any, ttl_ms: int, now: int) -> Any:
    """A value state's record, or None if it expired."""
    if is_record(stored) and expired(stored, ttl_ms, now):
        return None
    return stored


def live_list(stored: Any, ttl_ms: int, now: int) -> Any:
    """A list state's records without the expired ones (the same list if none expired),
    or None if none is left."""
    if not isinstance(stored, list):
        return stored
    live = [r for r in stored if not (is_record(r) and expired(r, ttl_ms, now))]
    if len(live) == len(stored):
        return stored
    return live or None


def live_map(stored: Any, ttl_ms: int, now: int) -> Any:
    """A map state's entries without the expired ones (the same dict if none expired), or
    None if none is left."""
    if not isinstance(stored, dict):
        return stored
    live = {k: r for k, r in stored.items() if not (is_record(r) and expired(r, ttl_ms, now))}
    if len(live) == len(stored):
        return stored
    return live or None


class SnapshotFilter:
    """The full-snapshot cleanup handed to `backend.set_snapshot_filter`: reads the clock
    when called (possibly on the uploader thread) and never changes its argument."""

    __slots__ = ("_clock", "_live", "_ttl_ms")

    def __init__(self, live: Callable[[Any, int, int], Any], ttl_ms: int, clock: Clock) -> None:
        self._live = live
        self._ttl_ms = ttl_ms
        self._clock = clock

    def __call__(self, stored: Any) -> Any:
        return self._live(stored, self._ttl_ms, self._clock())


# ---- the incremental sweep -------------------------------------------------------------------


class IncrementalSweep:
    """Checks up to `size` keys of one state per access, from a cursor over
    `backend.keys(state_name)` kept across calls, and removes their expired records.

    `purge(now)` cleans the backend's current key (the sweep moves it, then sets the
    caller's key back); `purge_many(keys, now)`, where the state has batched access
    (value state), cleans a chunk of keys in one multi-get without moving it. Both return
    the earliest expiry among the records left (None: none left).

    After a complete pass the sweep knows that nothing can expire before the earliest
    expiry it saw or the pass's start plus the TTL (what was written since expires after
    that), and does nothing until then.
    """

    __slots__ = (
        "_backend",
        "_cursor",
        "_idle_until",
        "_name",
        "_pass_earliest",
        "_pass_start",
        "_purge",
        "_purge_many",
        "_size",
        "_ttl",
    )

    def __init__(
        self,
        backend: KeyedStateBackend,
        state_name: str,
        size: int,
        ttl_ms: int,
        purge: Callable[[int], int | None],
        purge_many: Callable[[list[Any], int], int | None] | None = None,
    ) -> None:
        self._backend = backend
        self._name = state_name
        self._size = size
        self._ttl = ttl_ms
        self._purge = purge
        self._purge_many = purge_many
        self._cursor: Iterator[Any] | None = None
        self._pass_start = 0
        self._pass_earliest: int | None = None
        self._idle_until: int | None = None

    def run(self, now: int, accesses: int = 1) -> None:
        """Check up to `size` keys per access (`accesses` of them at once: a batched call
        for n keys is n accesses)."""
        if self._idle_until is not None and now < self._idle_until:
            return
        left = self._size * accesses
        restarted = False
        while left > 0:
            if self._cursor is None:
                self._cursor = self._backend.keys(self._name)
                self._pass_start = now
                self._pass_earliest = None
                self._idle_until = None
            chunk = list(itertools.islice(self._cursor, left))
            if chunk:
                self._check(chunk, now)
                left -= len(chunk)
            if left > 0:  # the cursor is at its end: the pass is complete
                self._end_pass()
                if restarted or (self._idle_until is not None and now < self._idle_until):
                    return
                restarted = True

    def _check(self, keys: list[Any], now: int) -> None:
        if self._purge_many is not None:
            earliest = self._purge_many(keys, now)
        else:
            earliest = None
            backend = self._backend
            had_key = backend.current_key_group is not None
            current = backend.current_key
            try:
                for key in keys:
                    select_key(backend, key)
                    found = self._purge(now)
                    if found is not None and (earliest is None or found < earliest):
                        earliest = found
            finally:
                if had_key:
                    select_key(backend, current)
        if earliest is not None and (self._pass_earliest is None or earliest < self._pass_earliest):
            self._pass_earliest = earliest

    def _end_pass(self) -> None:
        self._cursor = None
        bound = self._pass_start + self._ttl
        earliest = self._pass_earliest
        self._idle_until = bound if earliest is None or earliest > bound else earliest


def select_key(backend: KeyedStateBackend, key: Any) -> None:
    """`backend.set_current_key(key)` without the per-record sweeps (`RecordSweeps`): for
    the sweeps' and batched handles' own key moves, which are no records."""
    type(backend).set_current_key(backend, key)


# ---- run_cleanup_for_every_record --------------------------------------------------------------


_RECORD_SWEEPS = "_ttl_record_sweeps"
"""The attribute of a backend that holds its `RecordSweeps`."""


class RecordSweeps:
    """Flink's key-selection listener for TTL (`cleanup_incrementally(size, True)`): the
    sweeps of such states also run on every record processed, i.e. every time an
    operator selects a record's key, whether or not the record touches the state.

    Installed over the backend's `set_current_key` (an attribute of the instance, so
    backends without such states pay nothing); keyed batch operators, which select no
    key per record, report their records with `records_processed`.
    """

    __slots__ = ("_running", "_select", "_sweeps")

    def __init__(self, select: Callable[[Any], None]) -> None:
        self._select = select
        self._sweeps: list[tuple[IncrementalSweep, Clock]] = []
        self._running = False

    def __call__(self, key: Any) -> None:
        self._select(key)
        self.records_processed(1)

    def records_processed(self, count: int) -> None:
        """Run every registered sweep for `count` records."""
        if self._running or count <= 0:
            return
        self._running = True
        try:
            for sweep, clock in self._sweeps:
                sweep.run(clock(), count)
        finally:
            self._running = False


def sweep_on_every_record(
    backend: KeyedStateBackend, sweep: IncrementalSweep, clock: Clock
) -> None:
    """Run `sweep` also for every record `backend` is scoped to (`RecordSweeps`)."""
    sweeps = vars(backend).get(_RECORD_SWEEPS)
    if sweeps is None:
        sweeps = RecordSweeps(backend.set_current_key)
        setattr(backend, _RECORD_SWEEPS, sweeps)
        backend.set_current_key = sweeps  # type: ignore[method-assign]
    sweeps._sweeps.append((sweep, clock))


def records_processed(backend: KeyedStateBackend, count: int) -> None:
    """Tell the per-record sweeps of `backend`'s states (if any) that `count` records were
    processed without a `set_current_key` each (a batch of a keyed batch operator)."""
    sweeps = getattr(backend, "__dict__", {}).get(_RECORD_SWEEPS)
    if sweeps is not None:
        sweeps.records_processed(count)
