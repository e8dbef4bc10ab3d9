"""Dead letters of user functions: a record its function raises on leaves on `DEAD_LETTERS`.

With `.with_dead_letters()` on a map, flat_map, filter, process or reduce, a record for
which the user function raises becomes a `DeadLetter` (the operator's name, the method, the
record, the error) on the operator's `DEAD_LETTERS` side output, after the batch's other
outputs, instead of failing the task; the rest of the batch goes on. The letter is an
ordinary output of the operator, so it is emitted exactly once like any record.

Without the option the operators keep their loops as they are. With it, each operator runs
its loop inside one `try` over a shared iterator: an exception ends the loop at the failing
record, whose index the iterator tells (`length_hint`), and the loop resumes with the next
record of the same iterator. No record is processed twice (a stateful function sees each
record once), and Python 3.11's exception handling costs nothing while no record fails.
What a function changed before it raised (keyed state it updated, timers it registered)
stays; its outputs of the failing record are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import length_hint
from typing import Any

from barrierflow.connectors.base import DEAD_LETTERS, DeadLetter
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.operators.base import Output
from barrierflow.runtime.operators.emitter import Emitter

__all__ = ["DEAD_LETTERS", "emit_guarded", "failed_index", "send_dead_letters", "without"]


def failed_index(size: int, iterator: Any) -> int:
    """The index of the record a loop over `iterator` (of a list of `size`) raised on."""
    return size - length_hint(iterator) - 1


def send_dead_letters(
    output: Output,
    operator: str,
    function: str,
    values: Sequence[Any],
    timestamps: Sequence[int] | None,
    failed: list[tuple[int, BaseException]],
) -> None:
    """The `failed` records (index in `values`, error) as dead letters on `DEAD_LETTERS`,
    each with its record's timestamp."""
    letters = [DeadLetter.of_function(operator, function, values[i], e) for i, e in failed]
    stamps = None if timestamps is None else [timestamps[i] for i, _ in failed]
    output.collect_side(DEAD_LETTERS.tag_id, RecordBatch(letters, stamps))


def without(timestamps: Sequence[int] | None, failed: list[tuple[int, BaseException]]) -> Any:
    """`timestamps` without those of the failed records (None stays None)."""
    if timestamps is None:
        return None
    skip = {i for i, _ in failed}
    return [t for i, t in enumerate(timestamps) if i not in skip]


def emit_guarded(
    output: Output,
    operator: str,
    batch: RecordBatch,
    emitter: Emitter,
    call: Callable[[Any, int | None], None],
) -> None:
    """`call(record, timestamp)` for each record of `batch`, which adds its outputs to
    `emitter`; a record it raises on goes to `DEAD_LETTERS` (as the `process_element` of
    `operator`) and its outputs are dropped. The process operators' guarded loop, keyed or
    not."""
    values = batch.values
    timestamps = batch.timestamps or [NO_TIMESTAMP] * len(values)
    failed: list[tuple[int, BaseException]] = []
    records = iter(values)
    pairs = zip(records, timestamps, strict=True)
    main, side_buffers, before, sides = emitter.main_values, emitter.side_buffers, 0, None
    while True:
        try:
            for value, timestamp in pairs:
                before = len(main)
                sides = emitter.side_lengths() if side_buffers else None
                call(value, None if timestamp == NO_TIMESTAMP else timestamp)
            break
        except Exception as error:
            emitter.drop_since(before, sides)
            failed.append((failed_index(len(values), records), error))
    emitter.flush()
    if failed:
        send_dead_letters(output, operator, "process_element", values, batch.timestamps, failed)
