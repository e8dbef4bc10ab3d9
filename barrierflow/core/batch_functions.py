"""KeyedBatchFunction: a keyed step that takes a whole batch and its keys at once.

barrierflow's own (PyFlink has no batch API; named after `KeyedProcessFunction` and
`map_batches`). `KeyedStream.process_batches(fn)` calls `fn.process_batch(batch, keys,
ctx)` once per batch of records: `batch` is a `pyarrow.RecordBatch` when the records
are columnar (a source that reads Arrow, `map_batches`), else the list of the records;
`keys` the list of their keys, in row order. The function reads and writes the state of
all the keys in a few calls through batched handles from `open`'s runtime context
(`runtime_context.get_batch_state(ValueStateDescriptor(...))`: `get_many(keys)`,
`put_many(keys, values)`, `remove_many(keys)`; also list and map state, and a TTL on any
of them; `state/batched.py`) and registers timers for many keys in one call, so no Python
call per record goes through the state backend for value state (on RocksDB: one multi-get
and one write batch per call). State, timers, checkpoints and rescaling are those of every
keyed operator. The per-key handles (`get_state` & co.) work in `on_timer` only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from barrierflow.core.functions import Function, TimeDomain

__all__ = ["KeyedBatchFunction"]


class KeyedBatchFunction(Function, ABC):
    """Processes a keyed stream a batch at a time with batched keyed state and timers.

    `process_batch` returns its outputs: None, an iterable of records (no event time), or
    a `pyarrow.RecordBatch` / `Table` whose `_timestamp` column, if any, is the rows'
    event time (as with `map_batches`). `on_timer` runs per fired timer with the timer's
    key current (`ctx.get_current_key()`); its outputs carry the timer's timestamp for
    an event-time timer and none for a processing-time one (as `KeyedProcessFunction`).
    """

    class Context(ABC):
        """What `process_batch` is given beside the batch and its keys."""

        @abstractmethod
        def timestamps(self) -> Sequence[int] | None:
            """Each row's event timestamp (`NO_TIMESTAMP` where a row has none), or None."""

        @abstractmethod
        def current_processing_time(self) -> int:
            """The task's processing time, epoch ms."""

        @abstractmethod
        def current_watermark(self) -> int:
            """The operator's current watermark."""

        @abstractmethod
        def register_processing_time_timers(self, keys: Sequence[Any], timestamp: int) -> None:
            """A processing-time timer at `timestamp` for each of `keys` (one per key)."""

        @abstractmethod
        def register_event_time_timers(self, keys: Sequence[Any], timestamp: int) -> None:
            """An event-time timer at `timestamp` for each of `keys` (one per key)."""

    class OnTimerContext(ABC):
        """What `on_timer` is given."""

        @abstractmethod
        def get_current_key(self) -> Any:
            """The key of the timer that fired."""

        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """Whether an event-time or a processing-time timer fired."""

        @abstractmethod
        def current_processing_time(self) -> int:
            """The task's processing time, epoch ms."""

    @abstractmethod
    def process_batch(self, batch: Any, keys: list[Any], ctx: Context) -> Any:
        """Process one batch: `batch` (Arrow or a list of records) and its keys, row by row."""

    def on_timer(self, timestamp: int, ctx: OnTimerContext) -> Any:
        """A timer registered through `ctx` fired (default: nothing)."""
        return None
