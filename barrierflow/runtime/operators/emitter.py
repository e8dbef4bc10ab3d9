"""Collects what a process function returns into batches for the main and side outputs.

Mailbox thread only. A process function returns or yields values; a `(OutputTag,
value)` pair goes to that side output (PyFlink's convention), and `ctx.output(tag,
value)` lands here too. `flush` hands one batch per output to the operator's output.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from barrierflow.core.output_tag import OutputTag
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.operators.base import Output


class _Buffer:
    __slots__ = ("stamps", "values")

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.stamps: list[int] | None = None

    def add(self, value: Any, timestamp: int | None) -> None:
        if timestamp is not None and self.stamps is None:
            self.stamps = [NO_TIMESTAMP] * len(self.values)
        self.values.append(value)
        if self.stamps is not None:
            self.stamps.append(NO_TIMESTAMP if timestamp is None else timestamp)

    def take(self) -> RecordBatch:
        batch = RecordBatch(self.values, self.stamps)
        self.values, self.stamps = [], None
        return batch


class Emitter:
    """Buffers a process function's outputs, each with the timestamp it should carry."""

    def __init__(self, output: Output) -> None:
        self._output = output
        self._main = _Buffer()
        self._sides: dict[str, _Buffer] = {}

    def add_all(self, produced: Iterable[Any], timestamp: int | None) -> None:
        main = self._main
        for item in produced:
            if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                self.add_side(item[0], item[1], timestamp)
            else:
                main.add(item, timestamp)

    def add_side(self, tag: Any, value: Any, timestamp: int | None) -> None:
        if not isinstance(tag, OutputTag):
            raise TypeError(f"a side output needs an OutputTag, got {tag!r}")
        buffer = self._sides.get(tag.tag_id)
        if buffer is None:
            buffer = self._sides[tag.tag_id] = _Buffer()
        buffer.add(value, timestamp)

    @property
    def main_values(self) -> list[Any]:
        """The main output's buffered values: the same list until the next `flush`."""
        return self._main.values

    @property
    def side_buffers(self) -> dict[str, Any]:
        """The side outputs' buffers by tag id: the same dict for the emitter's life (empty
        until a side output is used)."""
        return self._sides

    def side_lengths(self) -> dict[str, int]:
        """How many values each side output holds now (for `drop_since`)."""
        return {tag: len(buffer.values) for tag, buffer in self._sides.items()}

    def drop_since(self, main: int, sides: dict[str, int] | None) -> None:
        """Drop what was added since the main output held `main` values and the side outputs
        `sides` (None: none had any) (dead letters: the outputs of a record whose function
        raised)."""
        kept = sides or {}
        for buffer, keep in [(self._main, main)] + [
            (b, kept.get(tag, 0)) for tag, b in self._sides.items()
        ]:
            del buffer.values[keep:]
            if buffer.stamps is not None:
                del buffer.stamps[keep:]

    def flush(self) -> None:
        if self._main.values:
            self._output.collect(self._main.take())
        for tag_id, buffer in self._sides.items():
            if buffer.values:
                self._output.collect_side(tag_id, buffer.take())
