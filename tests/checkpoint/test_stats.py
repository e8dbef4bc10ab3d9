"""The checkpoint statistics tracker, event by event: a completed checkpoint with several
subtasks, a declined one, an expired one, counts and summaries computed by hand, the
latest of each kind, late and duplicate reports, illegal moves, the REST JSON shapes
(`cluster/rest/bodies.py`) and the history codec's round trip."""

from __future__ import annotations

import json

import pytest

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.history_codec import HistoryRecord, decode_record, encode_record
from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsCounts,
    CheckpointStatsStatus,
    CheckpointStatsTracker,
    IllegalCheckpointStatsTransitionError,
    StatsSummary,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)
from barrierflow.cluster.rest.bodies import (
    checkpoint_json,
    checkpoints_json,
    restored_json,
    summary_json,
)

SOURCE = TaskVertexInfo(0, "Source: words", 1)
COUNT = TaskVertexInfo(1, "Reduce", 2)
VERTICES = (SOURCE, COUNT)
"""Three subtasks: the source (1/1) and two counters (1/2, 2/2)."""


def tracker_builder(**options) -> CheckpointStatsTracker:
    return CheckpointStatsTracker(VERTICES, **options)


def ack(vertex: TaskVertexInfo, index: int, at: int, **figures) -> SubtaskCheckpointStats:
    return SubtaskCheckpointStats(vertex.vertex_id, index, at, **figures)


def complete(
    tracker, checkpoint_id: int, trigger: int, acks: list[int], done: int, **figures
) -> CheckpointStats:
    """Trigger, one acknowledgement per subtask at the given times, complete."""
    tracker.report_triggered(checkpoint_id, trigger)
    subtasks = [(SOURCE, 0), (COUNT, 0), (COUNT, 1)]
    for (vertex, index), at in zip(subtasks, acks, strict=True):
        assert tracker.report_acknowledged(checkpoint_id, ack(vertex, index, at, **figures))
    return tracker.report_completed(checkpoint_id, done, external_path=f"/c/chk-{checkpoint_id}")


# ---- one checkpoint, event by event ----------------------------------------------------------


def test_a_completed_checkpoint_adds_up_its_subtasks():
    tracker = tracker_builder()
    tracker.report_triggered(7, 10_000)
    # Acknowledgements arrive out of graph order; each carries what its subtask measured.
    tracker.report_acknowledged(
        7,
        ack(COUNT, 1, 10_250, sync_ms=3.0, async_ms=40.0, alignment_ms=120.0,
            start_delay_ms=8.0, state_bytes=1_000_000),
    )  # fmt: skip
    tracker.report_acknowledged(
        7, ack(SOURCE, 0, 10_020, sync_ms=0.5, async_ms=2.0, start_delay_ms=1.0, state_bytes=96)
    )
    in_progress = tracker.snapshot().checkpoint(7)
    assert in_progress.status is CheckpointStatsStatus.IN_PROGRESS
    assert (in_progress.num_acknowledged, in_progress.end_to_end_duration_ms) == (2, 250)
    tracker.report_acknowledged(
        7,
        ack(COUNT, 0, 10_312, sync_ms=1.0, async_ms=25.0, alignment_ms=60.0,
            start_delay_ms=5.0, state_bytes=258_291, persisted_bytes=0),
    )  # fmt: skip

    stats = tracker.report_completed(7, 10_318, external_path="/c/job/chk-7")

    assert stats.status is CheckpointStatsStatus.COMPLETED
    assert stats.trigger_ms == 10_000
    assert stats.latest_ack_ms == 10_312
    assert stats.end_to_end_duration_ms == 312  # trigger to the last acknowledgement
    assert stats.duration_ms == 318  # trigger to `_metadata` written
    assert stats.state_bytes == 1_000_000 + 96 + 258_291
    assert stats.persisted_bytes == 0
    assert (stats.max_sync_ms, stats.max_async_ms) == (3.0, 40.0)
    assert (stats.max_alignment_ms, stats.max_start_delay_ms) == (120.0, 8.0)
    assert (stats.num_acknowledged, stats.num_subtasks) == (3, 3)
    assert stats.external_path == "/c/job/chk-7"
    assert stats.failure_reason is None and stats.failure_message is None
    assert stats.describe() == (
        "checkpoint 7 completed in 318 ms (last acknowledgement after 312 ms), 1.2 MiB state, "
        "sync max 3 ms, async max 40 ms, alignment max 120 ms, start delay max 8 ms"
    )
    assert tracker.snapshot().counts == CheckpointStatsCounts(triggered=1, completed=1)


