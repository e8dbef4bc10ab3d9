"""The ends of a chain: a source operator that owns a SourceReader and a sink
operator that drives a two-phase-commit SinkWriter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from barrierflow.connectors.base import (
    Sink,
    SinkContext,
    SinkWriter,
    Source,
    SourceReader,
    SourceSplit,
)
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator


class SourceOperator(StreamOperator):
    """Reads this subtask's splits; its operator state is the position of every split.

    On restore it takes the union of all old subtasks' positions, so splits may move
    between subtasks when the parallelism changes.
    """

    def __init__(self, uid: str, name: str, source: Source) -> None:
        super().__init__(uid, name)
        self.source = source
        self.splits: Sequence[SourceSplit] = ()
        self.reader: SourceReader | None = None

    def assign_splits(self, splits: Sequence[SourceSplit]) -> None:
        self.splits = splits

    def initialize_state(self, restored: RestoredState | None) -> None:
        self.reader = self.source.create_reader(self.splits)
        positions: dict[str, Any] = {}
        for _, state in restored.operator if restored else ():
            positions.update(state or {})
        self.reader.restore(positions)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        assert self.reader is not None
        return self.reader.poll_batch(max_records)

    def process_batch(self, batch: list[Any]) -> list[Any]:
        return batch

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        assert self.reader is not None
        return OperatorSnapshot(operator=self.reader.snapshot())

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()

    abort = close


class SinkOperator(StreamOperator):
    """Writes records between barriers as one transaction; commits on checkpoint complete."""

    def __init__(self, uid: str, name: str, sink: Sink) -> None:
        super().__init__(uid, name)
        self.sink = sink
        self.writer: SinkWriter | None = None

    def initialize_state(self, restored: RestoredState | None) -> None:
        context = self.context
        assert context is not None
        self.writer = self.sink.create_writer(
            SinkContext(
                operator_uid=self.uid,
                subtask_index=context.subtask_index,
                parallelism=context.parallelism,
                attempt=context.attempt,
                deployment_id=context.deployment_id,
            )
        )
        mine = [
            state
            for old_index, state in (restored.operator if restored else ())
            if old_index % context.parallelism == context.subtask_index and state is not None
        ]
        self.writer.restore(mine)

    def process_batch(self, batch: list[Any]) -> list[Any]:
        assert self.writer is not None
        self.writer.write_batch(batch)
        return []

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        assert self.writer is not None
        self.writer.pre_commit(checkpoint_id)
        return OperatorSnapshot(operator=self.writer.snapshot_state())

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        assert self.writer is not None
        self.writer.commit(checkpoint_id)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
