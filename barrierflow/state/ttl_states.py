"""The TTL handles: value, list and map state whose entries expire, over the wrapped
handle of any keyed backend.

`keyed_state_handle` (`state/handles.py`) wraps the backend's own handle in one of these
when the descriptor enables TTL. What a record is, when it expires and how the cleanup
sweeps run is `state/ttl.py`'s; these classes apply it on every read and write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from barrierflow.core.state_ttl import StateTtlConfig
from barrierflow.errors import StateRestoreError
from barrierflow.state.ttl import (
    TTL_RECORD,
    Clock,
    IncrementalSweep,
    Record,
    expired,
    is_record,
    live_list,
    ttl_record,
)
from barrierflow.state.values import ListState, MapState, State, ValueState

_ABSENT = object()


def _record(stored: Any, state_name: str) -> Record:
    if not is_record(stored):
        raise StateRestoreError(
            f"state {state_name!r} holds {type(stored).__name__} values without TTL timestamps: "
            "it was written while its descriptor had no TTL. Turning TTL on for existing state "
            "is not supported (as in Flink); give the state a new name"
        )
    return stored


class _TtlState(State):
    """What every TTL handle shares: the wrapped handle, the settings, the clock, the sweep."""

    __slots__ = ("_clock", "_inner", "_name", "_on_read", "_return_expired", "_sweep", "_ttl")

    def __init__(self, inner: Any, name: str, config: StateTtlConfig, clock: Clock) -> None:
        self._inner = inner
        self._name = name
        self._ttl = config.get_ttl().to_milliseconds()
        self._on_read = config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
        self._return_expired = (
            config.get_state_visibility()
            is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
        )
        self._clock = clock
        self._sweep: IncrementalSweep | None = None

    def sweep_with(self, sweep: IncrementalSweep) -> None:
        """Run `sweep` after every access (incremental cleanup)."""
        self._sweep = sweep

    def _after_access(self, now: int, accesses: int = 1) -> None:
        if self._sweep is not None:
            self._sweep.run(now, accesses)

    def purge_current(self, now: int) -> int | None:
        """Remove the current key's expired records (the sweep's step); returns the
        earliest expiry among the records left, None if none is left."""
        raise NotImplementedError

    def clear(self) -> None:
        self._inner.clear()
        self._after_access(self._clock())


class TtlValueState(_TtlState, ValueState):
    """A `ValueState` whose value expires `ttl` after its last write (or read)."""

    __slots__ = ()

    def value(self) -> Any:
        now = self._clock()
        stored = self._inner.value()
        result = None
        if stored is not None:
            record = _record(stored, self._name)
            if expired(record, self._ttl, now):
                self._inner.clear()
                if self._return_expired:
                    result = record[1]
            else:
                if self._on_read:
                    self._inner.update(ttl_record(record[1], now))
                result = record[1]
        self._after_access(now)
        return result

    def update(self, value: Any) -> None:
        now = self._clock()
        if value is None:
            self._inner.clear()
        else:
            self._inner.update(ttl_record(value, now))
        self._after_access(now)

    def purge_current(self, now: int) -> int | None:
        stored = self._inner.value()
        if not is_record(stored):
            return None
        if expired(stored, self._ttl, now):
            self._inner.clear()
            return None
        return stored[2] + self._ttl

    # batched access (`state/batched.py`), over the backend handle's multi-key methods: the
    # same results as value() / update() / clear() per key in order, one sweep access per key

    def get_many(self, keys: Sequence[Any], key_groups: Any = None) -> list[Any]:
        """Each key's live value (None where it has none or it expired), in order."""
        now = self._clock()
        stored = self._inner.get_many(keys, key_groups)
        oldest_live = now - self._ttl  # a record expired iff its time <= this
        result: list[Any] = []
        append = result.append
        gone: list[int] = []
        removed: set[Any] = set()
        for index, found in enumerate(stored):
            if found is None:
                append(None)
            elif type(found) is not tuple or len(found) != 3 or found[0] != TTL_RECORD:
                _record(found, self._name)  # raises: a value stored without TTL
            elif found[2] > oldest_live:
                append(found[1])
            elif removed and keys[index] in removed:
                append(None)  # a key met expired earlier in this call is removed
            else:
                removed.add(keys[index])
                gone.append(index)
                append(found[1] if self._return_expired else None)
        if gone:
            self._inner.remove_many(*_picked(gone, keys, key_groups))
        if self._on_read:
            read = [
                i for i, found in enumerate(stored) if found is not None and found[2] > oldest_live
            ]
            if read:
                picked_keys, picked_groups = _picked(read, keys, key_groups)
                records = [ttl_record(result[i], now) for i in read]
                self._inner.put_many(picked_keys, records, picked_groups)
        self._after_access(now, len(keys))
        return result

    def put_many(self, keys: Sequence[Any], values: Sequence[Any], key_groups: Any = None) -> None:
        """Set each key's value as written now, in order (None removes it)."""
        now = self._clock()
        records = [None if value is None else (TTL_RECORD, value, now) for value in values]
        self._inner.put_many(keys, records, key_groups)
        self._after_access(now, len(keys))

    def remove_many(self, keys: Sequence[Any], key_groups: Any = None) -> None:
        """Remove each key's value."""
        now = self._clock()
        self._inner.remove_many(keys, key_groups)
        self._after_access(now, len(keys))

    def purge_many(self, keys: list[Any], now: int) -> int | None:
        """The sweep's step for many keys at once: one multi-get, one multi-remove."""
        earliest: int | None = None
        gone = []
        for key, stored in zip(keys, self._inner.get_many(keys), strict=True):
            if not is_record(stored):
                continue
            if expired(stored, self._ttl, now):
                gone.append(key)
            elif earliest is None or stored[2] + self._ttl < earliest:
                earliest = stored[2] + self._ttl
        if gone:
            self._inner.remove_many(gone)
        return earliest