def test_the_details_of_a_completed_checkpoint_list_every_subtask_of_every_vertex():
    tracker = tracker_builder()
    stats = complete(tracker, 3, 1_000, [1_010, 1_030, 1_020], 1_035, sync_ms=2.0, state_bytes=10)

    details = checkpoint_json(stats, details=True)

    assert sorted(details["tasks"]) == ["0", "1"]
    counter = details["tasks"]["1"]
    assert counter | {"subtasks": None} == {
        "id": 1,
        "name": "Reduce",
        "parallelism": 2,
        "status": "COMPLETED",
        "latest_ack_timestamp": 1_030,
        "end_to_end_duration": 30,
        "state_size": 20,
        "checkpointed_size": 20,
        "persisted_data": 0,
        "num_subtasks": 2,
        "num_acknowledged_subtasks": 2,
        "subtasks": None,
    }
    assert counter["subtasks"][1] == {
        "index": 1,
        "status": "completed",
        "ack_timestamp": 1_020,
        "end_to_end_duration": 20,
        "state_size": 10,
        "checkpointed_size": 10,
        "checkpoint": {"sync": 2.0, "async": 0.0},
        "alignment": {"duration": 0.0, "persisted": 0},
        "start_delay": 0.0,
        "unaligned_checkpoint": False,
    }


def test_a_declined_checkpoint_fails_with_the_reason_and_the_subtask_that_declined():
    tracker = tracker_builder()
    tracker.report_triggered(8, 5_000)
    tracker.report_acknowledged(8, ack(SOURCE, 0, 5_010, state_bytes=64))
    reason = CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION
    assert tracker.report_declined(
        8, SubtaskDecline(COUNT.vertex_id, 1, 5_040, reason, "OSError: disk full")
    )

    stats = tracker.report_failed(8, 5_041, reason)

    assert stats.status is CheckpointStatsStatus.FAILED
    assert stats.failure_reason is reason
    assert stats.failure_ms == 5_041
    assert stats.failure_message == "writing a task's state failed: 'Reduce' (2/2) declined: " + (
        "OSError: disk full"
    )
    assert stats.end_to_end_duration_ms == stats.duration_ms == 41
    assert stats.describe() == f"checkpoint 8 failed after 41 ms: {stats.failure_message}"
    subtasks = checkpoint_json(stats, details=True)["tasks"]["1"]["subtasks"]
    assert subtasks == [
        {"index": 0, "status": "pending_or_failed"},
        {
            "index": 1,
            "status": "declined",
            "decline_timestamp": 5_040,
            "reason": "CHECKPOINT_ASYNC_EXCEPTION",
            "message": "OSError: disk full",
        },
    ]
    assert tracker.snapshot().counts == CheckpointStatsCounts(triggered=1, failed=1)


def test_a_decline_without_a_message_names_the_subtask_only():
    tracker = tracker_builder()
    tracker.report_triggered(2, 0)
    reason = CheckpointFailureReason.CHECKPOINT_DECLINED
    tracker.report_declined(2, SubtaskDecline(COUNT.vertex_id, 0, 5, reason))

    stats = tracker.report_failed(2, 6, reason)

    assert stats.failure_message == "a task declined the checkpoint: 'Reduce' (1/2) declined"


