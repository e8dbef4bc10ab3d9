"""Which barrier handler a task uses, from the job's checkpointing settings.

=======================  ===============  =================================================
mode                     unaligned        handler
=======================  ===============  =================================================
AT_LEAST_ONCE            no               `CheckpointBarrierTracker` (never blocks)
AT_LEAST_ONCE            yes              `ConfigurationError`: nothing to unalign
EXACTLY_ONCE             no               `CheckpointBarrierAligner` (the timeout is unused)
EXACTLY_ONCE             yes, timeout 0   `CheckpointBarrierUnaligner.unaligned`
EXACTLY_ONCE             yes, timeout >0  `CheckpointBarrierUnaligner.alternating`
=======================  ===============  =================================================

As in Flink, the aligned checkpoint timeout only matters with unaligned checkpoints enabled.
Every handler keeps which channels are open, each channel's last barrier and the newest id
seen in one `ChannelLedger` (`barriers/ledger.py`), so the channel-order rules are one code.

>>> from barrierflow.core.checkpointing_mode import CheckpointingMode
>>> type(barrier_handler_for(CheckpointingMode.EXACTLY_ONCE, False, 0, 2)).__name__
'CheckpointBarrierAligner'
>>> barrier_handler_for(CheckpointingMode.EXACTLY_ONCE, True, 500, 2).aligned_timeout_ms
500
"""

from __future__ import annotations

from typing import Protocol

from barrierflow.core.checkpointing_mode import CheckpointingMode
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.barriers.aligner import CheckpointBarrierAligner
from barrierflow.runtime.barriers.decisions import Decision
from barrierflow.runtime.barriers.tracker import CheckpointBarrierTracker
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier

__all__ = ["BarrierHandler", "barrier_handler_for"]


class BarrierHandler(Protocol):
    """What a task calls on every barrier handler, for the events it polls; mailbox thread only.

    A `CheckpointBarrierUnaligner` also wants `on_barrier_announced` when a barrier's frame
    arrives and `on_alignment_timeout` when its timer fires, and tells through
    `is_persisting(channel)` which arriving data belongs to the channel state.
    """

    def is_blocked(self, channel: int) -> bool: ...
    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> tuple[Decision, ...]: ...
    def on_cancel_marker(
        self, channel: int, marker: CancelCheckpointMarker
    ) -> tuple[Decision, ...]: ...
    def on_end_of_partition(self, channel: int) -> tuple[Decision, ...]: ...


def barrier_handler_for(
    mode: CheckpointingMode, unaligned: bool, aligned_timeout_ms: int, channel_count: int
) -> BarrierHandler:
    """The barrier handler for a task with `channel_count` input channels (see the table).

    Raises `ConfigurationError` for unaligned checkpoints with AT_LEAST_ONCE, and for an
    aligned timeout that is not a whole number of milliseconds >= 0.
    """
    if isinstance(aligned_timeout_ms, bool) or not isinstance(aligned_timeout_ms, int):
        raise ConfigurationError(
            f"the aligned checkpoint timeout must be whole milliseconds, got {aligned_timeout_ms!r}"
        )
    if aligned_timeout_ms < 0:
        raise ConfigurationError(
            f"the aligned checkpoint timeout must be >= 0 ms, got {aligned_timeout_ms}"
        )
    if mode is CheckpointingMode.AT_LEAST_ONCE:
        if unaligned:
            raise ConfigurationError(
                "unaligned checkpoints need CheckpointingMode.EXACTLY_ONCE: AT_LEAST_ONCE never "
                "aligns barriers, so there is nothing to unalign; use EXACTLY_ONCE with "
                "enable_unaligned_checkpoints(), or turn unaligned checkpoints off"
            )
        return CheckpointBarrierTracker(channel_count)
    if mode is not CheckpointingMode.EXACTLY_ONCE:
        raise ConfigurationError(f"unknown checkpointing mode {mode!r}")
    if not unaligned:
        return CheckpointBarrierAligner(channel_count)
    if aligned_timeout_ms == 0:
        return CheckpointBarrierUnaligner.unaligned(channel_count)
    return CheckpointBarrierUnaligner.alternating(channel_count, aligned_timeout_ms)
