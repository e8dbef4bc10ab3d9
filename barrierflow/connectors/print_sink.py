"""`PrintSink`: every record printed to standard output, as PyFlink's `print()` does."""

from __future__ import annotations

import sys
from typing import Any

from barrierflow.connectors.base import AtOnceSinkWriter, Sink, SinkContext
from barrierflow.core.record_text import record_text
from barrierflow.core.typeinfo import TypeInformation

__all__ = [
    "PrintSink",
    "PrintSinkWriter",
]


class PrintSink(Sink):
    """Prints each record as `identifier:subtask> record`; for debugging.

    At-least-once only: lines are printed as records arrive, not at checkpoints, so after a
    failure the records replayed since the last checkpoint are printed again. The prefix
    follows Flink: the subtask number (from 1) appears only when the parallelism is above 1,
    and `> ` only when there is a prefix.

    >>> from barrierflow.connectors.base import SinkContext
    >>> writer = PrintSink("out").create_writer(SinkContext("print", 1, 2, 0, "run1-0"))
    >>> writer.write_batch([("a", 1), "b"])
    out:2> ('a', 1)
    out:2> b
    >>> PrintSink().create_writer(SinkContext("print", 0, 1, 0, "run1-0")).write_batch([3])
    3
    """

    def __init__(
        self, sink_identifier: str | None = None, type_info: TypeInformation | None = None
    ) -> None:
        self.sink_identifier = sink_identifier
        self.type_info = type_info
        """The stream's declared type: records print as Flink prints it (`+I[a,1]`)."""

    def create_writer(self, context: SinkContext) -> PrintSinkWriter:
        prefix = self.sink_identifier or ""
        if context.parallelism > 1:
            prefix += f"{':' if prefix else ''}{context.subtask_index + 1}"
        return PrintSinkWriter(f"{prefix}> " if prefix else "", self.type_info)


class PrintSinkWriter(AtOnceSinkWriter):
    """Writes to `sys.stdout` (looked up at every write). Mailbox thread only."""

    def __init__(self, prefix: str, type_info: TypeInformation | None = None) -> None:
        self._prefix = prefix
        self._type_info = type_info

    def write_batch(self, records: list[Any]) -> None:
        if records:
            prefix = self._prefix
            if self._type_info is None:
                sys.stdout.write("".join(f"{prefix}{record}\n" for record in records))
            else:
                text, type_info = record_text, self._type_info
                sys.stdout.write("".join(f"{prefix}{text(r, type_info)}\n" for r in records))

    def pre_commit(self, checkpoint_id: int) -> None:
        sys.stdout.flush()

    def close(self) -> None:
        sys.stdout.flush()