def test_an_expired_checkpoint_names_the_subtasks_that_never_acknowledged():
    tracker = tracker_builder()
    tracker.report_triggered(9, 1_000)
    tracker.report_acknowledged(9, ack(COUNT, 0, 1_400, state_bytes=5))

    stats = tracker.report_failed(9, 601_000, CheckpointFailureReason.CHECKPOINT_EXPIRED)

    assert stats.end_to_end_duration_ms == 600_000  # to the failure, as Flink reports it
    assert stats.describe() == (
        "checkpoint 9 failed after 600000 ms: the checkpoint timed out before all tasks "
        "acknowledged (1 of 3 subtasks acknowledged; missing 'Source: words' (1/1), "
        "'Reduce' (2/2))"
    )
    assert stats.state_bytes == 5  # what arrived before it expired


def test_a_subsumed_checkpoint_fails_without_a_list_of_missing_subtasks():
    tracker = tracker_builder()
    tracker.report_triggered(4, 0)

    stats = tracker.report_failed(4, 10, CheckpointFailureReason.CHECKPOINT_SUBSUMED)

    assert stats.failure_message == "a newer checkpoint completed or started first"


def test_a_fully_acknowledged_checkpoint_whose_metadata_failed_names_no_missing_subtasks():
    tracker = tracker_builder()
    tracker.report_triggered(5, 0)
    for vertex, index in [(SOURCE, 0), (COUNT, 0), (COUNT, 1)]:
        tracker.report_acknowledged(5, ack(vertex, index, 10, state_bytes=1))

    stats = tracker.report_failed(5, 12, CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE)

    assert stats.failure_message == "writing the checkpoint metadata failed"
    assert (stats.num_acknowledged, stats.state_bytes, stats.duration_ms) == (3, 3, 12)


# ---- late, duplicate and impossible reports --------------------------------------------------


def test_acknowledgements_of_ended_or_unknown_checkpoints_and_duplicates_are_ignored():
    tracker = tracker_builder()
    tracker.report_triggered(1, 0)
    assert tracker.report_acknowledged(1, ack(SOURCE, 0, 5, state_bytes=1))
    assert not tracker.report_acknowledged(1, ack(SOURCE, 0, 6, state_bytes=99))  # duplicate
    reason = CheckpointFailureReason.CHECKPOINT_DECLINED
    assert not tracker.report_declined(1, SubtaskDecline(0, 0, 7, reason))  # already acknowledged
    tracker.report_failed(1, 10, CheckpointFailureReason.CHECKPOINT_EXPIRED)

    assert not tracker.report_acknowledged(1, ack(COUNT, 0, 11))  # late
    assert not tracker.report_declined(1, SubtaskDecline(1, 1, 12, reason))  # late
    assert not tracker.report_acknowledged(5, ack(COUNT, 0, 13))  # never triggered

    stats = tracker.snapshot().checkpoint(1)
    assert (stats.num_acknowledged, stats.state_bytes, stats.declines) == (1, 1, ())


@pytest.mark.parametrize(
    "events, error",
    [
        pytest.param(
            [("trigger", 1), ("complete", 1), ("fail", 1)], "cannot be reported failed: it already",
            id="fail-after-complete",
        ),
        pytest.param(
            [("trigger", 1), ("fail", 1), ("complete", 1)], "cannot be reported completed: it al",
            id="complete-after-fail",
        ),
        pytest.param([("complete", 3)], "it was never triggered", id="complete-never-triggered"),
        pytest.param([("trigger", 2), ("trigger", 2)], "ids must increase", id="trigger-twice"),
        pytest.param([("trigger", 5), ("trigger", 4)], "ids must increase", id="trigger-older"),
    ],
)  # fmt: skip
def test_illegal_moves_raise_a_named_error(events, error):
    tracker = tracker_builder()
    with pytest.raises(IllegalCheckpointStatsTransitionError, match=error):
        for kind, checkpoint_id in events:
            if kind == "trigger":
                tracker.report_triggered(checkpoint_id, 0)
            elif kind == "complete":
                tracker.report_completed(checkpoint_id, 1, external_path="x")
            else:
                tracker.report_failed(checkpoint_id, 1, CheckpointFailureReason.CHECKPOINT_EXPIRED)


def test_a_report_from_a_subtask_the_job_does_not_have_is_an_error():
    tracker = tracker_builder()
    tracker.report_triggered(1, 0)
    with pytest.raises(ValueError, match="no subtask 2 of vertex 1"):
        tracker.report_acknowledged(1, ack(COUNT, 2, 1))


