"""`StateTtlConfig`: how long keyed state lives, with PyFlink's names.

A descriptor with `enable_time_to_live(config)` gives state whose values expire `ttl`
after their last write (or read, with `OnReadAndWrite`), on the task's processing-time
clock. `barrierflow.state.ttl` implements it over any keyed state backend.

>>> from barrierflow.core.time import Time
>>> config = (
...     StateTtlConfig.new_builder(Time.seconds(10))
...     .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
...     .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
...     .cleanup_full_snapshot()
...     .build()
... )
>>> config.get_ttl().to_milliseconds(), config.get_cleanup_strategies().in_full_snapshot()
(10000, True)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from barrierflow.core.time import Duration, to_millis
from barrierflow.errors import ConfigurationError

DEFAULT_INCREMENTAL_CLEANUP_SIZE = 5
"""Entries an access checks when background cleanup is on and no size was set (Flink's 5)."""

DEFAULT_QUERY_TIME_AFTER_NUM_ENTRIES = 1000
"""Flink's default for the RocksDB compaction filter (accepted; see
`Builder.cleanup_in_rocksdb_compact_filter`)."""


class _UpdateType(enum.Enum):
    """When the last-access timestamp that a value expires from is set."""

    Disabled = 0
    """No TTL: the state never expires."""
    OnCreateAndWrite = 1
    """On every write (update, add, put)."""
    OnReadAndWrite = 2
    """On every write and on every read that returns the value."""


class _StateVisibility(enum.Enum):
    """Whether a read may return a value that expired but was not removed yet."""

    ReturnExpiredIfNotCleanedUp = 0
    """An expired value still stored is returned once (the read removes it)."""
    NeverReturnExpired = 1
    """An expired value reads as absent."""


class _TtlTimeCharacteristic(enum.Enum):
    """Which clock TTL counts on (Flink supports processing time only)."""

    ProcessingTime = 0


class _Strategies(enum.Enum):
    FULL_STATE_SCAN_SNAPSHOT = 0
    INCREMENTAL_CLEANUP = 1
    ROCKSDB_COMPACTION_FILTER = 2


@dataclass(frozen=True)
class _EmptyCleanupStrategy:
    """A strategy without settings (full snapshot)."""


@dataclass(frozen=True)
class _IncrementalCleanupStrategy:
    """Each access to the state (and, with `run_cleanup_for_every_record`, each record
    processed) also checks `cleanup_size` further keys of it."""

    cleanup_size: int
    run_cleanup_for_every_record_: bool = False

    def get_cleanup_size(self) -> int:
        return self.cleanup_size

    def run_cleanup_for_every_record(self) -> bool:
        return self.run_cleanup_for_every_record_


@dataclass(frozen=True)
class _RocksdbCompactFilterCleanupStrategy:
    """Flink's RocksDB compaction filter; barrierflow runs the incremental sweep instead."""

    query_time_after_num_entries: int
    periodic_compaction_time: Duration | None = None

    def get_query_time_after_num_entries(self) -> int:
        return self.query_time_after_num_entries

    def get_periodic_compaction_time(self) -> Duration | None:
        return self.periodic_compaction_time


@dataclass(frozen=True)
class _CleanupStrategies:
    """Which cleanups run besides the one every read does (PyFlink's `CleanupStrategies`)."""

    strategies: tuple[tuple[_Strategies, Any], ...]
    is_cleanup_in_background_: bool = True

    Strategies = _Strategies
    EmptyCleanupStrategy = _EmptyCleanupStrategy
    IncrementalCleanupStrategy = _IncrementalCleanupStrategy
    RocksdbCompactFilterCleanupStrategy = _RocksdbCompactFilterCleanupStrategy

    def _get(self, strategy: _Strategies) -> Any:
        return dict(self.strategies).get(strategy)

    def is_cleanup_in_background(self) -> bool:
        return self.is_cleanup_in_background_

    def in_full_snapshot(self) -> bool:
        """Whether a snapshot leaves expired entries out."""
        return self._get(_Strategies.FULL_STATE_SCAN_SNAPSHOT) is not None

    def get_incremental_cleanup_strategy(self) -> _IncrementalCleanupStrategy | None:
        """The incremental strategy set, else Flink's default (5, False) while background
        cleanup is on, else None."""
        configured = self._get(_Strategies.INCREMENTAL_CLEANUP)
        if configured is None and self.is_cleanup_in_background_:
            return _IncrementalCleanupStrategy(DEFAULT_INCREMENTAL_CLEANUP_SIZE, False)
        return configured

    def get_rocksdb_compact_filter_cleanup_strategy(
        self,
    ) -> _RocksdbCompactFilterCleanupStrategy | None:
        configured = self._get(_Strategies.ROCKSDB_COMPACTION_FILTER)
        if configured is None and self.is_cleanup_in_background_:
            return _RocksdbCompactFilterCleanupStrategy(DEFAULT_QUERY_TIME_AFTER_NUM_ENTRIES)
        return configured


@dataclass(frozen=True)
class StateTtlConfig:
    """Time to live of keyed state (PyFlink's `StateTtlConfig`); build it with `new_builder`.

    Equal settings compare equal, so two descriptors built alike declare the same state.
    """

    update_type: _UpdateType
    state_visibility: _StateVisibility
    ttl_time_characteristic: _TtlTimeCharacteristic
    ttl: Duration
    cleanup_strategies: _CleanupStrategies = field(default_factory=lambda: _CleanupStrategies(()))

    UpdateType = _UpdateType
    StateVisibility = _StateVisibility
    TtlTimeCharacteristic = _TtlTimeCharacteristic
    CleanupStrategies = _CleanupStrategies

    def __post_init__(self) -> None:
        if self.ttl.to_milliseconds() <= 0:
            raise ConfigurationError(
                f"a state TTL must be positive, got {self.ttl.to_milliseconds()} ms"
            )

    @staticmethod
    def new_builder(ttl: Duration | int) -> _Builder:
        """A builder with Flink's defaults: OnCreateAndWrite, NeverReturnExpired, processing
        time, background cleanup on. `ttl`: a Duration (`Time.seconds(1)`) or milliseconds."""
        return _Builder(ttl)

    def get_update_type(self) -> _UpdateType:
        return self.update_type

    def get_state_visibility(self) -> _StateVisibility:
        return self.state_visibility

    def get_ttl(self) -> Duration:
        return self.ttl

    def get_ttl_time_characteristic(self) -> _TtlTimeCharacteristic:
        return self.ttl_time_characteristic

    def is_enabled(self) -> bool:
        """False for `UpdateType.Disabled`: the state then never expires."""
        return self.update_type is not _UpdateType.Disabled

    def get_cleanup_strategies(self) -> _CleanupStrategies:
        return self.cleanup_strategies


class _Builder:
    """PyFlink's `StateTtlConfig.Builder`: every setter returns the builder."""

    def __init__(self, ttl: Duration | int) -> None:
        self._ttl = _duration(ttl)
        self._update_type = _UpdateType.OnCreateAndWrite
        self._state_visibility = _StateVisibility.NeverReturnExpired
        self._ttl_time_characteristic = _TtlTimeCharacteristic.ProcessingTime
        self._is_cleanup_in_background = True
        self._strategies: dict[_Strategies, Any] = {}

    def set_update_type(self, update_type: _UpdateType) -> _Builder:
        self._update_type = _checked(update_type, _UpdateType, "update type")
        return self

    def update_ttl_on_create_and_write(self) -> _Builder:
        return self.set_update_type(_UpdateType.OnCreateAndWrite)

    def update_ttl_on_read_and_write(self) -> _Builder:
        return self.set_update_type(_UpdateType.OnReadAndWrite)

    def set_state_visibility(self, state_visibility: _StateVisibility) -> _Builder:
        self._state_visibility = _checked(state_visibility, _StateVisibility, "state visibility")
        return self

    def return_expired_if_not_cleaned_up(self) -> _Builder:
        return self.set_state_visibility(_StateVisibility.ReturnExpiredIfNotCleanedUp)

    def never_return_expired(self) -> _Builder:
        return self.set_state_visibility(_StateVisibility.NeverReturnExpired)

    def set_ttl_time_characteristic(self, characteristic: _TtlTimeCharacteristic) -> _Builder:
        self._ttl_time_characteristic = _checked(
            characteristic, _TtlTimeCharacteristic, "TTL time characteristic"
        )
        return self

    def use_processing_time(self) -> _Builder:
        return self.set_ttl_time_characteristic(_TtlTimeCharacteristic.ProcessingTime)

    def cleanup_full_snapshot(self) -> _Builder:
        """Leave expired entries out of every snapshot the heap backend writes, and out of
        savepoints (canonical snapshots) of every backend."""
        self._strategies[_Strategies.FULL_STATE_SCAN_SNAPSHOT] = _EmptyCleanupStrategy()
        return self

    def cleanup_incrementally(
        self, cleanup_size: int, run_cleanup_for_every_record: bool = False
    ) -> _Builder:
        """Each access to the state also checks up to `cleanup_size` further keys of it and
        removes their expired entries; with `run_cleanup_for_every_record`, so does every
        record the operator processes, touching the state or not (Flink's semantics; see
        docs/state-backends.md)."""
        if isinstance(cleanup_size, bool) or not isinstance(cleanup_size, int) or cleanup_size < 0:
            raise ConfigurationError(f"cleanup_size must be an int >= 0, got {cleanup_size!r}")
        self._strategies[_Strategies.INCREMENTAL_CLEANUP] = _IncrementalCleanupStrategy(
            cleanup_size, bool(run_cleanup_for_every_record)
        )
        return self

    def cleanup_in_rocksdb_compact_filter(
        self,
        query_time_after_num_entries: int,
        periodic_compaction_time: Duration | int | None = None,
    ) -> _Builder:
        """Flink removes expired entries in RocksDB's compactions. rocksdict exposes no
        compaction-filter callback, so barrierflow runs the incremental sweep instead (on
        both backends); the arguments are accepted and kept."""
        period = None if periodic_compaction_time is None else _duration(periodic_compaction_time)
        self._strategies[_Strategies.ROCKSDB_COMPACTION_FILTER] = (
            _RocksdbCompactFilterCleanupStrategy(int(query_time_after_num_entries), period)
        )
        return self

    def disable_cleanup_in_background(self) -> _Builder:
        """No default incremental sweep; cleanups configured explicitly still run."""
        self._is_cleanup_in_background = False
        return self

    def set_ttl(self, ttl: Duration | int) -> _Builder:
        self._ttl = _duration(ttl)
        return self

    def build(self) -> StateTtlConfig:
        return StateTtlConfig(
            self._update_type,
            self._state_visibility,
            self._ttl_time_characteristic,
            self._ttl,
            _CleanupStrategies(
                tuple(sorted(self._strategies.items(), key=lambda item: item[0].value)),
                self._is_cleanup_in_background,
            ),
        )


StateTtlConfig.Builder = _Builder  # type: ignore[attr-defined]

for _nested, _qualname in (
    (_UpdateType, "StateTtlConfig.UpdateType"),
    (_StateVisibility, "StateTtlConfig.StateVisibility"),
    (_TtlTimeCharacteristic, "StateTtlConfig.TtlTimeCharacteristic"),
    (_Builder, "StateTtlConfig.Builder"),
    (_CleanupStrategies, "StateTtlConfig.CleanupStrategies"),
    (_Strategies, "StateTtlConfig.CleanupStrategies.Strategies"),
    (_EmptyCleanupStrategy, "StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy"),
    (_IncrementalCleanupStrategy, "StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy"),
    (
        _RocksdbCompactFilterCleanupStrategy,
        "StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy",
    ),
):
    # PyFlink's nested names in reprs and pickles (a descriptor travels to the tasks pickled).
    _nested.__qualname__ = _qualname
    _nested.__name__ = _qualname.rsplit(".", 1)[1]


def _duration(ttl: Duration | int) -> Duration:
    try:
        return Duration.of_millis(to_millis(ttl, "a state TTL"))
    except (TypeError, ValueError) as error:
        raise ConfigurationError(str(error)) from error


def _checked(value: Any, kind: type[enum.Enum], what: str) -> Any:
    if not isinstance(value, kind):
        raise ConfigurationError(f"expected a StateTtlConfig {what}, got {value!r:.200}")
    return value