def _picked(indices: list[int], keys: Sequence[Any], key_groups: Any) -> tuple[list[Any], Any]:
    """The keys (and key groups, if given) at `indices`."""
    groups = None if key_groups is None else [key_groups[i] for i in indices]
    return [keys[i] for i in indices], groups


class TtlListState(_TtlState, ListState):
    """A `ListState` whose elements expire one by one, each `ttl` after it was added."""

    __slots__ = ()

    def get(self) -> list[Any]:
        now = self._clock()
        stored = [_record(r, self._name) for r in self._inner.get()]
        live = [r for r in stored if not expired(r, self._ttl, now)]
        returned = stored if self._return_expired else live
        result = [r[1] for r in returned]
        if self._on_read and live:
            self._inner.update([ttl_record(r[1], now) for r in live])
        elif len(live) != len(stored):
            self._inner.update(live)
        self._after_access(now)
        return result

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to a ListState")
        now = self._clock()
        self._inner.add(ttl_record(value, now))
        self._after_access(now)

    def add_all(self, values: Iterable[Any] | None) -> None:
        now = self._clock()
        self._inner.add_all(_records(values, now))
        self._after_access(now)

    def update(self, values: Iterable[Any] | None) -> None:
        now = self._clock()
        self._inner.update(_records(values, now))
        self._after_access(now)

    def purge_current(self, now: int) -> int | None:
        stored = self._inner.get()
        live = live_list(stored, self._ttl, now)
        if live is not stored:
            self._inner.update(live)
        return _earliest(live, self._ttl)


def _records(values: Iterable[Any] | None, now: int) -> list[Record]:
    new = [] if values is None else list(values)
    if any(value is None for value in new):
        raise ValueError("cannot add None to a ListState")
    return [ttl_record(value, now) for value in new]


class TtlMapState(_TtlState, MapState):
    """A `MapState` whose entries expire one by one, each `ttl` after its last write (or
    read)."""

    __slots__ = ()

    def _read(self, key: Any, now: int) -> Any:
        """The live value of `key` (the expired one too, ReturnExpiredIfNotCleanedUp), or
        _ABSENT; removes an expired entry, refreshes a live one on OnReadAndWrite."""
        stored = self._inner.get(key)
        if stored is None:
            return _ABSENT
        record = _record(stored, self._name)
        if expired(record, self._ttl, now):
            self._inner.remove(key)
            return record[1] if self._return_expired else _ABSENT
        if self._on_read:
            self._inner.put(key, ttl_record(record[1], now))
        return record[1]

    def _entries(self, now: int, refresh: bool) -> list[tuple[Any, Any]]:
        """The (key, value) pairs a read returns; removes expired entries, refreshes the
        live ones if `refresh` and OnReadAndWrite."""
        entries = [(k, _record(r, self._name)) for k, r in self._inner.items()]
        result: list[tuple[Any, Any]] = []
        refreshed: dict[Any, Record] = {}
        for key, record in entries:
            if expired(record, self._ttl, now):
                self._inner.remove(key)
                if not self._return_expired:
                    continue
            elif refresh and self._on_read:
                refreshed[key] = ttl_record(record[1], now)
            result.append((key, record[1]))
        if refreshed:
            self._inner.put_all(refreshed)
        self._after_access(now)
        return result

    def get(self, key: Any) -> Any:
        now = self._clock()
        value = self._read(key, now)
        self._after_access(now)
        return None if value is _ABSENT else value

    def put(self, key: Any, value: Any) -> None:
        now = self._clock()
        self._inner.put(key, ttl_record(value, now))
        self._after_access(now)

    def put_all(self, mapping: dict[Any, Any]) -> None:
        now = self._clock()
        if mapping:
            self._inner.put_all({k: ttl_record(v, now) for k, v in mapping.items()})
        self._after_access(now)

    def remove(self, key: Any) -> None:
        now = self._clock()
        self._inner.remove(key)
        self._after_access(now)

    def contains(self, key: Any) -> bool:
        now = self._clock()
        found = self._read(key, now) is not _ABSENT
        self._after_access(now)
        return found

    def keys(self) -> list[Any]:
        return [key for key, _ in self._entries(self._clock(), refresh=True)]

    def values(self) -> list[Any]:
        return [value for _, value in self._entries(self._clock(), refresh=True)]

    def items(self) -> list[tuple[Any, Any]]:
        return self._entries(self._clock(), refresh=True)

    def is_empty(self) -> bool:
        return not self._entries(self._clock(), refresh=False)

    def purge_current(self, now: int) -> int | None:
        earliest: int | None = None
        for key, stored in self._inner.items():
            if not is_record(stored):
                continue
            if expired(stored, self._ttl, now):
                self._inner.remove(key)
            elif earliest is None or stored[2] + self._ttl < earliest:
                earliest = stored[2] + self._ttl
        return earliest


def _earliest(records: Iterable[Any] | None, ttl_ms: int) -> int | None:
    """The earliest expiry among `records` (None if there are none)."""
    times = [r[2] for r in records or () if is_record(r)]
    return min(times) + ttl_ms if times else None
