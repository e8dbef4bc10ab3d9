"""barrier_handler_for: the checkpointing settings choose the barrier handler."""

from __future__ import annotations

import pytest

from barrierflow.api.checkpoint_config import CheckpointingMode
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.barriers.aligner import CheckpointBarrierAligner
from barrierflow.runtime.barriers.handler import barrier_handler_for
from barrierflow.runtime.barriers.tracker import CheckpointBarrierTracker
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner

EXACTLY_ONCE = CheckpointingMode.EXACTLY_ONCE
AT_LEAST_ONCE = CheckpointingMode.AT_LEAST_ONCE

CHOICES = [
    # mode, unaligned, aligned timeout (ms), handler type, its aligned timeout
    pytest.param(AT_LEAST_ONCE, False, 0, CheckpointBarrierTracker, None, id="at-least-once"),
    pytest.param(
        AT_LEAST_ONCE, False, 250, CheckpointBarrierTracker, None,
        id="at-least-once ignores the aligned timeout",
    ),
    pytest.param(EXACTLY_ONCE, False, 0, CheckpointBarrierAligner, None, id="aligned"),
    pytest.param(
        EXACTLY_ONCE, False, 250, CheckpointBarrierAligner, None,
        id="aligned ignores the aligned timeout, as in Flink",
    ),
    pytest.param(EXACTLY_ONCE, True, 0, CheckpointBarrierUnaligner, 0, id="unaligned"),
    pytest.param(
        EXACTLY_ONCE, True, 250, CheckpointBarrierUnaligner, 250,
        id="unaligned with an aligned timeout alternates",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("mode", "unaligned", "timeout_ms", "kind", "handler_timeout"), CHOICES)
def test_the_settings_choose_the_handler(
    mode: CheckpointingMode,
    unaligned: bool,
    timeout_ms: int,
    kind: type,
    handler_timeout: int | None,
) -> None:
    handler = barrier_handler_for(mode, unaligned, timeout_ms, 3)
    assert type(handler) is kind
    assert getattr(handler, "aligned_timeout_ms", None) == handler_timeout
    assert handler.is_blocked(2) is False  # built for three channels


def test_unaligned_checkpoints_with_at_least_once_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"unaligned checkpoints need .*EXACTLY_ONCE"):
        barrier_handler_for(AT_LEAST_ONCE, True, 0, 2)


@pytest.mark.parametrize("timeout_ms", [-1, 1.5, True])
def test_an_aligned_timeout_that_is_not_whole_non_negative_milliseconds_is_refused(
    timeout_ms: object,
) -> None:
    with pytest.raises(ConfigurationError, match="aligned checkpoint timeout"):
        barrier_handler_for(EXACTLY_ONCE, True, timeout_ms, 2)  # type: ignore[arg-type]
