"""AsyncWaitOperator: `AsyncWaitLogic` with an `AsyncFunctionRunner` (runtime/async_io).

Mailbox thread only, except `_completions.put`, which the runner's loop thread calls.
The runner posts each call's outcome into the operator's own thread-safe queue; the
operator runs those completions before each batch and watermark, whenever the task
asks for a wake-up (`next_wakeup()` is 1 ms ahead while calls are in flight), and,
while the element queue is full, it blocks on that queue (backpressure). The maximum
watermark (end of input) drains every call before it is passed on, so nothing is
left in flight when the task finishes.

Checkpoints hold the input of every element still in the element queue (pickled, in
the operator state); a restore calls those records again in their order, so the
output stays exactly-once. On rescaling, old subtask i's elements go to new subtask
i mod parallelism.
"""

from __future__ import annotations

import pickle
import queue
from typing import Any

from barrierflow.errors import StateRestoreError
from barrierflow.runtime.async_io import AsyncFunctionRunner, AsyncWaitLogic
from barrierflow.runtime.async_io.wait_logic import decode_elements, encode_elements
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext

__all__ = ["AsyncWaitOperator"]

STATE_VERSION = 1
"""Schema of the operator state: {"version": 1, "elements": pickle of encode_elements(...)}."""

_WAIT_FOR_COMPLETION_S = 300.0
"""How long a full queue waits for one completion before the task fails."""


class AsyncWaitOperator(StreamOperator):
    """Calls an AsyncFunction for each record, with at most `capacity` elements in flight;
    `spec` is an `AsyncWaitSpec` (ordered or unordered)."""

    def __init__(self, uid: str, name: str, spec: Any) -> None:
        super().__init__(uid, name)
        self.spec = spec
        self._restored: list[Any] = []
        self._values: list[Any] = []
        self._stamps: list[int] = []
        self._completions: queue.SimpleQueue = queue.SimpleQueue()
        self.logic: AsyncWaitLogic | None = None
        self.runner: AsyncFunctionRunner | None = None

    # ---- life cycle ----------------------------------------------------------------------

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            return
        assert self.context is not None
        for old_index, state in sorted(restored.operator, key=lambda item: item[0]):
            if old_index % self.context.parallelism != self.context.subtask_index:
                continue
            if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
                raise StateRestoreError(f"{self.name}: unknown async I/O state {state!r:.200}")
            self._restored.extend(decode_elements(pickle.loads(state["elements"])))

    def open(self) -> None:
        self.runner = AsyncFunctionRunner.for_spec(
            self.spec, self._completions.put, name=f"async-io {self.name}"
        )
        self.runner.start(TaskRuntimeContext(self.context, None))
        self.logic = AsyncWaitLogic(self.spec.create_queue(), self.runner.invoke, self)
        restored, self._restored = self._restored, []
        self.logic.restore_state(restored, self._wait_for_completion)
        self._flush()

    def close(self) -> None:
        if self.logic is not None:
            self.logic.finish(self._wait_for_completion)
            self._flush()
        if self.runner is not None:
            self.runner.close()

    def abort(self) -> None:
        if self.runner is not None:
            self.runner.close()

    # ---- input ---------------------------------------------------------------------------

    def process_batch(self, batch: RecordBatch) -> None:
        logic = self.logic
        assert logic is not None
        self._run_completions()
        wait = self._wait_for_completion
        timestamps = batch.timestamps or [NO_TIMESTAMP] * len(batch.values)
        for value, timestamp in zip(batch.values, timestamps, strict=True):
            logic.process_element(value, None if timestamp == NO_TIMESTAMP else timestamp, wait)
        self._flush()

    def process_watermark(self, watermark: Watermark) -> None:
        logic = self.logic
        assert logic is not None
        self._run_completions()
        if watermark.timestamp >= MAX_WATERMARK:
            logic.finish(self._wait_for_completion)  # end of input: nothing stays in flight
        logic.process_watermark(watermark, self._wait_for_completion)
        self._flush()

    def process_stream_status(self, status: StreamStatus) -> None:
        self._run_completions()
        self._flush()
        self.output.emit_stream_status(status)

    def next_wakeup(self) -> int | None:
        if self.logic is None or self.logic.queue.is_empty:
            return None
        assert self.context is not None
        return self.context.processing_time() + 1

    def on_processing_time(self, now_ms: int) -> None:
        self._run_completions()
        self._flush()

    # ---- checkpoints ---------------------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        assert self.logic is not None
        elements = encode_elements(self.logic.snapshot_state())
        return OperatorSnapshot(
            operator={"version": STATE_VERSION, "elements": pickle.dumps(elements, protocol=5)}
        )

    # ---- completions and output ----------------------------------------------------------

    def _run_completions(self) -> None:
        completions = self._completions
        while True:
            try:
                mail = completions.get_nowait()
            except queue.Empty:
                return
            mail()

    def _wait_for_completion(self) -> None:
        """The logic's `yield_to_mailbox`: run at least one completion, waiting for one."""
        try:
            mail = self._completions.get(timeout=_WAIT_FOR_COMPLETION_S)
        except queue.Empty:
            raise TimeoutError(
                f"{self.name}: no async call completed within {_WAIT_FOR_COMPLETION_S} s"
            ) from None
        mail()
        self._run_completions()

    def emit_results(self, results: tuple[Any, ...], timestamp: int | None) -> None:
        stamp = NO_TIMESTAMP if timestamp is None else timestamp
        self._values.extend(results)
        self._stamps.extend([stamp] * len(results))

    def emit_watermark(self, watermark: Watermark) -> None:
        self._flush()
        self.output.emit_watermark(watermark)

    def _flush(self) -> None:
        if self._values:
            stamps = self._stamps
            batch = RecordBatch(
                self._values, None if all(s == NO_TIMESTAMP for s in stamps) else stamps
            )
            self._values, self._stamps = [], []
            self.output.collect(batch)
