"""The internal timer service, event by event: register, fire, delete, snapshot, rescale.

Every test feeds the service one call at a time and asserts exactly what fired,
then that nothing else did.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow import _envelope as checkpoint_format
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.timers import (
    MIN_WATERMARK,
    InternalTimerService,
    Timer,
)
from barrierflow.runtime.timers.priority_queue import TimerPriorityQueue
from barrierflow.runtime.timers.timer import sort_key
from barrierflow.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
)

MAX_PARALLELISM = 128
ALL_KEY_GROUPS = KeyGroupRange(0, MAX_PARALLELISM - 1)


class Recorder:
    """A triggerable that records what fired and may run a hook on each firing."""

    def __init__(self) -> None:
        self.fired: list[tuple[str, int, object, object]] = []
        self.on_fire: Callable[[str, Timer], None] | None = None

    def on_event_time(self, timer: Timer) -> None:
        self.fired.append(("event", timer.timestamp, timer.key, timer.namespace))
        if self.on_fire is not None:
            self.on_fire("event", timer)

    def on_processing_time(self, timer: Timer) -> None:
        self.fired.append(("processing", timer.timestamp, timer.key, timer.namespace))
        if self.on_fire is not None:
            self.on_fire("processing", timer)

    def take(self) -> list[tuple[str, int, object, object]]:
        fired, self.fired = self.fired, []
        return fired


def service_for(
    key_group_range: KeyGroupRange = ALL_KEY_GROUPS,
) -> tuple[InternalTimerService, Recorder]:
    recorder = Recorder()
    return InternalTimerService(key_group_range, MAX_PARALLELISM, recorder), recorder


@dataclass(frozen=True)
class Window:
    """A user namespace type, as a window operator would use."""

    start: int
    end: int


def key_in_key_group_range(key_group_range: KeyGroupRange, outside: bool = False) -> int:
    """The first int key whose key group is inside (or outside) `key_group_range`."""
    for key in itertools.count():
        inside = assign_to_key_group(key, MAX_PARALLELISM) in key_group_range
        if inside != outside:
            return key
    raise AssertionError("unreachable")


# -- Registration and deduplication ------------------------------------------


def test_registering_the_same_timer_twice_keeps_one_and_fires_it_once() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)
    service.register_event_time_timer("a", None, 10)
    service.register_processing_time_timer("a", None, 10)
    service.register_processing_time_timer("a", None, 10)

    assert service.num_event_time_timers() == 1
    assert service.num_processing_time_timers() == 1

    service.advance_watermark(10)
    assert recorder.take() == [("event", 10, "a", None)]
    service.on_processing_time(10)
    assert recorder.take() == [("processing", 10, "a", None)]
    assert service.num_event_time_timers() == 0
    assert service.num_processing_time_timers() == 0


def test_timers_differing_in_key_namespace_or_timestamp_are_all_kept() -> None:
    service, _ = service_for()
    service.register_event_time_timer("a", None, 10)
    service.register_event_time_timer("b", None, 10)
    service.register_event_time_timer("a", "window-1", 10)
    service.register_event_time_timer("a", None, 11)

    assert service.num_event_time_timers() == 4
    assert service.num_processing_time_timers() == 0


def test_event_time_and_processing_time_timers_are_kept_apart() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)
    service.register_processing_time_timer("b", None, 10)

    service.on_processing_time(100)
    assert recorder.take() == [("processing", 10, "b", None)]
    service.advance_watermark(100)
    assert recorder.take() == [("event", 10, "a", None)]


# -- Ordering and firing up to the watermark ---------------------------------


def test_event_time_timers_fire_in_timestamp_order_whatever_the_registration_order() -> None:
    service, recorder = service_for()
    for timestamp in [50, 10, 40, 20, 30]:
        service.register_event_time_timer(f"k{timestamp}", None, timestamp)

    service.advance_watermark(1_000)

    assert [timestamp for _, timestamp, _, _ in recorder.take()] == [10, 20, 30, 40, 50]


def test_timers_with_equal_timestamps_fire_in_key_then_namespace_order() -> None:
    registered = [("bob", 2), ("al", 2), ("bob", 1), (3, None), ("al", 1), (1, None)]
    fired_orders = []
    for permutation in [registered, registered[::-1], registered[2:] + registered[:2]]:
        service, recorder = service_for()
        for key, namespace in permutation:
            service.register_event_time_timer(key, namespace, 7)
        service.advance_watermark(7)
        fired_orders.append([(key, namespace) for _, _, key, namespace in recorder.take()])

    # ints before strs, then by value; namespaces None < ints
    expected = [(1, None), (3, None), ("al", 1), ("al", 2), ("bob", 1), ("bob", 2)]
    assert fired_orders == [expected, expected, expected]


def test_timer_order_is_by_timestamp_then_key_then_namespace() -> None:
    timers = [
        Timer(2, "a", None),
        Timer(1, "b", Window(0, 10)),
        Timer(1, "b", Window(0, 5)),
        Timer(1, "a", Window(0, 10)),
    ]
    ordered = sorted(timers)
    assert [t.timestamp for t in ordered] == [1, 1, 1, 2]
    assert ordered[0] == Timer(1, "a", Window(0, 10))
    assert {ordered[1], ordered[2]} == {Timer(1, "b", Window(0, 5)), Timer(1, "b", Window(0, 10))}
    assert sorted(reversed(timers)) == ordered


def test_advancing_the_watermark_fires_timers_up_to_and_including_it_and_no_later() -> None:
    service, recorder = service_for()
    for timestamp in [9, 10, 11]:
        service.register_event_time_timer("a", None, timestamp)

    service.advance_watermark(10)
    assert recorder.take() == [("event", 9, "a", None), ("event", 10, "a", None)]
    assert service.num_event_time_timers() == 1

    service.advance_watermark(10)
    assert recorder.take() == []

    service.advance_watermark(11)
    assert recorder.take() == [("event", 11, "a", None)]
    assert service.num_event_time_timers() == 0


def test_the_watermark_starts_at_minus_infinity_and_fires_nothing_without_timers() -> None:
    service, recorder = service_for()
    assert service.current_watermark == MIN_WATERMARK == -(2**63)

    service.advance_watermark(5)
    assert service.current_watermark == 5
    assert recorder.take() == []


def test_an_older_watermark_fires_nothing_and_does_not_lower_the_current_one() -> None:
    service, recorder = service_for()
    service.advance_watermark(100)
    service.register_event_time_timer("a", None, 50)  # late: at or below the watermark

    service.advance_watermark(60)
    assert recorder.take() == []
    assert service.current_watermark == 100

    service.advance_watermark(101)
    assert recorder.take() == [("event", 50, "a", None)]
    assert service.current_watermark == 101


def test_timers_registered_during_firing_fire_in_the_same_advance_when_due() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)

    def chain(domain: str, timer: Timer) -> None:
        if timer == Timer(10, "a", None):
            service.register_event_time_timer("a", None, 15)  # due: fires in this advance
            service.register_event_time_timer("b", None, 10)  # due at the firing timestamp
            service.register_event_time_timer("a", None, 5)  # already past: fires next
            service.register_event_time_timer("a", None, 25)  # beyond the watermark: waits

    recorder.on_fire = chain
    service.advance_watermark(20)

    assert recorder.take() == [
        ("event", 10, "a", None),
        ("event", 10, "b", None),
        ("event", 5, "a", None),
        ("event", 15, "a", None),
    ]
    assert service.num_event_time_timers() == 1
    service.advance_watermark(25)
    assert recorder.take() == [("event", 25, "a", None)]


def test_a_callback_may_re_register_its_own_timer_for_later() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)
    recorder.on_fire = lambda domain, timer: service.register_event_time_timer(
        timer.key, timer.namespace, timer.timestamp + 100
    )

    service.advance_watermark(10)

    assert recorder.take() == [("event", 10, "a", None)]
    assert [t.timestamp for t in service.event_time_timers("a")] == [110]


def test_timers_with_keys_of_different_types_and_equal_timestamps_fire_without_error() -> None:
    service, recorder = service_for()
    keys = ["x", 3, None, b"raw", ("t", 1), 2.5, Window(1, 2)]
    for key in keys:
        service.register_event_time_timer(key, None, 1)

    service.advance_watermark(1)

    assert [key for _, _, key, _ in recorder.take()] == [
        None,
        2.5,
        3,
        "x",
        b"raw",
        ("t", 1),
        Window(1, 2),
    ]


# -- Deletion -----------------------------------------------------------------


def test_a_deleted_timer_does_not_fire() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)
    service.register_event_time_timer("a", None, 20)
    service.register_processing_time_timer("a", None, 10)

    service.delete_event_time_timer("a", None, 10)
    service.delete_processing_time_timer("a", None, 10)

    assert service.num_event_time_timers() == 1
    assert service.num_processing_time_timers() == 0
    service.advance_watermark(100)
    service.on_processing_time(100)
    assert recorder.take() == [("event", 20, "a", None)]


def test_deleting_a_missing_timer_is_a_no_op() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)

    service.delete_event_time_timer("a", None, 11)
    service.delete_event_time_timer("a", "other", 10)
    service.delete_event_time_timer("b", None, 10)
    service.delete_processing_time_timer("a", None, 10)  # only an event-time timer exists

    assert service.num_event_time_timers() == 1
    service.advance_watermark(10)
    assert recorder.take() == [("event", 10, "a", None)]


def test_a_timer_deleted_then_registered_again_fires_exactly_once() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)
    service.delete_event_time_timer("a", None, 10)
    service.register_event_time_timer("a", None, 10)

    assert service.num_event_time_timers() == 1
    service.advance_watermark(10)
    assert recorder.take() == [("event", 10, "a", None)]


@pytest.mark.parametrize("later", [10, 11], ids=["same timestamp", "later timestamp"])
def test_a_callback_may_delete_a_timer_due_in_the_same_advance(later: int) -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)
    service.register_event_time_timer("b", None, later)
    recorder.on_fire = lambda domain, timer: service.delete_event_time_timer("b", None, later)

    service.advance_watermark(20)

    assert recorder.take() == [("event", 10, "a", None)]
    assert service.num_event_time_timers() == 0


def test_when_a_callback_raises_the_timers_not_yet_fired_stay_registered() -> None:
    service, recorder = service_for()
    for key in ["a", "b", "c"]:
        service.register_event_time_timer(key, None, 10)
    service.register_event_time_timer("d", None, 11)

    def fail_on_a(domain: str, timer: Timer) -> None:
        if timer.key == "a":
            raise RuntimeError("user function failed")

    recorder.on_fire = fail_on_a
    with pytest.raises(RuntimeError, match="user function failed"):
        service.advance_watermark(20)
    assert recorder.take() == [("event", 10, "a", None)]
    assert service.num_event_time_timers() == 3

    recorder.on_fire = None
    service.advance_watermark(21)
    assert recorder.take() == [
        ("event", 10, "b", None),
        ("event", 10, "c", None),
        ("event", 11, "d", None),
    ]


def test_many_deletions_keep_the_remaining_timers_in_order() -> None:
    service, recorder = service_for()
    for timestamp in range(1_000):
        service.register_event_time_timer(timestamp % 7, None, timestamp)
    for timestamp in range(1_000):
        if timestamp % 10:
            service.delete_event_time_timer(timestamp % 7, None, timestamp)

    assert service.num_event_time_timers() == 100
    service.advance_watermark(10_000)
    assert [timestamp for _, timestamp, _, _ in recorder.take()] == list(range(0, 1_000, 10))


# -- Processing time ------------------------------------------------------------


def test_next_processing_time_is_the_earliest_timer_and_moves_with_registration_and_deletion() -> (
    None
):
    service, _ = service_for()
    assert service.next_processing_time() is None

    service.register_processing_time_timer("a", None, 500)
    assert service.next_processing_time() == 500
    service.register_processing_time_timer("b", None, 700)
    assert service.next_processing_time() == 500
    service.register_processing_time_timer("c", None, 300)
    assert service.next_processing_time() == 300

    service.delete_processing_time_timer("c", None, 300)
    assert service.next_processing_time() == 500
    service.register_event_time_timer("d", None, 1)  # event time does not wake the task
    assert service.next_processing_time() == 500


def test_on_processing_time_fires_due_timers_in_order_and_moves_the_next_wake_up() -> None:
    service, recorder = service_for()
    for timestamp in [300, 100, 200]:
        service.register_processing_time_timer("a", None, timestamp)

    service.on_processing_time(99)
    assert recorder.take() == []
    assert service.next_processing_time() == 100

    service.on_processing_time(200)
    assert recorder.take() == [("processing", 100, "a", None), ("processing", 200, "a", None)]
    assert service.next_processing_time() == 300

    service.on_processing_time(1_000)
    assert recorder.take() == [("processing", 300, "a", None)]
    assert service.next_processing_time() is None


def test_processing_time_timers_registered_during_firing_fire_in_the_same_call_when_due() -> None:
    service, recorder = service_for()
    service.register_processing_time_timer("a", None, 100)

    def chain(domain: str, timer: Timer) -> None:
        if timer.timestamp == 100:
            service.register_processing_time_timer("a", None, 150)
            service.register_processing_time_timer("a", None, 250)

    recorder.on_fire = chain
    service.on_processing_time(200)

    assert recorder.take() == [("processing", 100, "a", None), ("processing", 150, "a", None)]
    assert service.next_processing_time() == 250


def test_processing_time_does_not_fire_event_time_timers() -> None:
    service, recorder = service_for()
    service.register_event_time_timer("a", None, 10)

    service.on_processing_time(10_000)

    assert recorder.take() == []
    assert service.current_watermark == MIN_WATERMARK


# -- Iteration over a key's timers ---------------------------------------------


def test_a_keys_timers_are_listed_in_firing_order_without_other_keys() -> None:
    service, _ = service_for()
    key = 0
    # another key of the same key group, so the listing must filter by key
    neighbour = next(
        k
        for k in itertools.count(1)
        if assign_to_key_group(k, MAX_PARALLELISM) == assign_to_key_group(key, MAX_PARALLELISM)
    )
    for timestamp in [30, 10, 50, 20, 40]:
        service.register_event_time_timer(key, f"w{timestamp}", timestamp)
    service.register_event_time_timer(neighbour, "w1", 20)
    service.register_processing_time_timer(key, None, 5)

    assert list(service.event_time_timers(key)) == [
        Timer(timestamp, key, f"w{timestamp}") for timestamp in [10, 20, 30, 40, 50]
    ]
    assert list(service.event_time_timers(neighbour)) == [Timer(20, neighbour, "w1")]
    assert list(service.processing_time_timers(key)) == [Timer(5, key, None)]
    assert list(service.processing_time_timers(neighbour)) == []


# -- Key groups -------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        "register_event_time_timer",
        "register_processing_time_timer",
        "delete_event_time_timer",
        "delete_processing_time_timer",
        "event_time_timers",
    ],
)
def test_a_key_outside_the_key_group_range_is_an_error_naming_it(call: str) -> None:
    own_range = KeyGroupRange(0, 9)
    service, _ = service_for(own_range)
    foreign_key = key_in_key_group_range(own_range, outside=True)
    key_group = assign_to_key_group(foreign_key, MAX_PARALLELISM)

    args = (foreign_key,) if call == "event_time_timers" else (foreign_key, None, 10)
    with pytest.raises(ValueError, match=rf"key {foreign_key} is in key group {key_group}\b"):
        getattr(service, call)(*args)
    assert service.num_event_time_timers() == service.num_processing_time_timers() == 0


def key_of_key_group(key_group: int) -> int:
    return next(
        k for k in itertools.count() if assign_to_key_group(k, MAX_PARALLELISM) == key_group
    )


def test_the_first_and_last_key_groups_of_the_range_are_accepted_and_their_neighbours_refused() -> (
    None
):
    service, _ = service_for(KeyGroupRange(10, 19))

    service.register_event_time_timer(key_of_key_group(10), None, 1)
    service.register_event_time_timer(key_of_key_group(19), None, 1)
    for outside in (9, 20):
        with pytest.raises(ValueError, match=f"key group {outside},"):
            service.register_event_time_timer(key_of_key_group(outside), None, 1)
    assert service.num_event_time_timers() == 2


# -- Snapshot and restore ----------------------------------------------------------


def fire_everything(service: InternalTimerService, recorder: Recorder) -> list[tuple]:
    service.advance_watermark(2**63 - 1)
    service.on_processing_time(2**63 - 1)
    return recorder.take()


def test_a_snapshot_is_a_timers_envelope() -> None:
    service, _ = service_for()
    service.register_event_time_timer("a", None, 10)

    header, _ = checkpoint_format.decode(service.snapshot(), "timers")

    assert header["max_parallelism"] == MAX_PARALLELISM
    assert header["key_group_range"] == [0, MAX_PARALLELISM - 1]
    assert [section["key_group"] for section in header["key_groups"]] == [
        assign_to_key_group("a", MAX_PARALLELISM)
    ]


def test_a_snapshot_does_not_change_when_timers_change_after_it() -> None:
    service, _ = service_for()
    service.register_event_time_timer("a", None, 10)
    service.register_processing_time_timer("b", "ns", 20)

    snapshot = service.snapshot()
    service.register_event_time_timer("c", None, 30)
    service.delete_processing_time_timer("b", "ns", 20)
    service.advance_watermark(10)

    restored, restored_recorder = service_for()
    restored.restore([snapshot])
    assert fire_everything(restored, restored_recorder) == [
        ("event", 10, "a", None),
        ("processing", 20, "b", "ns"),
    ]


@pytest.mark.parametrize("ordered", [True, False], ids=["savepoint", "checkpoint"])
def test_a_held_snapshot_keeps_the_timers_of_the_barrier_until_it_is_encoded(ordered) -> None:
    service, _ = service_for()
    for key, timestamp in [("a", 30), ("b", 10), ("c", 20), ("d", 10)]:
        service.register_event_time_timer(key, None, timestamp)
    service.register_processing_time_timer("a", "ns", 5)

    held = service.hold()  # the barrier: encoded later, on the uploader thread
    service.advance_watermark(10)  # fires b and d
    service.delete_event_time_timer("c", None, 20)
    service.register_event_time_timer("e", None, 40)
    service.on_processing_time(5)
    encoded = held.encode(ordered)

    header, _ = checkpoint_format.decode(encoded, "timers")
    timestamps = [section["event_time"] for section in header["key_groups"]]
    if ordered:  # a savepoint's canonical form
        assert all(times == sorted(times) for times in timestamps)
    assert sorted(t for times in timestamps for t in times) == [10, 10, 20, 30]
    restored, recorder = service_for()
    restored.restore([encoded])
    assert fire_everything(restored, recorder) == [
        ("event", 10, "b", None),
        ("event", 10, "d", None),
        ("event", 20, "c", None),
        ("event", 30, "a", None),
        ("processing", 5, "a", "ns"),
    ]


def test_equal_timers_give_equal_snapshots_whatever_the_registration_order() -> None:
    timers = [("a", None, 10), ("b", Window(0, 5), 10), (7, None, 3), ("a", None, 1)]
    first, _ = service_for()
    second, _ = service_for()
    for key, namespace, timestamp in timers:
        first.register_event_time_timer(key, namespace, timestamp)
    for key, namespace, timestamp in reversed(timers):
        second.register_event_time_timer(key, namespace, timestamp)

    assert first.snapshot() == second.snapshot()


def test_restoring_a_snapshot_brings_back_every_timer_of_both_domains() -> None:
    service, recorder = service_for()
    registered_event = [
        ("a", None, 10),
        (("user", 7), Window(0, 10), 10),
        (42, Window(10, 20), 20),
        (b"raw", "ns", -5),
    ]
    registered_processing = [("a", None, 1_000), (42, Window(0, 10), 500)]
    for key, namespace, timestamp in registered_event:
        service.register_event_time_timer(key, namespace, timestamp)
    for key, namespace, timestamp in registered_processing:
        service.register_processing_time_timer(key, namespace, timestamp)

    restored, restored_recorder = service_for()
    restored.restore([service.snapshot()])

    assert restored.num_event_time_timers() == len(registered_event)
    assert restored.num_processing_time_timers() == len(registered_processing)
    assert restored.next_processing_time() == 500
    assert fire_everything(restored, restored_recorder) == fire_everything(service, recorder)


def test_the_watermark_is_not_restored_and_event_time_timers_wait_for_the_next_one() -> None:
    service, _ = service_for()
    service.advance_watermark(100)
    service.register_event_time_timer("a", None, 200)

    restored, recorder = service_for()
    restored.restore([service.snapshot()])

    assert restored.current_watermark == MIN_WATERMARK
    assert recorder.take() == []
    restored.advance_watermark(200)
    assert recorder.take() == [("event", 200, "a", None)]


def test_processing_time_timers_in_the_past_at_restore_fire_at_the_next_call() -> None:
    service, _ = service_for()
    service.register_processing_time_timer("a", None, 100)
    service.register_processing_time_timer("b", None, 5_000)

    restored, recorder = service_for()
    restored.restore([service.snapshot()])
    assert recorder.take() == []
    assert restored.next_processing_time() == 100  # in the past: the task wakes at once

    restored.on_processing_time(1_000)
    assert recorder.take() == [("processing", 100, "a", None)]
    assert restored.next_processing_time() == 5_000


def test_restore_refuses_a_snapshot_of_another_max_parallelism() -> None:
    service = InternalTimerService(KeyGroupRange(0, 63), 64, Recorder())
    service.register_event_time_timer("a", None, 10)

    restored, _ = service_for()
    with pytest.raises(StateRestoreError, match="max parallelism 64"):
        restored.restore([service.snapshot()])


@pytest.mark.parametrize(
    ("header", "body", "message"),
    [
        ({"version": 99}, b"", "header version 99"),
        (
            {"version": 1, "max_parallelism": MAX_PARALLELISM, "key_groups": [{"key_group": 0}]},
            b"",
            "cannot be read",
        ),
        (
            {
                "version": 1,
                "max_parallelism": MAX_PARALLELISM,
                "key_groups": [
                    {
                        "key_group": 0,
                        "event_time": [1, 2],
                        "processing_time": [],
                        "offset": 0,
                        "length": len(pickle.dumps([("k", None)], protocol=5)),
                    }
                ],
            },
            pickle.dumps([("k", None)], protocol=5),
            "has 1 keys for its timestamps",
        ),
    ],
    ids=["unknown version", "section without fields", "fewer keys than timestamps"],
)
def test_restore_refuses_a_malformed_timers_file(header: dict, body: bytes, message: str) -> None:
    service, _ = service_for()
    with pytest.raises(StateRestoreError, match=message):
        service.restore([checkpoint_format.encode("timers", header, body)])
    assert service.num_event_time_timers() == 0


def test_restore_keeps_only_the_timers_of_its_own_key_groups() -> None:
    service, _ = service_for()
    for key in range(200):
        service.register_event_time_timer(key, None, key)
    half = KeyGroupRange(0, 63)

    restored, recorder = service_for(half)
    restored.restore([service.snapshot()])

    expected = [key for key in range(200) if assign_to_key_group(key, MAX_PARALLELISM) in half]
    assert 0 < len(expected) < 200
    assert [key for _, _, key, _ in fire_everything(restored, recorder)] == expected


timer_specs = st.lists(
    st.tuples(
        st.booleans(),  # event time?
        st.one_of(st.integers(-1_000, 1_000), st.text(max_size=4)),  # key
        st.one_of(st.none(), st.integers(0, 3)),  # namespace
        st.integers(-(2**63), 2**63 - 1),  # timestamp
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(timer_specs)
def test_rescaling_from_two_to_three_subtasks_keeps_every_timer_exactly_once(specs) -> None:
    def register(service: InternalTimerService, spec: tuple) -> None:
        event_time, key, namespace, timestamp = spec
        if event_time:
            service.register_event_time_timer(key, namespace, timestamp)
        else:
            service.register_processing_time_timer(key, namespace, timestamp)

    old = [service_for(key_group_range_for_subtask(MAX_PARALLELISM, 2, i)) for i in range(2)]
    for spec in specs:
        key_group = assign_to_key_group(spec[1], MAX_PARALLELISM)
        owner = next(service for service, _ in old if key_group in service.key_group_range)
        register(owner, spec)
    snapshots = [service.snapshot() for service, _ in old]

    new = [service_for(key_group_range_for_subtask(MAX_PARALLELISM, 3, i)) for i in range(3)]
    for service, _ in new:
        service.restore(snapshots)

    fired = []
    for service, recorder in new:
        for _, _, key, _ in (own := fire_everything(service, recorder)):
            assert assign_to_key_group(key, MAX_PARALLELISM) in service.key_group_range
        fired += own
    expected = {
        ("event" if event_time else "processing", timestamp, key, namespace)
        for event_time, key, namespace, timestamp in specs
    }
    assert len(fired) == len(expected)
    assert set(fired) == expected


@pytest.mark.parametrize(
    "timestamps",
    [[], [5], [9, 3, 7, 1], [4, 4, 4], [8, 2, 8, 5, 2]],
    ids=["none", "one", "no ties", "all tied", "some tied"],
)
def test_a_key_groups_copy_holds_every_timer_and_restores_in_any_order_with_or_without_ties(
    timestamps,
) -> None:
    # a copy is unordered: a restore adds each timer, and the queue fires them in order
    queue = TimerPriorityQueue()
    keys = ["k", 7, ("t", 1), b"raw", None]
    for index, timestamp in enumerate(timestamps):
        queue.add(Timer(timestamp, keys[index % len(keys)], index), 3)
    snapshot, firing_order = list(queue.hold().get(3, ())), queue.timers_of_key_group(3)
    assert sorted(snapshot, key=sort_key) == firing_order
    restored = TimerPriorityQueue()
    for timer in reversed(snapshot):
        restored.add(timer, 3)
    fired, again = [], []
    queue.fire_until(10, fired.append)
    restored.fire_until(10, again.append)
    assert again == fired == firing_order


def test_a_held_key_group_is_copied_before_its_first_change_and_an_unchanged_one_never() -> None:
    queue = TimerPriorityQueue()
    for timestamp, key, group in [(5, "a", 1), (7, "b", 1), (9, "c", 2), (4, "d", 3), (6, "e", 4)]:
        queue.add(Timer(timestamp, key, None), group)
    held = queue.hold()
    before = {group: set(timers) for group, timers in held.items()}
    queue.add(Timer(8, "f", None), 1)  # an addition
    queue.remove(Timer(9, "c", None))  # a deletion that empties its key group
    fired: list[Timer] = []
    queue.fire_until(4, fired.append)  # a timer fired
    queue.add(Timer(3, "g", None), 5)  # a key group the snapshot does not know
    assert fired == [Timer(4, "d", None)]
    assert {group: set(timers) for group, timers in held.items()} == before
    assert queue.timers_of_key_group(1) == [(5, "a", None), (7, "b", None), (8, "f", None)]
    assert queue.timers_of_key_group(2) == queue.timers_of_key_group(3) == []
    # key group 4 did not change: both snapshots hold its one set, never copied
    assert queue.hold()[4] is held[4]
    # a set copied once is changed in place until the next snapshot holds it
    queue.add(Timer(11, "h", None), 1)
    again = queue.hold()
    assert again[1] is not held[1] and Timer(11, "h", None) in again[1]
    queue.fire_until(100, fired.append)
    assert [timer[1] for timer in fired] == ["d", "g", "a", "e", "b", "f", "h"]
    assert set(again[1]) == {
        Timer(t, k, None) for t, k in [(5, "a"), (7, "b"), (8, "f"), (11, "h")]
    }


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "fire", "hold"]),
            st.integers(0, 20),
            st.sampled_from("abcd"),
            st.integers(0, 3),
        ),
        max_size=60,
    )
)
def test_every_held_snapshot_keeps_exactly_the_timers_of_its_moment(operations) -> None:
    queue = TimerPriorityQueue()
    model: dict[Timer, int] = {}  # what the queue holds: timer -> key group
    snapshots: list[tuple[dict[int, set[Timer]], dict[int, set[Timer]]]] = []
    for operation, timestamp, key, group in operations:
        timer = Timer(timestamp, key, None)
        if operation == "add":
            if timer not in model:
                model[timer] = group
            queue.add(timer, model[timer])  # a timer keeps its key group, as its key does
        elif operation == "remove":
            queue.remove(timer)
            model.pop(timer, None)
        elif operation == "fire":
            queue.fire_until(timestamp, lambda fired: model.pop(fired))
        else:
            expected: dict[int, set[Timer]] = {}
            for held_timer, held_group in model.items():
                expected.setdefault(held_group, set()).add(held_timer)
            snapshots.append((queue.hold(), expected))
    for held, expected in snapshots:
        assert {group: set(timers) for group, timers in held.items()} == expected
    assert len(queue) == len(model)
