"""`OutputTag`: names a side output of an operator (PyFlink's `pyflink.datastream.OutputTag`)."""

from __future__ import annotations

from typing import Any


class OutputTag:
    """A named side output. Tags are equal when their ids are.

    A process function emits to it with `ctx.output(tag, value)` (or by yielding
    `(tag, value)`, as in PyFlink), and `stream.get_side_output(tag)` is the stream
    of those values.

    >>> late = OutputTag("late-data")
    >>> late == OutputTag("late-data"), late.tag_id
    (True, 'late-data')
    """

    def __init__(self, tag_id: str, type_info: Any = None) -> None:
        if not isinstance(tag_id, str) or not tag_id:
            raise ValueError(f"an OutputTag needs a non-empty string id, got {tag_id!r}")
        self.tag_id = tag_id
        self.type_info = type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"
