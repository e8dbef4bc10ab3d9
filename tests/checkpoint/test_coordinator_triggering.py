"""The coordinator's happy path, event by event: when checkpoints trigger (interval,
min pause, max concurrent, final checkpoint, savepoints), how acknowledgements
complete them, and how a completion subsumes older ones."""

from __future__ import annotations

import pytest
from coordinator_builder import (
    SINK,
    SOURCE,
    aborted,
    acknowledge_all,
    complete,
    completed,
    coordinator_builder,
    finalize,
    savepoint,
    state,
    trigger,
)

from barrierflow.checkpoint.coordinator import (
    AcknowledgeResult,
    CheckpointCoordinatorConfig,
    CheckpointCoordinatorStateError,
    CoordinatorStatus,
    DiscardState,
)
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.errors import ConfigurationError

SUBSUMED = CheckpointFailureReason.CHECKPOINT_SUBSUMED

# ---- the interval ----------------------------------------------------------------------------


def test_the_first_checkpoint_triggers_one_interval_after_start():
    coord = coordinator_builder(interval_ms=100, start_ms=1_000)
    assert coord.next_trigger_ms == 1_100
    assert coord.on_tick(1_099) == []
    assert coord.on_tick(1_100) == [trigger(1, at=1_100)]
    assert coord.on_tick(1_120) == []
    assert coord.pending_checkpoint_ids == (1,)


def test_periodic_checkpoints_trigger_every_interval_with_increasing_ids():
    coord = coordinator_builder(interval_ms=100, max_concurrent=5)
    assert coord.on_tick(100) == [trigger(1, at=100)]
    assert coord.on_tick(150) == []
    assert coord.on_tick(200) == [trigger(2, at=200)]
    assert coord.on_tick(310) == [trigger(3, at=310)]
    assert coord.next_trigger_ms == 410
    assert coord.pending_checkpoint_ids == (1, 2, 3)


def test_checkpoint_ids_continue_from_the_next_checkpoint_id_given():
    coord = coordinator_builder(next_checkpoint_id=42)
    assert coord.on_tick(100) == [trigger(42, at=100)]
    assert coord.request_savepoint(110) == [savepoint(43, at=110)]


# ---- max concurrent and min pause ----------------------------------------------------------


def test_a_due_trigger_waits_while_max_concurrent_checkpoints_are_pending_then_fires():
    coord = coordinator_builder(interval_ms=100, max_concurrent=1)
    assert coord.on_tick(100) == [trigger(1, at=100)]
    assert coord.on_tick(200) == []  # due, but checkpoint 1 holds the only slot
    assert coord.on_tick(300) == []  # still one waiting request, not two
    assert complete(coord, 1, now_ms=310) == [completed(1), trigger(2, at=310)]
    assert coord.on_tick(320) == []
    assert coord.on_tick(410) == []  # due again, but checkpoint 2 holds the slot
    assert coord.pending_checkpoint_ids == (2,)


def test_a_waiting_trigger_fires_on_the_next_tick_after_its_slot_frees():
    coord = coordinator_builder(interval_ms=100, max_concurrent=1)
    coord.on_tick(100)
    assert coord.on_tick(200) == []
    assert complete(coord, 1, now_ms=250) == [completed(1), trigger(2, at=250)]
    assert coord.on_tick(349) == []
    assert complete(coord, 2, now_ms=349) == [completed(2)]
    assert coord.on_tick(350) == [trigger(3, at=350)]


def test_two_concurrent_checkpoints_are_allowed_but_not_three():
    coord = coordinator_builder(interval_ms=100, max_concurrent=2)
    assert coord.on_tick(100) == [trigger(1, at=100)]
    assert coord.on_tick(200) == [trigger(2, at=200)]
    assert coord.on_tick(300) == []
    assert coord.on_tick(400) == []
    assert complete(coord, 2, now_ms=420) == [*aborted(1, SUBSUMED), completed(2), trigger(3, 420)]