# ---- counts, summary, latest, history --------------------------------------------------------


def test_counts_and_summary_are_the_figures_computed_by_hand():
    tracker = tracker_builder()
    tracker.report_restored(3, 500, external_path="/c/chk-3")
    # Four completed checkpoints; end-to-end durations 100, 300, 200, 400 ms.
    complete(tracker, 4, 1_000, [1_050, 1_100, 1_090], 1_105, state_bytes=10, sync_ms=1.0)
    complete(tracker, 5, 2_000, [2_300, 2_100, 2_200], 2_301, state_bytes=20, sync_ms=4.0)
    complete(tracker, 6, 3_000, [3_100, 3_200, 3_150], 3_210, state_bytes=30, async_ms=7.0)
    complete(tracker, 7, 4_000, [4_400, 4_010, 4_020], 4_400, state_bytes=40, alignment_ms=9.0)
    tracker.report_triggered(8, 5_000)
    tracker.report_failed(8, 5_600, CheckpointFailureReason.CHECKPOINT_EXPIRED)
    tracker.report_triggered(9, 6_000)
    tracker.report_acknowledged(9, ack(SOURCE, 0, 6_001, state_bytes=1_000_000))

    snapshot = tracker.snapshot()

    assert snapshot.counts == CheckpointStatsCounts(
        restored=1, triggered=6, in_progress=1, completed=4, failed=1
    )
    summary = snapshot.summary
    # Sorted 100, 200, 300, 400: p50 is the 2nd value (nearest rank), p99 the 4th.
    assert summary["end_to_end_duration"] == StatsSummary(
        count=4, min=100, max=400, avg=250.0, p50=200, p99=400
    )
    assert summary["duration"] == StatsSummary(
        count=4, min=105, max=400, avg=(105 + 301 + 210 + 400) / 4, p50=210, p99=400
    )
    # Three subtasks each; the failed and the in-progress checkpoint do not count.
    assert summary["state_size"] == StatsSummary(
        count=4, min=30, max=120, avg=75.0, p50=60, p99=120
    )
    assert summary["sync_duration"] == StatsSummary(
        count=4, min=0.0, max=4.0, avg=1.25, p50=0.0, p99=4.0
    )
    assert summary["async_duration"].max == 7.0
    assert summary["alignment_duration"].max == 9.0
    assert summary["persisted_data"] == StatsSummary(count=4, min=0, max=0, avg=0.0, p50=0, p99=0)


def test_percentiles_cover_the_last_window_while_min_avg_max_cover_every_checkpoint():
    tracker = tracker_builder(summary_window=2)
    for checkpoint_id, duration in [(1, 900), (2, 100), (3, 300)]:
        trigger = checkpoint_id * 10_000
        complete(tracker, checkpoint_id, trigger, [trigger + duration] * 3, trigger + duration)

    summary = tracker.snapshot().summary["end_to_end_duration"]

    assert (summary.min, summary.max, summary.avg) == (100, 900, 1300 / 3)
    assert (summary.p50, summary.p99) == (100, 300)  # over 100 and 300 only


def test_a_summary_of_no_completed_checkpoints_is_empty_not_zero():
    tracker = tracker_builder()
    tracker.report_triggered(1, 0)

    summary = summary_json(tracker.snapshot().summary)

    assert summary["end_to_end_duration"] == {
        "count": 0, "min": None, "max": None, "avg": None, "p50": None, "p99": None
    }  # fmt: skip


