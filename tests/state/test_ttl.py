"""State TTL (`StateTtlConfig`, `descriptor.enable_time_to_live`), event by event on a
manual processing-time clock: every state kind with each update type and visibility,
expiry exactly at the TTL, list elements and map entries expiring one by one,
snapshot and restore, and the full-snapshot and incremental cleanups; on the heap backend
and, where it is built, the on-disk one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.clocks import ManualClock
from support.ttl import (
    ON_READ,
    ON_WRITE,
    RETURN_EXPIRED,
    T0,
    TTL,
    clock_at,
    config,
    with_ttl,
)

from barrierflow import _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend, HashMapStateBackend
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Time,
    ValueStateDescriptor,
)
from barrierflow.state.backends import create_keyed_backend
from barrierflow.state.handles import keyed_state_handle
from barrierflow.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
)
from barrierflow.state.ttl import ttl_record


def new_backend(kind: str, folder: Any, key_groups: KeyGroupRange | None = None) -> Any:
    settings = HashMapStateBackend() if kind == "heap" else EmbeddedRocksDBStateBackend()
    return create_keyed_backend(settings, key_groups or KeyGroupRange(0, 127), 128, folder)


@pytest.fixture(params=["heap", "rocksdb"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def backends(kind: str, tmp_path: Any) -> Iterator[Any]:
    """Makes backends of the parametrized kind; disposes of them afterwards."""
    made: list[Any] = []

    def make(key_groups: KeyGroupRange | None = None) -> Any:
        backend = new_backend(kind, tmp_path / f"db{len(made)}", key_groups)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        dispose = getattr(backend, "dispose", None)
        if dispose is not None:
            dispose()


def snapshot_bytes(backend: Any) -> bytes:
    """A canonical keyed-state snapshot of `backend`, written now."""
    snapshot = backend.snapshot()
    if isinstance(snapshot, bytes):
        return snapshot
    try:
        return snapshot.write(None)
    finally:
        snapshot.release()


def raw(backend: Any, name: str, key: Any, how: str = "value") -> Any:
    """What the backend stores for `key` in state `name`, read without TTL."""
    backend.set_current_key(key)
    if how == "value":
        return backend.get_value_state(ValueStateDescriptor(name)).value()
    if how == "list":
        return backend.get_list_state(ListStateDescriptor(name)).get()
    return dict(backend.get_map_state(MapStateDescriptor(name)).items())


# ---- configuration ------------------------------------------------------------------------


def test_the_builder_has_flinks_defaults_and_names() -> None:
    ttl = StateTtlConfig.new_builder(Time.seconds(1)).build()
    assert ttl.get_ttl().to_milliseconds() == 1000
    assert ttl.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert ttl.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert ttl.get_ttl_time_characteristic() is StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
    strategies = ttl.get_cleanup_strategies()
    assert strategies.is_cleanup_in_background() and not strategies.in_full_snapshot()
    assert strategies.get_incremental_cleanup_strategy().get_cleanup_size() == 5
    full = (
        StateTtlConfig.new_builder(5_000)
        .cleanup_full_snapshot()
        .cleanup_incrementally(7, True)
        .cleanup_in_rocksdb_compact_filter(2_000)
        .disable_cleanup_in_background()
        .build()
    )
    strategies = full.get_cleanup_strategies()
    assert strategies.in_full_snapshot()
    incremental = strategies.get_incremental_cleanup_strategy()
    assert (incremental.get_cleanup_size(), incremental.run_cleanup_for_every_record()) == (7, True)
    assert (
        strategies.get_rocksdb_compact_filter_cleanup_strategy().get_query_time_after_num_entries()
        == 2_000
    )
    bare = StateTtlConfig.new_builder(5_000).disable_cleanup_in_background().build()
    assert bare.get_cleanup_strategies().get_incremental_cleanup_strategy() is None


def test_bad_settings_are_one_clear_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="must be positive"):
        StateTtlConfig.new_builder(0).build()
    with pytest.raises(ConfigurationError, match="needs a StateTtlConfig"):
        ValueStateDescriptor("v").enable_time_to_live(StateTtlConfig.new_builder(1))
    with pytest.raises(ConfigurationError, match="update type"):
        StateTtlConfig.new_builder(1).set_update_type("OnReadAndWrite")
    with pytest.raises(ConfigurationError, match="cleanup_size"):
        StateTtlConfig.new_builder(1).cleanup_incrementally(-1, False)


def test_a_descriptor_with_ttl_pickles_with_its_config() -> None:
    import pickle

    descriptor = with_ttl(ListStateDescriptor("l"), config(ON_READ, RETURN_EXPIRED))
    copy = pickle.loads(pickle.dumps(descriptor))
    assert copy.time_to_live() == descriptor.time_to_live()
    assert copy.time_to_live().get_update_type() is ON_READ


def test_update_type_disabled_means_no_ttl(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    descriptor = with_ttl(
        ValueStateDescriptor("v"),
        StateTtlConfig.new_builder(TTL).set_update_type(StateTtlConfig.UpdateType.Disabled),
    )
    state = keyed_state_handle(backend, descriptor, clock)
    backend.set_current_key("a")
    state.update(1)
    clock.now += 10 * TTL
    assert state.value() == 1
    assert raw(backend, "v", "a") == 1


# ---- value state --------------------------------------------------------------------------


def test_a_value_expires_exactly_ttl_after_its_write_and_reads_do_not_extend_it(
    backends: Any,
) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), config()), clock)
    backend.set_current_key("a")
    state.update("x")
    assert raw(backend, "v", "a") == ttl_record("x", T0)
    clock.now = T0 + TTL - 1
    assert state.value() == "x"  # a read (OnCreateAndWrite) does not move the expiry
    assert raw(backend, "v", "a") == ttl_record("x", T0)
    clock.now = T0 + TTL
    assert state.value() is None
    assert raw(backend, "v", "a") is None  # the read removed it
    state.update("y")  # a write after expiry starts again
    clock.now = T0 + 2 * TTL - 1
    assert state.value() == "y"


def test_each_key_has_its_own_expiry(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), config()), clock)
    backend.set_current_key("a")
    state.update(1)
    clock.now = T0 + 50
    backend.set_current_key("b")
    state.update(2)
    clock.now = T0 + TTL
    backend.set_current_key("a")
    assert state.value() is None
    backend.set_current_key("b")
    assert state.value() == 2
    clock.now = T0 + 50 + TTL
    assert state.value() is None


def test_on_read_and_write_a_read_extends_the_value(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), config(ON_READ)), clock)
    backend.set_current_key("a")
    state.update("x")
    clock.now = T0 + TTL - 1
    assert state.value() == "x"
    assert raw(backend, "v", "a") == ttl_record("x", T0 + TTL - 1)
    clock.now = T0 + 2 * TTL - 2
    assert state.value() == "x"
    clock.now = T0 + 3 * TTL - 2
    assert state.value() is None


def test_return_expired_if_not_cleaned_up_returns_it_once(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(
        backend, with_ttl(ValueStateDescriptor("v"), config(ON_READ, RETURN_EXPIRED)), clock
    )
    backend.set_current_key("a")
    state.update("x")
    clock.now = T0 + TTL
    assert state.value() == "x"  # expired, still stored: returned, and removed
    assert raw(backend, "v", "a") is None
    assert state.value() is None


def test_clear_and_update_none_remove_the_value(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), config()), clock)
    backend.set_current_key("a")
    state.update(1)
    state.update(None)
    assert raw(backend, "v", "a") is None
    state.update(2)
    state.clear()
    assert state.value() is None


# ---- list state ---------------------------------------------------------------------------


@pytest.mark.parametrize("update", [ON_WRITE, ON_READ])
def test_list_elements_expire_one_by_one(backends: Any, update: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(ListStateDescriptor("l"), config(update)), clock)
    backend.set_current_key("a")
    state.add("first")
    clock.now = T0 + 30
    state.add_all(["second", "third"])
    clock.now = T0 + TTL - 1
    if update is ON_WRITE:
        assert state.get() == ["first", "second", "third"]
        clock.now = T0 + TTL
        assert state.get() == ["second", "third"]
        assert raw(backend, "l", "a", "list") == [
            ttl_record("second", T0 + 30),
            ttl_record("third", T0 + 30),
        ]
        clock.now = T0 + 30 + TTL
        assert state.get() == []
        assert raw(backend, "l", "a", "list") == []
    else:
        # the read at T0 + TTL - 1 refreshes every element it returns
        assert state.get() == ["first", "second", "third"]
        clock.now = T0 + 2 * TTL - 2
        assert state.get() == ["first", "second", "third"]
        clock.now = T0 + 3 * TTL - 2
        assert state.get() == []


def test_a_list_with_return_expired_returns_the_expired_elements_once(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(
        backend, with_ttl(ListStateDescriptor("l"), config(ON_WRITE, RETURN_EXPIRED)), clock
    )
    backend.set_current_key("a")
    state.add(1)
    clock.now = T0 + 50
    state.add(2)
    clock.now = T0 + TTL
    assert state.get() == [1, 2]
    assert state.get() == [2]


def test_list_update_replaces_with_fresh_timestamps_and_refuses_none(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(ListStateDescriptor("l"), config()), clock)
    backend.set_current_key("a")
    state.add(1)
    clock.now = T0 + 60
    state.update([7, 8])
    clock.now = T0 + TTL
    assert state.get() == [7, 8]
    with pytest.raises(ValueError, match="None"):
        state.add(None)
    with pytest.raises(ValueError, match="None"):
        state.add_all([1, None])
    state.update([])
    assert state.get() == []


# ---- map state ----------------------------------------------------------------------------


def test_map_entries_expire_one_by_one(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(MapStateDescriptor("m"), config()), clock)
    backend.set_current_key("a")
    state.put("x", 1)
    clock.now = T0 + 40
    state.put_all({"y": 2, "z": 3})
    clock.now = T0 + TTL - 1
    assert sorted(state.items()) == [("x", 1), ("y", 2), ("z", 3)]
    clock.now = T0 + TTL
    assert state.get("x") is None
    assert not state.contains("x")
    assert "y" in state
    assert sorted(state.keys()) == ["y", "z"]
    assert sorted(state.values()) == [2, 3]
    assert not state.is_empty()
    assert set(raw(backend, "m", "a", "map")) == {"y", "z"}
    clock.now = T0 + 40 + TTL
    assert state.is_empty()
    assert raw(backend, "m", "a", "map") == {}


def test_map_on_read_and_write_extends_only_the_entries_read(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(MapStateDescriptor("m"), config(ON_READ)), clock)
    backend.set_current_key("a")
    state.put_all({"x": 1, "y": 2})
    clock.now = T0 + TTL - 1
    assert state.get("x") == 1  # refreshes x only
    clock.now = T0 + TTL
    assert sorted(state.items()) == [("x", 1)]
    clock.now = T0 + 2 * TTL - 2
    assert state.contains("x")  # contains reads, and refreshes, too
    clock.now = T0 + 3 * TTL - 3
    assert state.get("x") == 1
    clock.now = T0 + 4 * TTL
    assert state.get("x") is None


def test_a_map_with_return_expired_returns_an_expired_entry_once(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(
        backend, with_ttl(MapStateDescriptor("m"), config(ON_WRITE, RETURN_EXPIRED)), clock
    )
    backend.set_current_key("a")
    state.put("x", 1)
    clock.now = T0 + TTL
    assert state.get("x") == 1
    assert state.get("x") is None
    state.put("y", 2)
    clock.now = T0 + 2 * TTL
    assert state.items() == [("y", 2)]
    assert state.items() == []


# ---- reducing and aggregating state -------------------------------------------------------


class Average:
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator: tuple[int, int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


def test_reducing_and_aggregating_state_start_over_once_expired(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    total = keyed_state_handle(
        backend, with_ttl(ReducingStateDescriptor("sum", lambda a, b: a + b), config()), clock
    )
    average = keyed_state_handle(
        backend, with_ttl(AggregatingStateDescriptor("avg", Average()), config()), clock
    )
    backend.set_current_key("a")
    total.add(1)
    average.add(2)
    clock.now = T0 + 60
    total.add(2)  # a write: the folded value lives until T0 + 60 + TTL
    average.add(4)
    clock.now = T0 + 60 + TTL - 1
    assert (total.get(), average.get()) == (3, 3.0)
    clock.now = T0 + 60 + TTL
    assert (total.get(), average.get()) == (None, None)
    total.add(5)
    average.add(5)
    assert (total.get(), average.get()) == (5, 5.0)
    assert raw(backend, "avg", "a") == ttl_record((5, 1), T0 + 60 + TTL)


# ---- snapshots and restore ----------------------------------------------------------------


def _fill(backend: Any, clock: ManualClock, builder: StateTtlConfig.Builder) -> dict[str, Any]:
    """Keys "old" written at T0 and "new" at T0 + 50 in a value, a list and a map state."""
    states = {
        "v": keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), builder), clock),
        "l": keyed_state_handle(backend, with_ttl(ListStateDescriptor("l"), builder), clock),
        "m": keyed_state_handle(backend, with_ttl(MapStateDescriptor("m"), builder), clock),
    }
    for key, at in (("old", T0), ("new", T0 + 50)):
        clock.now = at
        backend.set_current_key(key)
        states["v"].update(key)
        states["l"].add(key)
        states["m"].put(key, at)
    return states


def test_a_restore_keeps_the_unexpired_and_never_returns_the_expired(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    _fill(backend, clock, config())
    data = snapshot_bytes(backend)
    restored = backends()
    restored.restore([data])
    later = clock_at(T0 + TTL)  # the restore happens after "old" expired
    states = _fill_handles(restored, later, config())
    restored.set_current_key("old")
    assert (states["v"].value(), states["l"].get(), states["m"].items()) == (None, [], [])
    restored.set_current_key("new")
    assert (states["v"].value(), states["l"].get(), states["m"].items()) == (
        "new",
        ["new"],
        [("new", T0 + 50)],
    )
    later.now = T0 + 50 + TTL
    assert (states["v"].value(), states["l"].get(), states["m"].items()) == (None, [], [])


def test_a_restore_into_another_key_group_range_keeps_each_records_time(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    states = _fill(backend, clock, config())
    keys = [f"k{i}" for i in range(40)]
    clock.now = T0 + 10
    for key in keys:
        backend.set_current_key(key)
        states["v"].update(key)
    data = snapshot_bytes(backend)
    halves = [backends(KeyGroupRange(0, 63)), backends(KeyGroupRange(64, 127))]
    later = clock_at(T0 + 10 + TTL - 1)
    seen = []
    for half in halves:
        half.restore([data])
        value = _fill_handles(half, later, config())["v"]
        for key in sorted(half.keys("v")):
            half.set_current_key(key)
            seen.append((key, value.value()))
    # "old" (written at T0) expired at T0 + TTL; every other key came back with its value
    assert sorted(seen) == sorted([("old", None), ("new", "new"), *((k, k) for k in keys)])


def _fill_handles(
    backend: Any, clock: ManualClock, builder: StateTtlConfig.Builder
) -> dict[str, Any]:
    return {
        "v": keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), builder), clock),
        "l": keyed_state_handle(backend, with_ttl(ListStateDescriptor("l"), builder), clock),
        "m": keyed_state_handle(backend, with_ttl(MapStateDescriptor("m"), builder), clock),
    }


def test_full_snapshot_cleanup_leaves_expired_entries_out_of_the_snapshot(
    backends: Any,
) -> None:
    plain, cleaned = backends(), backends()
    _fill(plain, clock_at(), config())
    _fill(cleaned, clock_at(), config().cleanup_full_snapshot())
    many = [f"k{i}" for i in range(200)]
    for backend, builder in ((plain, config()), (cleaned, config().cleanup_full_snapshot())):
        clock = clock_at(T0)
        value = _fill_handles(backend, clock, builder)["v"]
        for key in many:
            backend.set_current_key(key)
            value.update("x" * 50)
    # at T0 + TTL: "old" and the 200 keys expired, "new" not; nothing was read since
    plain_clock_now = T0 + TTL
    for backend, builder in ((plain, config()), (cleaned, config().cleanup_full_snapshot())):
        _fill_handles(backend, clock_at(plain_clock_now), builder)  # the filter reads this clock
    plain_bytes, cleaned_bytes = snapshot_bytes(plain), snapshot_bytes(cleaned)
    assert len(cleaned_bytes) < len(plain_bytes) / 3
    # the live state is untouched: the expired records are still stored, just not written
    assert len(list(cleaned.keys("v"))) == 202
    for data, expected_keys in ((plain_bytes, 202), (cleaned_bytes, 1)):
        restored = backends()
        restored.restore([data])
        assert len(list(restored.keys("v"))) == expected_keys
        assert len(list(restored.keys("l"))) == (2 if expected_keys == 202 else 1)
        assert len(list(restored.keys("m"))) == (2 if expected_keys == 202 else 1)
    restored.set_current_key("new")
    assert raw(restored, "l", "new", "list") == [ttl_record("new", T0 + 50)]


def test_full_snapshot_cleanup_drops_expired_list_elements_and_map_entries(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    builder = config().cleanup_full_snapshot()
    states = _fill_handles(backend, clock, builder)
    backend.set_current_key("a")
    states["l"].add("early")
    states["m"].put("early", 1)
    clock.now = T0 + 50
    states["l"].add("late")
    states["m"].put("late", 2)
    clock.now = T0 + TTL
    restored = backends()
    restored.restore([snapshot_bytes(backend)])
    assert raw(restored, "l", "a", "list") == [ttl_record("late", T0 + 50)]
    assert raw(restored, "m", "a", "map") == {"late": ttl_record(2, T0 + 50)}


# ---- incremental cleanup ------------------------------------------------------------------


def test_incremental_cleanup_removes_other_keys_expired_values(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    builder = config().cleanup_incrementally(3, False)
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), builder), clock)
    keys = [f"k{i}" for i in range(10)]
    for key in keys:
        backend.set_current_key(key)
        state.update(key)
    clock.now = T0 + 50
    backend.set_current_key("live")
    state.update("live")
    clock.now = T0 + TTL  # the ten expired, "live" not
    assert len(list(backend.keys("v"))) == 11
    backend.set_current_key("live")
    assert state.value() == "live"  # the access checks three keys
    assert backend.current_key == "live"  # and sets the current key back
    assert len(list(backend.keys("v"))) in (8, 9)  # "live" may be one of the three
    for _ in range(5):
        assert state.value() == "live"  # what a read returns never changes
    assert list(backend.keys("v")) == ["live"]


def test_incremental_cleanup_of_lists_and_maps_removes_only_expired_entries(
    backends: Any,
) -> None:
    backend, clock = backends(), clock_at()
    builder = config().cleanup_incrementally(10, False)
    states = _fill_handles(backend, clock, builder)
    for key in ("a", "b"):
        backend.set_current_key(key)
        states["l"].add("early")
        states["m"].put("early", 1)
    clock.now = T0 + 50
    backend.set_current_key("b")
    states["l"].add("late")
    states["m"].put("late", 2)
    clock.now = T0 + TTL
    backend.set_current_key("c")
    states["l"].get()  # an access for another key sweeps a and b
    states["m"].get("nothing")
    assert raw(backend, "l", "a", "list") == []
    assert raw(backend, "m", "a", "map") == {}
    assert raw(backend, "l", "b", "list") == [ttl_record("late", T0 + 50)]
    assert raw(backend, "m", "b", "map") == {"late": ttl_record(2, T0 + 50)}


def test_without_background_cleanup_expired_values_stay_until_read(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), config()), clock)
    for key in ("a", "b", "c"):
        backend.set_current_key(key)
        state.update(key)
    clock.now = T0 + TTL
    backend.set_current_key("a")
    assert state.value() is None
    assert sorted(backend.keys("v")) == ["b", "c"]


def test_the_compaction_filter_strategy_runs_the_incremental_sweep(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    builder = config().cleanup_in_rocksdb_compact_filter(1000)
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), builder), clock)
    for key in ("a", "b", "c"):
        backend.set_current_key(key)
        state.update(key)
    clock.now = T0 + TTL
    backend.set_current_key("d")
    assert state.value() is None
    assert list(backend.keys("v")) == []


# ---- mismatches ---------------------------------------------------------------------------


def test_state_written_without_ttl_read_with_ttl_is_a_clear_restore_error(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    backend.set_current_key("a")
    backend.get_value_state(ValueStateDescriptor("v")).update(5)
    restored = backends()
    restored.restore([snapshot_bytes(backend)])
    state = keyed_state_handle(restored, with_ttl(ValueStateDescriptor("v"), config()), clock)
    restored.set_current_key("a")
    with pytest.raises(StateRestoreError, match="without TTL timestamps"):
        state.value()


def test_window_state_refuses_a_ttl() -> None:
    from barrierflow.runtime.windowing.partitioned_state import partitioned_state
    from barrierflow.runtime.windowing.window_state import InMemoryWindowState

    with pytest.raises(ConfigurationError, match="window and trigger state has none"):
        partitioned_state(
            InMemoryWindowState(), with_ttl(ValueStateDescriptor("v"), config()), "k", "w"
        )


def test_the_sweep_resumes_when_the_earliest_value_it_saw_expires(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    builder = config().cleanup_incrementally(2, False)
    state = keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), builder), clock)
    for key in ("a", "b", "c"):
        backend.set_current_key(key)
        state.update(key)
    clock.now = T0 + 60
    backend.set_current_key("d")
    state.update("d")  # the sweep passes a, b, c, d (all live) over the next accesses
    state.value()
    state.value()
    assert sorted(backend.keys("v")) == ["a", "b", "c", "d"]
    clock.now = T0 + TTL  # a, b, c expired (the earliest expiry the pass saw)
    state.value()
    state.value()
    assert list(backend.keys("v")) == ["d"]


# ---- every TTL state kind through checkpoints at 2 -> 3 -> 1 subtasks ----------------------

RESCALE_KEYS = [f"user-{i}" for i in range(60)]


def _rescale_handles(backend: Any, clock: ManualClock) -> dict[str, Any]:
    """A TTL handle of every kind over `backend` (background cleanup off: only reads clean)."""
    return {
        "v": keyed_state_handle(backend, with_ttl(ValueStateDescriptor("v"), config()), clock),
        "l": keyed_state_handle(backend, with_ttl(ListStateDescriptor("l"), config()), clock),
        "m": keyed_state_handle(backend, with_ttl(MapStateDescriptor("m"), config()), clock),
        "r": keyed_state_handle(
            backend, with_ttl(ReducingStateDescriptor("r", lambda a, b: a + b), config()), clock
        ),
        "a": keyed_state_handle(
            backend, with_ttl(AggregatingStateDescriptor("a", Average()), config()), clock
        ),
    }


def _read_all(backend: Any, handles: dict[str, Any]) -> dict[Any, tuple[Any, ...]]:
    """What each key of RESCALE_KEYS in `backend`'s key groups reads, every kind at once."""
    found = {}
    for key in RESCALE_KEYS:
        if _key_group(key) not in backend.key_group_range:
            continue
        backend.set_current_key(key)
        found[key] = (
            handles["v"].value(),
            handles["l"].get(),
            dict(handles["m"].items()),
            handles["r"].get(),
            handles["a"].get(),
        )
    return found