def test_the_min_pause_delays_the_next_trigger_after_a_completion():
    coord = coordinator_builder(interval_ms=100, min_pause_ms=50, max_concurrent=2)
    assert coord.on_tick(100) == [trigger(1, at=100)]
    assert complete(coord, 1, now_ms=180) == [completed(1)]
    assert coord.next_trigger_ms == 230
    assert coord.on_tick(200) == []
    assert coord.on_tick(229) == []
    assert coord.on_tick(230) == [trigger(2, at=230)]
    assert coord.next_trigger_ms == 330


def test_the_min_pause_also_counts_from_an_abort():
    coord = coordinator_builder(interval_ms=100, min_pause_ms=50, tolerable_failures=5)
    coord.on_tick(100)
    declined = CheckpointFailureReason.CHECKPOINT_DECLINED
    assert coord.receive_decline(1, SINK, declined, now_ms=190) == aborted(1, declined)
    assert coord.on_tick(200) == []
    assert coord.on_tick(239) == []
    assert coord.on_tick(240) == [trigger(2, at=240)]


def test_the_min_pause_does_not_delay_a_trigger_already_later_than_it():
    coord = coordinator_builder(interval_ms=100, min_pause_ms=50)
    coord.on_tick(100)
    assert complete(coord, 1, now_ms=120) == [completed(1)]
    assert coord.next_trigger_ms == 200
    assert coord.on_tick(199) == []
    assert coord.on_tick(200) == [trigger(2, at=200)]


# ---- acknowledgements and completion -------------------------------------------------------


def test_the_last_acknowledgement_emits_finalize_checkpoint_with_every_task_state():
    coord = coordinator_builder()
    coord.on_tick(100)
    assert coord.receive_acknowledge(1, SOURCE, state(SOURCE, 1), 110) == (
        AcknowledgeResult.SUCCESS,
        [],
    )
    assert coord.receive_acknowledge(1, SINK, state(SINK, 1), 120) == (
        AcknowledgeResult.SUCCESS,
        [finalize(1, triggered_at=100)],
    )


def test_a_checkpoint_completes_only_when_the_job_master_has_finalized_it():
    coord = coordinator_builder()
    coord.on_tick(100)
    acknowledge_all(coord, 1, now_ms=120)
    assert coord.pending_checkpoint_ids == (1,)
    assert coord.completed_checkpoint_ids == ()
    assert coord.on_tick(200) == []  # a finalizing checkpoint still holds its slot
    assert coord.on_checkpoint_finalized(1, now_ms=210) == [completed(1), trigger(2, at=210)]
    assert coord.pending_checkpoint_ids == (2,)
    assert coord.completed_checkpoint_ids == (1,)


def test_a_duplicate_acknowledgement_is_reported_and_changes_nothing():
    coord = coordinator_builder()
    coord.on_tick(100)
    coord.receive_acknowledge(1, SOURCE, state(SOURCE, 1), 110)
    assert coord.receive_acknowledge(1, SOURCE, "again", 111) == (AcknowledgeResult.DUPLICATE, [])
    assert coord.receive_acknowledge(1, SINK, state(SINK, 1), 120)[1] == [finalize(1, 100)]
    assert coord.receive_acknowledge(1, SINK, "again", 121) == (AcknowledgeResult.DUPLICATE, [])
    coord.on_checkpoint_finalized(1, 130)
    assert coord.receive_acknowledge(1, SINK, "again", 131) == (AcknowledgeResult.DUPLICATE, [])


def test_an_acknowledgement_for_an_unknown_checkpoint_or_task_discards_nothing():
    coord = coordinator_builder(next_checkpoint_id=5)
    coord.on_tick(100)
    # 4 may be the previous attempt's completed checkpoint: never delete it.
    assert coord.receive_acknowledge(4, SOURCE, "old", 110) == (AcknowledgeResult.UNKNOWN, [])
    assert coord.receive_acknowledge(6, SOURCE, "future", 110) == (AcknowledgeResult.UNKNOWN, [])
    assert coord.receive_acknowledge(5, 7, "stranger", 110) == (AcknowledgeResult.UNKNOWN, [])
    assert complete(coord, 5, 120) == [completed(5)]
    assert coord.receive_acknowledge(5, 7, "stranger", 130) == (AcknowledgeResult.UNKNOWN, [])


