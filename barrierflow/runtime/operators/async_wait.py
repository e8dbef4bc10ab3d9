"""AsyncWaitOperator: `AsyncWaitLogic` with an `AsyncFunctionRunner` (runtime/async_io).

Mailbox thread only; it never waits. The runner hands each call's outcome to the task's
`MailboxExecutor` (`context.mailbox`), so a completion is a mail, run in order with the
task's checkpoint triggers, credit and cancellation. A completion emits what the element
queue lets out and moves held input into the queue. While input is held for lack of room
(at most the rest of one batch), and after the end of input (the maximum watermark) until
every call has completed, `accepts_input()` is False: the task then gives no input and
does not finish, but keeps running mails. `close()` is only valid once drained, or when a
completed checkpoint holds every element still held and nothing changed since its snapshot
(a stop with savepoint without drain: the task runs no outcome after the final snapshot).

Checkpoints hold the input of every element still held (in flight, completed but not
emitted, or waiting in the overflow), pickled in the operator state; a restore takes them
back as input, in their order, and calls them again as the queue has room, so the output
stays exactly-once. On rescaling, old subtask i's elements go to new subtask
i mod parallelism, without the watermarks held among them: a held watermark speaks for
its old subtask's input only, and a new subtask reads other splits, possibly behind it,
whose records it would make late downstream. The sources send watermarks again.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from barrierflow.errors import StateRestoreError
from barrierflow.runtime.async_io import AsyncFunctionRunner, AsyncWaitLogic
from barrierflow.runtime.async_io.wait_logic import decode_elements, encode_elements
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import StreamStatus, Watermark
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext

__all__ = ["AsyncWaitOperator"]

STATE_VERSION = 1
"""Schema of the operator state: {"version": 1, "elements": pickle of encode_elements(...)}."""


class AsyncWaitOperator(StreamOperator):
    """Calls an AsyncFunction for each record, with at most `capacity` elements in flight;
    `spec` is an `AsyncWaitSpec` (ordered or unordered)."""

    def __init__(self, uid: str, name: str, spec: Any) -> None:
        super().__init__(uid, name)
        self.spec = spec
        self._restored: list[Any] = []
        self._values: list[Any] = []
        self._stamps: list[int] = []
        self._stopped = False
        """Closed or aborted: outcome mails still queued in the task change nothing."""
        self._unchanged_since: int | None = None
        """The checkpoint whose snapshot holds what is held now (nothing in or out since)."""
        self._held_checkpointed = False
        """What is held now is in a completed checkpoint: closing undrained loses nothing."""
        self.logic: AsyncWaitLogic | None = None
        self.runner: AsyncFunctionRunner | None = None

    # ---- life cycle ----------------------------------------------------------------------

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            return
        assert self.context is not None
        parallelism = self.context.parallelism
        # Every old subtask stores its state, so there is one entry per old subtask.
        rescaled = len(restored.operator) != parallelism
        for old_index, state in sorted(restored.operator, key=lambda item: item[0]):
            if old_index % parallelism != self.context.subtask_index:
                continue
            if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
                raise StateRestoreError(f"{self.name}: unknown async I/O state {state!r:.200}")
            elements = decode_elements(pickle.loads(state["elements"]))
            if rescaled:
                elements = [e for e in elements if not isinstance(e, Watermark)]
            self._restored.extend(elements)

    def open(self) -> None:
        assert self.context is not None
        self.runner = AsyncFunctionRunner.for_spec(
            self.spec, self.context.mailbox, name=f"async-io {self.name}"
        )
        self.runner.start(TaskRuntimeContext(self.context, None, self.metric_group))
        self.logic = AsyncWaitLogic(self.spec.create_queue(), self._invoke, self)
        restored, self._restored = self._restored, []
        self.logic.restore_state(restored)  # held input: called as the queue has room
        self._flush()

    def close(self) -> None:
        """The job ended: valid only once drained (the task waits for `accepts_input()`)."""
        logic = self.logic
        if logic is not None and not logic.is_drained and not self._held_checkpointed:
            raise RuntimeError(
                f"{self.name}: closed with {logic.queue.size + logic.held} element(s) still "
                "held; the task must not finish while accepts_input() is False"
            )
        self._stop()

    def abort(self) -> None:
        self._stop()

    def _stop(self) -> None:
        self._stopped = True
        if self.runner is not None:
            self.runner.close()

    def accepts_input(self) -> bool:
        return self.logic is None or self.logic.accepts_input()

    # ---- input ---------------------------------------------------------------------------

    def process_batch(self, batch: RecordBatch) -> None:
        logic = self.logic
        assert logic is not None
        self._changed()
        timestamps = batch.timestamps or [NO_TIMESTAMP] * len(batch.values)
        for value, timestamp in zip(batch.values, timestamps, strict=True):
            logic.process_element(value, None if timestamp == NO_TIMESTAMP else timestamp)
        self._flush()

    def process_watermark(self, watermark: Watermark) -> None:
        logic = self.logic
        assert logic is not None
        self._changed()
        logic.process_watermark(watermark)  # the maximum one ends the input
        self._flush()

    def process_stream_status(self, status: StreamStatus) -> None:
        self._flush()
        self.output.emit_stream_status(status)

    # ---- checkpoints ---------------------------------------------------------------------

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        assert self.logic is not None
        self._flush()  # what left the queue goes out before the barrier
        elements = encode_elements(self.logic.snapshot_state())
        self._unchanged_since = checkpoint_id
        return OperatorSnapshot(
            operator={"version": STATE_VERSION, "elements": pickle.dumps(elements, protocol=5)}
        )

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if checkpoint_id == self._unchanged_since:
            self._held_checkpointed = True

    def _changed(self) -> None:
        self._unchanged_since, self._held_checkpointed = None, False

    # ---- completions (mails) and output --------------------------------------------------

    def _invoke(
        self,
        value: Any,
        on_complete: Callable[[list[Any]], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        """The logic's `invoke`: start the call; its outcome runs later as a mail."""
        runner = self.runner
        assert runner is not None
        runner.invoke(
            value,
            lambda results: self._on_outcome(on_complete, results),
            lambda error: self._on_outcome(on_error, error),
        )

    def _on_outcome(self, outcome: Callable[[Any], None], argument: Any) -> None:
        """A completion mail: hand the outcome to the logic, emit what it let out."""
        if self._stopped:
            return
        self._changed()
        outcome(argument)
        self._flush()

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
