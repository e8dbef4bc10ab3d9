"""The history record codec: version 1 is the shape barrierflow has always written, and
what is not a readable version-1 record is refused with a named error."""

from __future__ import annotations

import pytest

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.history_codec import (
    UnreadableRecordError,
    decode_record,
    encode_record,
)
from barrierflow.checkpoint.stats import (
    CheckpointStatsTracker,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)
from barrierflow.cluster.rest.bodies import checkpoint_json


def a_declined_checkpoint():
    tracker = CheckpointStatsTracker([TaskVertexInfo(0, "Source", 1), TaskVertexInfo(1, "Sink", 2)])
    tracker.report_triggered(3, 100)
    tracker.report_acknowledged(3, SubtaskCheckpointStats(0, 0, 120, sync_ms=1.0, state_bytes=8))
    reason = CheckpointFailureReason.CHECKPOINT_DECLINED
    tracker.report_declined(3, SubtaskDecline(1, 1, 130, reason, "busy"))
    return tracker.report_failed(3, 131, reason)


def test_version_1_is_the_detailed_checkpoint_shape_with_its_version_and_job_id():
    """Files written before the codec was split from the REST shapes stay readable."""
    stats = a_declined_checkpoint()

    record = encode_record(stats, job_id="run-7")

    assert record == {"version": 1, "job_id": "run-7", **checkpoint_json(stats, details=True)}
    assert decode_record(record).stats == stats


@pytest.mark.parametrize(
    "record",
    [
        pytest.param([1, 2], id="not-an-object"),
        pytest.param({"version": 2, "id": 3}, id="newer-version"),
        pytest.param({"version": 1, "id": 4}, id="damaged"),
    ],
)
def test_what_is_not_a_readable_record_is_refused(record):
    with pytest.raises(UnreadableRecordError):
        decode_record(record)
