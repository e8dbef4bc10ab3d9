"""The elements that travel through a channel besides records.

Records travel in batches (`runtime.batch.RecordBatch`: values and, with event
time, their timestamps); these events travel between batches, in order, on the
same channel.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from barrierflow.core.watermark import Watermark

__all__ = [
    "END_OF_PARTITION",
    "MAX_WATERMARK",
    "CancelCheckpointMarker",
    "CheckpointBarrier",
    "EndOfPartition",
    "LatencyMarker",
    "StreamStatus",
    "Watermark",
]

MAX_WATERMARK = 2**63 - 1
"""The watermark a source emits when its input has ended."""


@dataclass(frozen=True, slots=True)
class CheckpointBarrier:
    """Marks the point in a channel that separates checkpoint n's records from later ones."""

    checkpoint_id: int
    timestamp: int
    """Trigger time on the coordinator, in epoch milliseconds."""
    is_savepoint: bool = False
    """A savepoint's barrier: always aligned, never unaligned nor timed out into unaligned."""
    is_final: bool = False
    """The barrier of the final checkpoint at the end of bounded input: always aligned, so
    it follows every record and no in-flight data is left when the tasks finish."""
    target: str | None = None
    """A savepoint's folder (URI): every task writes its state file of this checkpoint there
    instead of into `chk-<n>/` (Flink's checkpoint storage location reference)."""

    def __repr__(self) -> str:
        # Flags only when set, so the repr of a plain checkpoint's barrier stays short.
        flags = (
            (", is_savepoint=True" if self.is_savepoint else "")
            + (", is_final=True" if self.is_final else "")
            + (f", target={self.target!r}" if self.target is not None else "")
        )
        return (
            f"CheckpointBarrier(checkpoint_id={self.checkpoint_id}, "
            f"timestamp={self.timestamp}{flags})"
        )

    @property
    def must_align(self) -> bool:
        """Savepoints and final checkpoints are aligned in every exactly-once mode."""
        return self.is_savepoint or self.is_final


@dataclass(frozen=True, slots=True)
class CancelCheckpointMarker:
    """Tells downstream tasks to stop aligning for a checkpoint an upstream task declined."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class EndOfPartition:
    """The sender will send nothing more on this channel."""


@dataclass(frozen=True, slots=True)
class LatencyMarker:
    """A source subtask's timestamp travelling with the records (Flink's LatencyMarker).

    Sources emit one every `latency_interval_ms` in order with their records, so it waits
    in every buffer and queue they wait in; each operator it reaches records its age in a
    distribution per source vertex and passes it on to one random channel of each output
    edge. It is a measurement only: never given to an operator's code, never channel state.
    """

    marked_time_ms: int
    """The source's wall clock when it emitted the marker, in epoch milliseconds."""
    source_vertex_id: int
    source_subtask: int


class StreamStatus(enum.Enum):
    """Whether a channel currently produces data (and so may hold back the watermark)."""

    ACTIVE = "active"
    """The channel carries records and watermarks."""
    IDLE = "idle"
    """The channel is quiet and does not hold back the downstream watermark."""


END_OF_PARTITION = EndOfPartition()