def test_finalizing_a_checkpoint_that_was_not_fully_acknowledged_raises():
    coord = coordinator_builder()
    coord.on_tick(100)
    coord.receive_acknowledge(1, SOURCE, state(SOURCE, 1), 110)
    with pytest.raises(Exception, match="checkpoint 1 cannot be completed while PENDING"):
        coord.on_checkpoint_finalized(1, 120)
    with pytest.raises(CheckpointCoordinatorStateError, match="checkpoint 9 was not handed"):
        coord.on_checkpoint_finalized(9, 120)


# ---- subsumption -----------------------------------------------------------------------------


def test_a_completion_subsumes_older_pending_checkpoints_but_not_newer_ones():
    coord = coordinator_builder(interval_ms=100, max_concurrent=3)
    for now in (100, 200, 300):
        coord.on_tick(now)
    assert complete(coord, 2, now_ms=350) == [*aborted(1, SUBSUMED), completed(2)]
    assert coord.pending_checkpoint_ids == (3,)
    assert coord.consecutive_failures == 0  # a subsumed checkpoint did not fail


def test_a_subsumed_checkpoint_whose_metadata_is_written_late_is_discarded_again():
    coord = coordinator_builder(interval_ms=100, max_concurrent=2)
    coord.on_tick(100)
    coord.on_tick(200)
    assert acknowledge_all(coord, 1, now_ms=210) == [finalize(1, 100)]
    assert acknowledge_all(coord, 2, now_ms=220) == [finalize(2, 200)]
    assert coord.on_checkpoint_finalized(2, now_ms=230) == [*aborted(1, SUBSUMED), completed(2)]
    assert coord.on_checkpoint_finalized(1, now_ms=240) == [DiscardState(1)]
    assert coord.completed_checkpoint_ids == (2,)


# ---- the final checkpoint ------------------------------------------------------------------


def test_the_final_checkpoint_triggers_at_once_ignoring_interval_and_min_pause():
    coord = coordinator_builder(interval_ms=100, min_pause_ms=50)
    coord.on_tick(100)
    assert complete(coord, 1, now_ms=150) == [completed(1)]
    assert coord.request_final_checkpoint(160) == [trigger(2, at=160, final=True)]
    assert coord.status is CoordinatorStatus.FINISHING


def test_the_final_checkpoint_waits_for_a_free_slot_and_no_periodic_one_triggers_meanwhile():
    coord = coordinator_builder(interval_ms=100, max_concurrent=1)
    coord.on_tick(100)
    assert coord.request_final_checkpoint(150) == []
    assert coord.on_tick(200) == []
    assert coord.on_tick(300) == []
    assert complete(coord, 1, now_ms=320) == [completed(1), trigger(2, at=320, final=True)]


def test_the_final_checkpoint_subsumes_older_checkpoints_and_ends_all_triggering():
    coord = coordinator_builder(interval_ms=100, max_concurrent=2)
    coord.on_tick(100)
    assert coord.request_final_checkpoint(150) == [trigger(2, at=150, final=True)]
    [finalize_final] = acknowledge_all(coord, 2, now_ms=160)
    assert finalize_final == finalize(2, 150, final=True)
    assert coord.on_checkpoint_finalized(2, now_ms=170) == [
        *aborted(1, SUBSUMED),
        completed(2, final=True),
    ]
    assert coord.status is CoordinatorStatus.FINISHED
    assert coord.next_trigger_ms is None
    assert coord.on_tick(10_000) == []
    assert coord.request_final_checkpoint(10_001) == []


def test_a_second_final_request_triggers_nothing_more():
    coord = coordinator_builder()
    assert coord.request_final_checkpoint(10) == [trigger(1, at=10, final=True)]
    assert coord.request_final_checkpoint(20) == []
    assert coord.on_tick(500) == []
    assert coord.pending_checkpoint_ids == (1,)