def _key_group(key: Any) -> int:
    return assign_to_key_group(key, 128)


def _subtasks(settings: Any, tmp_path: Any, parallelism: int, made: list[Any]) -> list[Any]:
    backends = [
        create_keyed_backend(
            settings,
            key_group_range_for_subtask(128, parallelism, i),
            128,
            tmp_path / f"local-{len(made)}-{i}",
        )
        for i in range(parallelism)
    ]
    made.extend(backends)
    return backends


def _checkpoint(backends: list[Any], folder: Any) -> list[bytes]:
    location = _fs.location(folder)
    _fs.make_dirs(location)
    sections = []
    for index, backend in enumerate(backends):
        snapshot = backend.snapshot()
        try:
            sections.append(snapshot.write(location.child(f"subtask-{index}")))
        finally:
            snapshot.release()
    return sections


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param(HashMapStateBackend(), id="hashmap"),
        pytest.param(EmbeddedRocksDBStateBackend(), id="rocksdb"),
    ],
)
def test_every_ttl_state_kind_through_checkpoints_at_2_then_3_then_1_subtasks(
    settings: Any, tmp_path: Any
) -> None:
    made: list[Any] = []
    try:
        clock = clock_at(T0)
        two = _subtasks(settings, tmp_path, 2, made)
        for at, keys in ((T0, RESCALE_KEYS), (T0 + 60, RESCALE_KEYS[::2])):
            clock.now = at
            for number, key in enumerate(keys):
                backend = next(b for b in two if _key_group(key) in b.key_group_range)
                handles = _rescale_handles(backend, clock)
                backend.set_current_key(key)
                handles["v"].update((key, at))
                handles["l"].add(at)
                handles["m"].put(at, number)
                handles["r"].add(1)
                handles["a"].add(at)
        sections = _checkpoint(two, tmp_path / "chk-1")

        # at 3 subtasks, at T0 + TTL: what was written at T0 only is gone
        clock.now = T0 + TTL
        three = _subtasks(settings, tmp_path, 3, made)
        found: dict[Any, Any] = {}
        for backend in three:
            backend.restore(sections, _fs.location(tmp_path / "chk-1"))
            found.update(_read_all(backend, _rescale_handles(backend, clock)))
        even = set(RESCALE_KEYS[::2])
        assert found == {
            key: (
                ((key, T0 + 60), [T0 + 60], {T0 + 60: RESCALE_KEYS.index(key) // 2}, 2, T0 + 30.0)
                if key in even
                else (None, [], {}, None, None)
            )
            for key in RESCALE_KEYS
        }
        clock.now = T0 + 150
        for backend in three:
            handles = _rescale_handles(backend, clock)
            for key in RESCALE_KEYS[::3]:
                if _key_group(key) in backend.key_group_range:
                    backend.set_current_key(key)
                    handles["r"].add(5)
        sections = _checkpoint(three, tmp_path / "chk-2")

        # at 1 subtask, at T0 + 60 + TTL: only the reducing values added at T0 + 150 live
        clock.now = T0 + 60 + TTL
        (one,) = _subtasks(settings, tmp_path, 1, made)
        one.restore(sections, _fs.location(tmp_path / "chk-2"))
        assert _read_all(one, _rescale_handles(one, clock)) == {
            key: (None, [], {}, 7 if key in even else 5, None)
            if key in RESCALE_KEYS[::3]
            else (None, [], {}, None, None)
            for key in RESCALE_KEYS
        }
    finally:
        for backend in made:
            backend.dispose()
