"""The driver every harness shares: one real operator, set up as a task sets it up, fed one
element at a time on the caller's thread, with a manual clock and an in-memory output.

The harness adds no operator logic of its own: it builds the operator class a job runs
(`runtime/operators/`), hands it `RecordBatch`es of one record, watermarks, and processing
time when its `next_wakeup()` is due, exactly as `StreamTask` does, and snapshots and
restores it through `snapshot_state` / `initialize_state`. What the operator emits lands in
a `CollectingOutput`.
"""

from __future__ import annotations

import os
import site
import sys
import traceback
from collections.abc import Callable
from typing import Any, Self

from barrierflow._clock import Clock, ManualClock
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.state_backends import HashMapStateBackend, StateBackend
from barrierflow.errors import BarrierflowError, ConfigurationError, UserFunctionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.base import OperatorContext, StreamOperator, restore_operator
from barrierflow.runtime.timers import timer_section
from barrierflow.state.backend import canonical_section
from barrierflow.state.key_groups import DEFAULT_MAX_PARALLELISM, key_group_range_for_subtask
from barrierflow.state.operator_state import decode_operator_state, encode_operator_state
from barrierflow.testing._snapshot import HarnessSnapshot, SubtaskState

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""barrierflow/: frames below it are the engine's, others the user's."""
_INTERPRETER_DIRS = tuple(
    os.path.abspath(folder) + os.sep
    for folder in {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages()}
)
"""Where the standard library and installed packages live: a frame there is rarely the
user's own line (pyarrow raising inside the user's call names the call instead)."""


class OperatorHarness:
    """Drives one operator of one subtask (see the subclasses for the functions they run).

    `parallelism` / `subtask_index` say which subtask this is: a keyed harness owns that
    subtask's key groups only, as in a job. `restore_from` is a `HarnessSnapshot` (of any
    parallelism) to start from, as a job restores a checkpoint. `state_backend` is
    `HashMapStateBackend()` (default) or `EmbeddedRocksDBStateBackend()`. Processing time
    starts at `processing_time` ms and moves only through `set_processing_time` /
    `advance_processing_time` (or `clock`, any `Clock` you move yourself).
    """

    def __init__(
        self,
        operator: StreamOperator,
        function: Any,
        *,
        parallelism: int = 1,
        subtask_index: int = 0,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
        state_backend: StateBackend | None = None,
        restore_from: HarnessSnapshot | None = None,
        processing_time: int = 0,
        clock: Clock | None = None,
    ) -> None:
        self.operator = operator
        """The runtime operator under test (internal API: for the project's own tests)."""
        self.function = function
        self.clock: Clock = clock or ManualClock(processing_time)
        self.output = CollectingOutput()
        """Everything emitted since the last `take_output` / `clear_output`, as tuples."""
        self._checkpoint_id = 0
        self._closed = False
        self.context = OperatorContext(
            subtask_index=subtask_index,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            key_group_range=key_group_range_for_subtask(
                max_parallelism, parallelism, subtask_index
            ),
            attempt=0,
            deployment_id="harness",
            processing_time=self.clock.epoch_millis,
            clock=self.clock,
            state_backend=state_backend or HashMapStateBackend(),
        )
        restored = None
        if restore_from is not None:
            if not isinstance(restore_from, HarnessSnapshot):
                raise ConfigurationError(
                    f"restore_from needs a HarnessSnapshot (harness.snapshot()), "
                    f"got {restore_from!r:.200}"
                )
            restored = restore_from.restored_state(max_parallelism, parallelism, subtask_index)
            self._checkpoint_id = restore_from.checkpoint_id
        operator.setup(self.context, self.output)
        self._guarded("initialize_state", lambda: restore_operator(operator, restored))
        self._guarded("open", operator.open)

    # ---- time ---------------------------------------------------------------------------

    def get_processing_time(self) -> int:
        """The operator's processing time now (ms)."""
        return self.clock.epoch_millis()

    def set_processing_time(self, time_ms: int) -> None:
        """Move processing time to `time_ms` and fire the processing-time timers now due, as
        a task's mailbox loop does. Processing time never goes back."""
        now = self.get_processing_time()
        if time_ms < now:
            raise ConfigurationError(
                f"processing time does not go back: it is {now} ms, asked for {time_ms} ms"
            )
        self.advance_processing_time(time_ms - now)

    def advance_processing_time(self, millis: int) -> None:
        """Move processing time `millis` ms ahead and fire what is due."""
        if millis < 0:
            raise ConfigurationError(f"processing time does not go back ({millis} ms)")
        advance = getattr(self.clock, "advance", None)
        if advance is None:
            raise ConfigurationError(
                f"the harness' clock {self.clock!r} cannot be moved: pass a ManualClock"
            )
        advance(millis)
        self.fire_due_processing_timers()

    def fire_due_processing_timers(self) -> None:
        """Call the operator at its wake-up if that is due (the clock moved by itself)."""
        self._check_open()
        now = self.get_processing_time()
        due = self.operator.next_wakeup()
        if due is not None and due <= now:
            self._guarded(
                f"a processing-time timer at {now} ms",
                lambda: self.operator.on_processing_time(now),
            )

    def process_watermark(self, timestamp: int) -> None:
        """Event time reached `timestamp`: fires the event-time timers it passes, then the
        watermark is emitted."""
        self._check_open()
        self._guarded(
            f"the watermark {timestamp}",
            lambda: self.operator.process_watermark(Watermark(timestamp)),
        )

    # ---- output -------------------------------------------------------------------------

    def get_output(self) -> list[tuple[Any, ...]]:
        """Everything emitted since the last take or clear, in order, as tuples:
        ("record", value, timestamp or None), ("side", tag id, value, timestamp or None),
        ("watermark", timestamp)."""
        return list(self.output.events)

    def take_output(self) -> list[tuple[Any, ...]]:
        """`get_output()`, then forget it."""
        return self.output.take()

    def clear_output(self) -> None:
        """Forget everything emitted so far."""
        self.output.take()

    def extract_output_values(self) -> list[Any]:
        """The main output's values since the last take or clear."""
        return self.output.records()

    def extract_output_records(self) -> list[tuple[Any, int | None]]:
        """The main output as (value, timestamp or None) pairs."""
        return [(e[1], e[2]) for e in self.output.events if e[0] == "record"]

    def get_side_output(self, tag: OutputTag | str) -> list[Any]:
        """The values emitted to side output `tag` (an OutputTag or its tag id)."""
        tag_id = tag.tag_id if isinstance(tag, OutputTag) else tag
        return [e[2] for e in self.output.events if e[0] == "side" and e[1] == tag_id]

    def get_side_output_records(self, tag: OutputTag | str) -> list[tuple[Any, int | None]]:
        """Side output `tag` as (value, timestamp or None) pairs."""
        tag_id = tag.tag_id if isinstance(tag, OutputTag) else tag
        return [(e[2], e[3]) for e in self.output.events if e[0] == "side" and e[1] == tag_id]

    def get_watermarks(self) -> list[int]:
        """The watermarks emitted since the last take or clear."""
        return [e[1] for e in self.output.events if e[0] == "watermark"]

    # ---- snapshot and close -------------------------------------------------------------

    def snapshot(self) -> HarnessSnapshot:
        """This subtask's state as a checkpoint would hold it (keyed state per key group,
        timers, operator list state), in the savepoint format every backend restores.
        Combine the snapshots of all subtasks with `HarnessSnapshot.combine` to restore at
        another parallelism."""
        self._check_open()
        self._checkpoint_id += 1
        checkpoint_id = self._checkpoint_id
        taken = self._guarded("snapshot_state", lambda: self.operator.snapshot_state(checkpoint_id))
        keyed = timers = operator_state = None
        if taken is not None:
            keyed = None if taken.keyed is None else canonical_section(taken.keyed)
            timers = timer_section(taken.timers)
            if taken.operator is not None:  # as a checkpoint file holds it
                operator_state = decode_operator_state(encode_operator_state(taken.operator))
        self.operator.notify_checkpoint_complete(checkpoint_id)
        state = SubtaskState(
            self.context.subtask_index, self.context.key_group_range, keyed, timers,
            operator_state,
        )  # fmt: skip
        return HarnessSnapshot(
            self.context.max_parallelism, self.context.parallelism, (state,), checkpoint_id
        )

    def close(self) -> None:
        """End the operator normally (its function's `close`, the backend freed); once."""
        if self._closed:
            return
        self._closed = True
        self._guarded("close", self.operator.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._closed = True
            self.operator.abort()

    # ---- driving ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError("the harness is closed: make a new one (restore_from=...)")

    def _push(self, call: Callable[[RecordBatch], None], value: Any, timestamp: int | None,
              what: str) -> None:  # fmt: skip
        """Hand one record to `call` (a process_batch method)."""
        self._check_open()
        if timestamp is not None and not isinstance(timestamp, int):
            raise ConfigurationError(f"a timestamp is int milliseconds, got {timestamp!r:.100}")
        batch = RecordBatch([value], None if timestamp is None else [timestamp])
        where = f"{what} {value!r:.200}" + ("" if timestamp is None else f" at {timestamp}")
        self._guarded(where, lambda: call(batch))

    def _guarded(self, where: str, call: Callable[[], Any]) -> Any:
        """Run `call`; an exception from the user's code comes back as UserFunctionError
        naming the call and the line that raised (the original is its cause)."""
        try:
            return call()
        except UserFunctionError:
            raise
        except BarrierflowError as error:  # the engine's own, unless user code raised it
            if _raised_in_user_code(error) is None:
                raise
            raise self._user_error(where, error) from error
        except Exception as error:
            raise self._user_error(where, error) from error

    def _user_error(self, where: str, error: BaseException) -> UserFunctionError:
        frame = _raised_in_user_code(error)
        at = "" if frame is None else f" ({frame})"
        name = type(self.function).__name__
        return UserFunctionError(
            f"{name} raised {type(error).__name__}: {error} while handling {where}{at}"
        )


class TwoInputs:
    """The watermarks of a two-input harness: each input's own, combined by the operator
    (event time is their minimum); `process_watermark` advances both."""

    operator: Any
    _check_open: Callable[[], None]
    _guarded: Callable[[str, Callable[[], Any]], Any]

    def process_watermark1(self, timestamp: int) -> None:
        """The first input's watermark reached `timestamp`."""
        self._check_open()
        self._guarded(
            f"the first input's watermark {timestamp}",
            lambda: self.operator.process_watermark1(Watermark(timestamp)),
        )

    def process_watermark2(self, timestamp: int) -> None:
        """The second input's watermark reached `timestamp`."""
        self._check_open()
        self._guarded(
            f"the second input's watermark {timestamp}",
            lambda: self.operator.process_watermark2(Watermark(timestamp)),
        )

    def process_watermark(self, timestamp: int) -> None:
        """Both inputs' watermarks reached `timestamp`."""
        self.process_watermark1(timestamp)
        self.process_watermark2(timestamp)


def _raised_in_user_code(error: BaseException) -> str | None:
    """'file:line in function' of the innermost frame of the user's code: outside barrierflow
    and, when there is such a frame, outside the interpreter's own folders (the standard
    library, installed packages); None if every frame is barrierflow's."""
    outside, user = None, None
    for frame in traceback.extract_tb(error.__traceback__):
        path = os.path.abspath(frame.filename)
        if path.startswith(_PACKAGE_DIR + os.sep):
            continue
        outside = f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"
        if not path.startswith(_INTERPRETER_DIRS):
            user = outside
    return user or outside
