"""Connectors: `barrierflow.connectors.files` (FileSource, FileSink),
`barrierflow.connectors.datagen` (DataGeneratorSource, NumberSequenceSource).

The contracts a connector implements are exported here: `Source` (split-based, replayable)
and `TwoPhaseCommitSink` (exactly-once sinks; `docs/connectors.md` walks through one).
"""

from barrierflow.connectors.base import (
    Sink,
    SinkContext,
    SinkWriter,
    Source,
    SourceReader,
    SourceSplit,
    SplitBatch,
)
from barrierflow.connectors.delivery_guarantee import DeliveryGuarantee
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink

__all__ = [
    "DeliveryGuarantee",
    "Sink",
    "SinkContext",
    "SinkWriter",
    "Source",
    "SourceReader",
    "SourceSplit",
    "SplitBatch",
    "TwoPhaseCommitSink",
]