def test_latest_completed_savepoint_failed_and_restored_are_kept_apart():
    tracker = tracker_builder()
    tracker.report_restored(10, 1, external_path="/c/chk-10")
    first = complete(tracker, 11, 100, [110, 110, 110], 111)
    tracker.report_triggered(12, 200, is_savepoint=True)
    for vertex, index in [(SOURCE, 0), (COUNT, 0), (COUNT, 1)]:
        tracker.report_acknowledged(12, ack(vertex, index, 210))
    savepoint = tracker.report_completed(12, 215, external_path="/s/savepoint-12")
    tracker.report_triggered(13, 300)
    failed = tracker.report_failed(13, 900, CheckpointFailureReason.CHECKPOINT_EXPIRED)
    tracker.report_restored(11, 1_000, external_path="/c/chk-11")

    snapshot = tracker.snapshot()

    assert snapshot.latest_completed is first  # a savepoint is not the latest checkpoint
    assert snapshot.latest_savepoint is savepoint
    assert (
        savepoint.kind == "savepoint"
        and checkpoint_json(savepoint)["checkpoint_type"] == "SAVEPOINT"
    )
    assert snapshot.latest_failed is failed
    assert restored_json(snapshot.latest_restored) == {
        "id": 11,
        "restore_timestamp": 1_000,
        "is_savepoint": False,
        "external_path": "/c/chk-11",
    }
    assert snapshot.counts.restored == 2


def test_the_history_is_bounded_newest_first_and_includes_checkpoints_in_progress():
    tracker = tracker_builder(history_size=3)
    for checkpoint_id in range(1, 6):
        tracker.report_triggered(checkpoint_id, checkpoint_id * 100)
        tracker.report_failed(
            checkpoint_id, checkpoint_id * 100 + 5, CheckpointFailureReason.CHECKPOINT_SUBSUMED
        )
    tracker.report_triggered(6, 600)

    snapshot = tracker.snapshot()

    assert [s.checkpoint_id for s in snapshot.history] == [6, 5, 4, 3]
    assert snapshot.history[0].status is CheckpointStatsStatus.IN_PROGRESS
    assert snapshot.checkpoint(2) is None  # fell out of the history
    assert snapshot.counts.failed == 5  # counts are not bounded


def test_a_snapshot_does_not_change_when_the_tracker_does():
    tracker = tracker_builder()
    tracker.report_triggered(1, 0)
    before = tracker.snapshot()

    tracker.report_acknowledged(1, ack(SOURCE, 0, 10, state_bytes=7))
    complete(tracker, 2, 20, [30, 30, 30], 31)

    assert before.checkpoint(1).num_acknowledged == 0
    assert before.counts == CheckpointStatsCounts(triggered=1, in_progress=1)
    assert before.latest_completed is None
    assert before.summary["end_to_end_duration"].count == 0


# ---- JSON ------------------------------------------------------------------------------------


def test_the_snapshot_json_has_flinks_checkpoints_shape_and_survives_json_dumps():
    tracker = tracker_builder()
    complete(tracker, 1, 0, [5, 6, 7], 8, state_bytes=3)
    tracker.report_triggered(2, 10)

    document = json.loads(json.dumps(checkpoints_json(tracker.snapshot())))

    assert set(document) == {"counts", "summary", "latest", "history"}
    assert document["counts"] == {
        "restored": 0, "total": 2, "in_progress": 1, "completed": 1, "failed": 0
    }  # fmt: skip
    assert set(document["latest"]) == {"completed", "savepoint", "failed", "restored"}
    assert document["latest"]["completed"]["id"] == 1
    assert [(h["id"], h["status"]) for h in document["history"]] == [
        (2, "IN_PROGRESS"),
        (1, "COMPLETED"),
    ]
    assert "tasks" not in document["history"][0]  # details only per checkpoint
    assert document["summary"]["state_size"]["max"] == 9


def test_a_history_record_turns_back_into_the_same_statistics():
    tracker = tracker_builder()
    tracker.report_triggered(1, 100, is_final=True)
    tracker.report_acknowledged(
        1,
        ack(COUNT, 1, 150, sync_ms=1.5, async_ms=2.5, alignment_ms=3.5, start_delay_ms=4.5,
            state_bytes=6, persisted_bytes=7, unaligned=True),
    )  # fmt: skip
    reason = CheckpointFailureReason.CHECKPOINT_DECLINED
    tracker.report_declined(1, SubtaskDecline(COUNT.vertex_id, 0, 160, reason, "no"))
    stats = tracker.report_failed(1, 170, reason)

    line = json.dumps(encode_record(stats, job_id="run-1"))
    restored = decode_record(json.loads(line))

    assert restored == HistoryRecord(job_id="run-1", stats=stats)
