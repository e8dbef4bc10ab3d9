"""The coordinator when checkpoints fail, event by event: declines, timeouts, late
acknowledgements, tolerable failures, failed metadata writes, a failing final
checkpoint and failover; then a property test over random event sequences."""

from __future__ import annotations

import pytest
from coordinator_builder import (
    SINK,
    SOURCE,
    TASKS,
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
from hypothesis import example, given, settings
from hypothesis import strategies as st

from barrierflow.checkpoint.coordinator import (
    AcknowledgeResult,
    CheckpointCoordinatorStateError,
    CoordinatorStatus,
    DiscardState,
    FailJob,
    FinalizeCheckpoint,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    TriggerCheckpoint,
)
from barrierflow.checkpoint.failure import CheckpointFailureReason

R = CheckpointFailureReason
EXPIRED_MESSAGE = "the checkpoint timed out before all tasks acknowledged"

# ---- declines --------------------------------------------------------------------------------


def test_a_decline_aborts_the_checkpoint_with_the_tasks_reason_and_discards_its_state():
    coord = coordinator_builder(tolerable_failures=5)
    coord.on_tick(100)
    coord.receive_acknowledge(1, SOURCE, state(SOURCE, 1), 110)
    assert coord.receive_decline(1, SINK, R.CHECKPOINT_ASYNC_EXCEPTION, 120) == aborted(
        1, R.CHECKPOINT_ASYNC_EXCEPTION
    )
    assert coord.pending_checkpoint_ids == ()
    assert coord.consecutive_failures == 1


def test_a_decline_frees_the_slot_for_a_waiting_trigger():
    coord = coordinator_builder(interval_ms=100, tolerable_failures=5)
    coord.on_tick(100)
    assert coord.on_tick(200) == []
    assert coord.receive_decline(1, SINK, R.CHECKPOINT_DECLINED, 230) == [
        *aborted(1, R.CHECKPOINT_DECLINED),
        trigger(2, at=230),
    ]


def test_a_decline_for_a_checkpoint_that_is_not_pending_any_more_is_ignored():
    coord = coordinator_builder(tolerable_failures=5)
    coord.on_tick(100)
    coord.receive_decline(1, SINK, R.CHECKPOINT_DECLINED, 110)
    assert coord.receive_decline(1, SOURCE, R.CHECKPOINT_DECLINED, 111) == []  # aborted
    assert coord.receive_decline(9, SOURCE, R.CHECKPOINT_DECLINED, 112) == []  # unknown
    coord.on_tick(200)
    acknowledge_all(coord, 2, 210)
    assert coord.receive_decline(2, SINK, R.CHECKPOINT_DECLINED, 220) == []  # finalizing
    assert coord.on_checkpoint_finalized(2, 230) == [completed(2)]
    assert coord.receive_decline(2, SINK, R.CHECKPOINT_DECLINED, 240) == []  # completed
    assert coord.consecutive_failures == 0


# ---- timeouts and late acknowledgements ----------------------------------------------------


def test_a_checkpoint_expires_at_its_timeout_discarding_the_state_received_so_far():
    coord = coordinator_builder(interval_ms=100, timeout_ms=500, tolerable_failures=5)
    assert coord.on_tick(100) == [trigger(1, at=100)]
    coord.receive_acknowledge(1, SOURCE, state(SOURCE, 1), 150)
    assert coord.on_tick(599) == []
    assert coord.on_tick(600) == [*aborted(1, R.CHECKPOINT_EXPIRED), trigger(2, at=600)]
    assert coord.consecutive_failures == 1


def test_checkpoints_expire_in_id_order_within_one_tick():
    coord = coordinator_builder(
        interval_ms=100, timeout_ms=150, max_concurrent=2, tolerable_failures=5
    )
    coord.on_tick(100)
    coord.on_tick(200)
    assert coord.on_tick(400) == [
        *aborted(1, R.CHECKPOINT_EXPIRED),
        *aborted(2, R.CHECKPOINT_EXPIRED),
        trigger(3, at=400),
    ]


def test_a_checkpoint_being_finalized_does_not_expire():
    coord = coordinator_builder(timeout_ms=500)
    coord.on_tick(100)
    assert acknowledge_all(coord, 1, 590) == [finalize(1, 100)]
    assert coord.on_tick(700) == []
    assert coord.on_checkpoint_finalized(1, 710) == [completed(1), trigger(2, at=710)]


def test_a_late_acknowledgement_of_an_aborted_checkpoint_is_discarded():
    coord = coordinator_builder(timeout_ms=500, tolerable_failures=5)
    coord.on_tick(100)
    coord.on_tick(600)
    assert coord.receive_acknowledge(1, SINK, "late", 610) == (
        AcknowledgeResult.DISCARDED,
        [DiscardState(1)],
    )


# ---- tolerable failures ----------------------------------------------------------------------


def test_the_job_fails_once_consecutive_failures_exceed_the_tolerable_number():
    coord = coordinator_builder(interval_ms=100, timeout_ms=50, tolerable_failures=2)
    assert coord.on_tick(100) == [trigger(1, at=100)]
    assert coord.on_tick(150) == aborted(1, R.CHECKPOINT_EXPIRED)
    assert coord.on_tick(200) == [trigger(2, at=200)]
    assert coord.on_tick(250) == aborted(2, R.CHECKPOINT_EXPIRED)
    assert coord.on_tick(300) == [trigger(3, at=300)]
    assert coord.on_tick(350) == [
        *aborted(3, R.CHECKPOINT_EXPIRED),
        FailJob(
            "exceeded the tolerable checkpoint failure number (2): "
            f"checkpoint 3 failed: {EXPIRED_MESSAGE}"
        ),
    ]
    assert coord.consecutive_failures == 3
    assert coord.status is CoordinatorStatus.FAILING


def test_the_fail_job_message_names_the_declining_task():
    coord = coordinator_builder(next_checkpoint_id=7)
    coord.on_tick(100)
    assert coord.receive_decline(7, SINK, R.CHECKPOINT_DECLINED, 110) == [
        *aborted(7, R.CHECKPOINT_DECLINED),
        FailJob(
            "exceeded the tolerable checkpoint failure number (0): "
            "checkpoint 7 failed: a task declined the checkpoint (task 1)"
        ),
    ]


def test_no_checkpoint_triggers_after_the_job_was_told_to_fail():
    coord = coordinator_builder(interval_ms=100, timeout_ms=50)
    coord.on_tick(100)
    assert coord.on_tick(150)[-1] == FailJob(
        f"exceeded the tolerable checkpoint failure number (0): checkpoint 1 failed: "
        f"{EXPIRED_MESSAGE}"
    )
    assert coord.next_trigger_ms is None
    assert coord.on_tick(1_000) == []
    assert coord.request_final_checkpoint(1_001) == []


def test_a_completion_resets_the_consecutive_failure_count():
    coord = coordinator_builder(interval_ms=100, timeout_ms=50, tolerable_failures=1)
    coord.on_tick(100)
    assert coord.on_tick(150) == aborted(1, R.CHECKPOINT_EXPIRED)
    coord.on_tick(200)
    assert complete(coord, 2, 220) == [completed(2)]
    assert coord.consecutive_failures == 0
    coord.on_tick(300)
    assert coord.on_tick(350) == aborted(3, R.CHECKPOINT_EXPIRED)  # 1 failure: tolerated
    assert coord.consecutive_failures == 1


@pytest.mark.parametrize("reason", list(CheckpointFailureReason), ids=lambda r: r.name)
def test_only_reasons_that_count_as_failures_feed_the_tolerable_failure_count(reason):
    counted = {
        R.CHECKPOINT_EXPIRED,
        R.CHECKPOINT_DECLINED,
        R.CHECKPOINT_ASYNC_EXCEPTION,
        R.FINALIZE_CHECKPOINT_FAILURE,
    }
    coord = coordinator_builder(interval_ms=100, min_pause_ms=10_000)
    coord.on_tick(100)
    actions = coord.receive_decline(1, SINK, reason, 110)
    assert actions[:2] == aborted(1, reason)
    assert (actions[2:] != []) == (reason in counted)
    assert coord.consecutive_failures == (1 if reason in counted else 0)


def test_a_failed_savepoint_does_not_count_towards_tolerable_failures():
    coord = coordinator_builder(timeout_ms=50)
    assert coord.request_savepoint(10) == [savepoint(1, at=10)]
    assert coord.receive_decline(1, SINK, R.CHECKPOINT_DECLINED, 20) == aborted(
        1, R.CHECKPOINT_DECLINED
    )
    assert coord.request_savepoint(30) == [savepoint(2, at=30)]
    assert coord.on_tick(80) == aborted(2, R.CHECKPOINT_EXPIRED)
    assert coord.consecutive_failures == 0
    assert coord.status is CoordinatorStatus.RUNNING


# ---- failed metadata writes ------------------------------------------------------------------


def test_a_failed_metadata_write_aborts_the_checkpoint_and_counts_as_a_failure():
    coord = coordinator_builder()
    coord.on_tick(100)
    acknowledge_all(coord, 1, 110)
    assert coord.on_finalize_failed(1, 120) == [
        *aborted(1, R.FINALIZE_CHECKPOINT_FAILURE),
        FailJob(
            "exceeded the tolerable checkpoint failure number (0): "
            "checkpoint 1 failed: writing the checkpoint metadata failed"
        ),
    ]
    assert coord.completed_checkpoint_ids == ()


def test_a_failed_metadata_write_frees_the_slot_for_a_waiting_trigger():
    coord = coordinator_builder(interval_ms=100, tolerable_failures=1)
    coord.on_tick(100)
    acknowledge_all(coord, 1, 110)
    assert coord.on_tick(200) == []
    assert coord.on_finalize_failed(1, 210) == [
        *aborted(1, R.FINALIZE_CHECKPOINT_FAILURE),
        trigger(2, at=210),
    ]


def test_a_finalize_answer_for_a_checkpoint_not_being_finalized_is_refused():
    coord = coordinator_builder()
    coord.on_tick(100)
    with pytest.raises(Exception, match="cannot be aborted as unfinalizable while PENDING"):
        coord.on_finalize_failed(1, 110)
    with pytest.raises(CheckpointCoordinatorStateError, match="checkpoint 5 was not handed"):
        coord.on_finalize_failed(5, 110)


# ---- the final checkpoint failing ----------------------------------------------------------


def test_a_failed_final_checkpoint_is_triggered_again_after_the_min_pause():
    coord = coordinator_builder(interval_ms=100, min_pause_ms=50, tolerable_failures=5)
    assert coord.request_final_checkpoint(10) == [trigger(1, at=10, final=True)]
    assert coord.receive_decline(1, SINK, R.CHECKPOINT_DECLINED, 30) == aborted(
        1, R.CHECKPOINT_DECLINED
    )
    assert coord.next_trigger_ms == 80
    assert coord.on_tick(79) == []
    assert coord.on_tick(80) == [trigger(2, at=80, final=True)]
    assert coord.consecutive_failures == 1


def test_an_expired_final_checkpoint_is_triggered_again_at_once_without_min_pause():
    coord = coordinator_builder(timeout_ms=500, tolerable_failures=5)
    coord.request_final_checkpoint(10)
    assert coord.on_tick(510) == [
        *aborted(1, R.CHECKPOINT_EXPIRED),
        trigger(2, at=510, final=True),
    ]


def test_a_final_checkpoint_failing_too_often_fails_the_job_instead_of_retrying():
    coord = coordinator_builder(tolerable_failures=1)
    coord.request_final_checkpoint(10)
    assert coord.receive_decline(1, SINK, R.CHECKPOINT_DECLINED, 20) == [
        *aborted(1, R.CHECKPOINT_DECLINED),
        trigger(2, at=20, final=True),
    ]
    assert coord.receive_decline(2, SINK, R.CHECKPOINT_DECLINED, 30) == [
        *aborted(2, R.CHECKPOINT_DECLINED),
        FailJob(
            "exceeded the tolerable checkpoint failure number (1): "
            "checkpoint 2 failed: a task declined the checkpoint (task 1)"
        ),
    ]
    assert coord.on_tick(1_000) == []


def test_the_final_savepoint_of_a_stop_completes_without_subsuming_and_finishes():
    coord = coordinator_builder(tolerable_failures=0)
    stop = TriggerCheckpoint(1, 10, is_final=True, is_savepoint=True)
    assert coord.request_final_checkpoint(10, savepoint=True) == [stop]
    assert complete(coord, 1, 20) == [completed(1, final=True, is_savepoint=True)]
    assert coord.status is CoordinatorStatus.FINISHED
    assert (coord.completed_savepoint_ids, coord.completed_checkpoint_ids) == ((1,), ())


@pytest.mark.parametrize("expired", [False, True], ids=["declined", "expired"])
def test_a_failed_final_savepoint_of_a_stop_fails_the_job_instead_of_retrying(expired):
    # the sources already stopped: only a failover (they resume) gets the job going again
    coord = coordinator_builder(timeout_ms=500, tolerable_failures=5)
    coord.request_final_checkpoint(10, savepoint=True)
    if expired:
        actions, why = coord.on_tick(510), R.CHECKPOINT_EXPIRED.value
    else:
        actions = coord.receive_decline(1, SINK, R.CHECKPOINT_DECLINED, 30)
        why = f"{R.CHECKPOINT_DECLINED.value} (task 1)"
    reason = R.CHECKPOINT_EXPIRED if expired else R.CHECKPOINT_DECLINED
    assert actions == [
        *aborted(1, reason),
        FailJob(f"the final savepoint 1 of a stop with savepoint failed: {why}"),
    ]
    assert coord.consecutive_failures == 0  # a savepoint does not count
    assert coord.status is CoordinatorStatus.FAILING
    assert coord.on_tick(2_000) == []


# ---- failover --------------------------------------------------------------------------------


def test_failover_aborts_every_pending_checkpoint_without_counting_and_stops_for_good():
    coord = coordinator_builder(interval_ms=100, max_concurrent=2)
    coord.on_tick(100)
    coord.on_tick(200)
    coord.request_savepoint(210)
    acknowledge_all(coord, 1, 220)  # 1 is being finalized
    failover = R.JOB_FAILOVER_REGION
    assert coord.abort_pending_on_failover(230) == [
        *aborted(1, failover),
        *aborted(2, failover),
        *aborted(3, failover),
    ]
    assert coord.pending_checkpoint_ids == ()
    assert coord.consecutive_failures == 0
    assert coord.status is CoordinatorStatus.STOPPED
    assert coord.on_tick(10_000) == []
    assert coord.request_final_checkpoint(10_000) == []
    assert coord.receive_acknowledge(2, SINK, "zombie", 10_001) == (
        AcknowledgeResult.DISCARDED,
        [DiscardState(2)],
    )
    assert coord.abort_pending_on_failover(10_002) == []
    with pytest.raises(CheckpointCoordinatorStateError, match="savepoint while STOPPED"):
        coord.request_savepoint(10_003)


def test_failover_never_discards_a_completed_checkpoint():
    coord = coordinator_builder()
    coord.on_tick(100)
    complete(coord, 1, 110)
    assert coord.abort_pending_on_failover(120) == []


# ---- properties over random event sequences --------------------------------------------------

TICK = st.tuples(st.just("tick"), st.integers(0, 8))  # time passes, in quarter intervals
# Which checkpoint an event is about: an index into the ids triggered so far, with one
# id before them (the previous attempt's) and one after them (never triggered)...
ACK = st.tuples(st.just("ack"), st.integers(0, 10), st.sampled_from([*sorted(TASKS), 9]))
# ...or, for ack_all, an index into the pending ones.
ACK_ALL = st.tuples(st.just("ack_all"), st.integers(0, 3))
DECLINE = st.tuples(st.just("decline"), st.integers(0, 10), st.sampled_from(list(R)))
# The JobMaster answers every FinalizeCheckpoint handed out so far: oldest or newest
# first, and with success or failure.
FINALIZED = st.tuples(st.just("finalized"), st.booleans(), st.booleans())
EVENTS = st.one_of(
    # repeated branches are drawn more often: checkpoints get triggered and acknowledged
    *[TICK, ACK_ALL] * 3,
    FINALIZED,
    ACK,
    DECLINE,
    st.tuples(st.just("final"), st.integers(0, 3)),  # acts on 0 only: the end comes late
    st.just(("savepoint",)),
)


@settings(max_examples=400, deadline=None)
@example(  # two checkpoints being finalized at once, the newer one answered first
    events=[("tick", 4), ("tick", 4), ("ack_all", 0), ("ack_all", 1), ("finalized", True, True)],
    interval_ms=100,
    min_pause_quarters=0,
    timeout_halves=16,
    max_concurrent=2,
    tolerable_failures=0,
    left_out=set(),
)
@given(
    events=st.lists(EVENTS, min_size=10, max_size=60),
    interval_ms=st.integers(4, 100),
    min_pause_quarters=st.integers(0, 8),
    timeout_halves=st.integers(1, 16),
    max_concurrent=st.integers(1, 3),
    tolerable_failures=st.integers(0, 3),
    # swarm testing: a run leaves some kinds of event out, so that, say, runs without
    # declines get far enough to complete checkpoints out of order
    left_out=st.sets(st.sampled_from(["ack", "decline", "final", "savepoint"])),
)
def test_random_events_never_complete_twice_never_exceed_max_concurrent_and_complete_in_order(
    events,
    interval_ms,
    min_pause_quarters,
    timeout_halves,
    max_concurrent,
    tolerable_failures,
    left_out,
):
    first_id = 10
    coord = coordinator_builder(
        interval_ms=interval_ms,
        min_pause_ms=min_pause_quarters * interval_ms // 4,
        timeout_ms=timeout_halves * interval_ms // 2,
        max_concurrent=max_concurrent,
        tolerable_failures=tolerable_failures,
        next_checkpoint_id=first_id,
    )
    now = 0
    savepoints: set[int] = set()
    triggered: list[int] = []
    finalizing: list[int] = []  # FinalizeCheckpoint handed out, not yet answered
    finalized: set[int] = set()
    completed_ids: list[int] = []
    discarded: set[int] = set()

    def check(actions):
        for position, action in enumerate(actions):
            if isinstance(action, TriggerCheckpoint):
                assert not triggered or action.checkpoint_id > triggered[-1]
                triggered.append(action.checkpoint_id)
                if action.is_savepoint:
                    savepoints.add(action.checkpoint_id)
            elif isinstance(action, FinalizeCheckpoint):
                assert action.checkpoint_id not in finalized, "finalized twice"
                finalized.add(action.checkpoint_id)
                finalizing.append(action.checkpoint_id)
            elif isinstance(action, NotifyCheckpointComplete):
                assert action.checkpoint_id in finalized
                assert action.checkpoint_id not in completed_ids, "completed twice"
                completed_ids.append(action.checkpoint_id)
            elif isinstance(action, DiscardState):
                discarded.add(action.checkpoint_id)
            elif isinstance(action, FailJob):
                assert position == len(actions) - 1, "FailJob must come last"
            else:
                assert isinstance(action, NotifyCheckpointAborted)
        assert not discarded & set(completed_ids), "a completed checkpoint was discarded"
        checkpoints = [i for i in completed_ids if i not in savepoints]
        assert checkpoints == sorted(set(checkpoints))
        assert coord.completed_checkpoint_ids == tuple(checkpoints)
        pending = [i for i in coord.pending_checkpoint_ids if i not in savepoints]
        assert len(pending) <= max_concurrent
        if any(isinstance(a, FailJob) for a in actions):
            check_failover(coord.abort_pending_on_failover(now))

    def check_failover(actions):
        assert all(isinstance(a, NotifyCheckpointAborted | DiscardState) for a in actions)
        check(actions)

    def about(index: int) -> int:
        known = [first_id - 1, *triggered, first_id + len(triggered)]
        return known[index % len(known)]

    for event in events:
        kind = event[0]
        if kind in left_out:
            continue
        if kind == "tick":
            now += event[1] * interval_ms // 4
            check(coord.on_tick(now))
        elif kind == "ack":
            _, actions = coord.receive_acknowledge(about(event[1]), event[2], "s", now)
            check(actions)
        elif kind == "ack_all" and coord.pending_checkpoint_ids:
            pending = coord.pending_checkpoint_ids
            checkpoint_id = pending[event[1] % len(pending)]
            for task in sorted(TASKS):
                _, actions = coord.receive_acknowledge(checkpoint_id, task, "s", now)
                check(actions)
        elif kind == "decline":
            check(coord.receive_decline(about(event[1]), SINK, event[2], now))
        elif kind == "finalized":
            _, newest_first, written = event
            answering = sorted(finalizing, reverse=newest_first)
            finalizing.clear()
            for checkpoint_id in answering:
                if written:
                    check(coord.on_checkpoint_finalized(checkpoint_id, now))
                else:
                    check(coord.on_finalize_failed(checkpoint_id, now))
        elif kind == "final" and event[1] == 0:
            check(coord.request_final_checkpoint(now))
        elif kind == "savepoint" and coord.status in (
            CoordinatorStatus.RUNNING,
            CoordinatorStatus.FINISHING,
        ):
            check(coord.request_savepoint(now))
    check_failover(coord.abort_pending_on_failover(now))  # every run ends in a failover
