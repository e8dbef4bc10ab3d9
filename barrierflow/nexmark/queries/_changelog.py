"""Changelog rows for the updating queries, and an aggregate that emits them in mini-batches.

An updating query's output is Flink's changelog: `+I` adds a row, `-U` takes back the row
an update replaces and `+U` adds its replacement, `-D` takes a row back for good. Taken as
a multiset (each `+` adds one, each `-` removes one) the rows are the query's result.

`changes` and `rank_changes` turn a key's old result into its new one and emit nothing
when it did not change; `MiniBatchAggregate` folds a key's records into an accumulator and
emits the change of its row once per watermark, like flink-nexmark's mini-batch setting
(`table.exec.mini-batch.enabled`): the net result is the same, the changelog far shorter.

>>> changes(("k", "n"), None, ("a", 1))
[{'op': '+I', 'k': 'a', 'n': 1}]
>>> changes(("k", "n"), ("a", 1), ("a", 2))
[{'op': '-U', 'k': 'a', 'n': 1}, {'op': '+U', 'k': 'a', 'n': 2}]
>>> changes(("k", "n"), ("a", 2), ("a", 2))
[]
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from barrierflow.functions import KeyedProcessFunction
from barrierflow.state import ValueStateDescriptor

__all__ = [
    "DELETE",
    "INSERT",
    "UPDATE_AFTER",
    "UPDATE_BEFORE",
    "MiniBatchAggregate",
    "changes",
    "rank_changes",
]

INSERT = "+I"
"""A row added."""
UPDATE_BEFORE = "-U"
"""The row an update takes back."""
UPDATE_AFTER = "+U"
"""The row an update puts in its place."""
DELETE = "-D"
"""A row taken back for good."""

Row = tuple[Any, ...]
"""A result row's values, in the query's column order."""


def _row(op: str, columns: Sequence[str], values: Row) -> dict[str, Any]:
    row = {"op": op}
    row.update(zip(columns, values, strict=True))
    return row


def changes(columns: Sequence[str], before: Row | None, after: Row | None) -> list[dict]:
    """The changelog rows turning a key's result `before` into `after` (None: no row).

    Nothing when they are equal; `+I` for a first row, `-D` for a row that goes away,
    else a `-U`/`+U` pair.

    >>> changes(("k",), ("a",), None)
    [{'op': '-D', 'k': 'a'}]
    """
    if before == after:
        return []
    if before is None:
        return [_row(INSERT, columns, after)]  # type: ignore[arg-type]
    if after is None:
        return [_row(DELETE, columns, before)]
    return [_row(UPDATE_BEFORE, columns, before), _row(UPDATE_AFTER, columns, after)]


def rank_changes(columns: Sequence[str], before: Sequence[Row], after: Sequence[Row]) -> list:
    """The changelog rows turning a top-N list `before` into `after`, rank by rank.

    Each row gets its rank (1 for the first) as its last column, as Flink's ROW_NUMBER
    output does: a rank whose row changed is a `-U`/`+U` pair, a new rank is a `+I`, a
    rank that went away a `-D`; ranks whose row stayed emit nothing.

    >>> for row in rank_changes(("bid", "rank"), [("b",), ("c",)], [("a",), ("b",), ("c",)]):
    ...     print(row)
    {'op': '-U', 'bid': 'b', 'rank': 1}
    {'op': '+U', 'bid': 'a', 'rank': 1}
    {'op': '-U', 'bid': 'c', 'rank': 2}
    {'op': '+U', 'bid': 'b', 'rank': 2}
    {'op': '+I', 'bid': 'c', 'rank': 3}
    """
    out: list[dict] = []
    for index in range(max(len(before), len(after))):
        old = (*before[index], index + 1) if index < len(before) else None
        new = (*after[index], index + 1) if index < len(after) else None
        out.extend(changes(columns, old, new))
    return out


class MiniBatchAggregate(KeyedProcessFunction):
    """A group aggregate that emits the change of each key's row at the next watermark.

    Exact: every record is folded in, and the last watermark (the end of input's) emits
    whatever changed since the one before, so the changelog adds up to the aggregate
    over all records. A key's row is emitted only if it differs from the one emitted
    last. Subclasses say how to fold (`create_accumulator`, `add`) and what the row is
    (`result`). Keyed state: the accumulator, the row emitted last, and whether the key
    waits for a watermark (its timer is registered once, not per record).
    """

    columns: Sequence[str]
    """The output columns, in the order `result` gives the row's values."""

    def open(self, runtime_context: Any) -> None:
        self.accumulator = runtime_context.get_state(ValueStateDescriptor("accumulator"))
        self.emitted = runtime_context.get_state(ValueStateDescriptor("emitted"))
        self.flush_pending = runtime_context.get_state(ValueStateDescriptor("flush-pending"))

    @abstractmethod
    def create_accumulator(self) -> Any:
        """A key's accumulator before its first record."""

    @abstractmethod
    def add(self, accumulator: Any, value: Any) -> None:
        """Fold `value` into `accumulator` (in place)."""

    @abstractmethod
    def result(self, key: Any, accumulator: Any) -> Any:
        """The key's result as it stands: a row, or what `changelog` compares."""

    def changelog(self, before: Any, after: Any) -> list:
        """The rows turning the result emitted last (None at first) into `after`."""
        return changes(self.columns, before, after)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> None:
        accumulator = self.accumulator.value()
        if accumulator is None:
            accumulator = self.create_accumulator()
        self.add(accumulator, value)
        self.accumulator.update(accumulator)
        if not self.flush_pending.value():
            timers = ctx.timer_service()
            timers.register_event_time_timer(timers.current_watermark() + 1)
            self.flush_pending.update(True)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> list:
        self.flush_pending.clear()
        row = self.result(ctx.get_current_key(), self.accumulator.value())
        out = self.changelog(self.emitted.value(), row)
        if out:
            self.emitted.update(row)
        return out