# ---- savepoints ------------------------------------------------------------------------------


def test_a_savepoint_triggers_at_once_ignoring_max_concurrent_and_min_pause():
    coord = coordinator_builder(interval_ms=100, min_pause_ms=1_000, max_concurrent=1)
    coord.on_tick(100)
    assert coord.request_savepoint(110) == [savepoint(2, at=110)]
    assert coord.request_savepoint(120) == [savepoint(3, at=120)]
    assert coord.pending_checkpoint_ids == (1, 2, 3)


def test_a_savepoint_goes_ahead_of_a_waiting_periodic_checkpoint():
    coord = coordinator_builder(interval_ms=100, max_concurrent=1)
    coord.on_tick(100)
    assert coord.on_tick(200) == []  # the periodic request waits for checkpoint 1
    assert coord.request_savepoint(210) == [savepoint(2, at=210)]
    assert complete(coord, 1, now_ms=250) == [completed(1)]  # the savepoint holds the slot
    [finalize_savepoint] = acknowledge_all(coord, 2, now_ms=260)
    assert finalize_savepoint == finalize(2, 210, is_savepoint=True)
    assert coord.on_checkpoint_finalized(2, now_ms=270) == [
        completed(2, is_savepoint=True),
        trigger(3, at=270),
    ]
    assert coord.completed_checkpoint_ids == (1,)
    assert coord.completed_savepoint_ids == (2,)


def test_a_savepoint_is_not_subsumed_by_a_newer_checkpoint():
    coord = coordinator_builder(interval_ms=100, max_concurrent=1)
    assert coord.request_savepoint(50) == [savepoint(1, at=50)]
    assert coord.on_tick(100) == []  # the pending savepoint counts towards max concurrent
    assert complete(coord, 1, now_ms=110) == [completed(1, is_savepoint=True), trigger(2, 110)]
    assert coord.request_savepoint(120) == [savepoint(3, at=120)]
    assert coord.request_savepoint(130) == [savepoint(4, at=130)]
    acknowledge_all(coord, 2, now_ms=140)
    coord.receive_acknowledge(4, SOURCE, state(SOURCE, 4), 145)
    assert coord.on_checkpoint_finalized(2, now_ms=150) == [completed(2)]
    assert coord.pending_checkpoint_ids == (3, 4)


def test_a_completed_savepoint_subsumes_no_older_checkpoint():
    coord = coordinator_builder(interval_ms=100, max_concurrent=1)
    coord.on_tick(100)
    assert coord.request_savepoint(110) == [savepoint(2, at=110)]
    assert complete(coord, 2, now_ms=120) == [completed(2, is_savepoint=True)]
    assert coord.pending_checkpoint_ids == (1,)
    assert coord.completed_checkpoint_ids == ()


# ---- lifecycle and configuration -----------------------------------------------------------


def test_triggering_before_start_or_starting_twice_raises():
    coord = coordinator_builder(start_ms=None)
    with pytest.raises(CheckpointCoordinatorStateError, match="ticked before start"):
        coord.on_tick(0)
    with pytest.raises(CheckpointCoordinatorStateError, match="savepoint while CREATED"):
        coord.request_savepoint(0)
    coord.start(0)
    with pytest.raises(CheckpointCoordinatorStateError, match="started while RUNNING"):
        coord.start(1)


@pytest.mark.parametrize(
    "setting",
    [
        {"interval_ms": 0},
        {"min_pause_ms": -1},
        {"timeout_ms": 0},
        {"max_concurrent": 0},
        {"tolerable_failures": -1},
        {"max_concurrent": True},
    ],
    ids=str,
)
def test_a_config_outside_its_range_is_refused(setting):
    values = {"interval_ms": 100, **setting}
    with pytest.raises(ConfigurationError, match=next(iter(setting))):
        CheckpointCoordinatorConfig(**values)
