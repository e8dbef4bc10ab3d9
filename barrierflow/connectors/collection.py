"""`CollectionSource`: a list of values shipped with the job, read once in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from barrierflow.connectors.base import Source, SourceReader, SourceSplit, SplitBatch

__all__ = [
    "SPLIT_ID",
    "CollectionReader",
    "CollectionSource",
]

SPLIT_ID = "collection"
"""The id of the single split."""


class CollectionSource(Source):
    """Emits every value of `values` exactly once, in order, from one subtask.

    Exactly-once because its position (the next index) is checkpointed; assumes the list
    is the same in every run. There is one split, so the source reads at parallelism 1
    whatever the job's parallelism (the other subtasks end at once). Bounded.

    >>> source = CollectionSource(["a", "b", "c"])
    >>> reader = source.create_reader(source.create_splits())
    >>> reader.restore({"collection": 1})
    >>> reader.poll_batch(10), reader.poll_batch(10)
    (['b', 'c'], None)
    """

    bounded = True

    def __init__(self, values: list[Any]) -> None:
        self.values = list(values)

    def create_splits(self) -> list[SourceSplit]:
        return [SourceSplit(SPLIT_ID)]

    def create_reader(self, splits: Sequence[SourceSplit]) -> CollectionReader:
        return CollectionReader(self.values, has_split=any(s.split_id == SPLIT_ID for s in splits))


class CollectionReader(SourceReader):
    """Reads the list from its position on. Mailbox thread only."""

    def __init__(self, values: list[Any], has_split: bool = True) -> None:
        self._values = values
        self._has_split = has_split
        self._position = 0

    def restore(self, positions: dict[str, Any]) -> None:
        if self._has_split and SPLIT_ID in positions:
            self._position = int(positions[SPLIT_ID])

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if not self._has_split or self._position >= len(self._values):
            return None
        batch = self._values[self._position : self._position + max_records]
        self._position += len(batch)
        return batch

    def snapshot(self) -> dict[str, Any]:
        return {SPLIT_ID: self._position} if self._has_split else {}

    def split_ids(self) -> list[str]:
        return [SPLIT_ID] if self._has_split else []

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        if not self._has_split:
            return None
        batch = self.poll_batch(max_records)
        if batch is None:
            return None
        return SplitBatch(SPLIT_ID, batch, finished=self._position >= len(self._values))
