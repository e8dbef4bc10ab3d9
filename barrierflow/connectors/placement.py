"""Where the sinks of the job being built write, and how fast its generator sources go.

A job file names its outputs and rates as written; a tool that runs the same file more
than once (`barrierflow chaos`: a failure-free run and a run with failures) needs each run
to write its own place without the file being edited. That tool installs a `Placement`
around the building of its job (`placed`), and connectors ask the one in force through
their contracts (`Sink.output_location`, `Sink.output_table`, `Source.pace`) or `placement()`.
The connectors know only this contract: what a placement does (rebasing, table suffixes,
dropped pace) is the installing tool's (chaos/run_placement.py). Outside `placed` the
placement is `AS_WRITTEN`.

The placement belongs to the run that builds a job, not to the process: `placed` sets it in
the current `contextvars` context (the building thread, or asyncio task), and connectors
resolve it when they are constructed, so each job carries its own resolved paths, tables and
rates in its graph. Two jobs built at the same time on two threads, one under a placement
and one without, or under two placements, never see each other's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Protocol

__all__ = ["AS_WRITTEN", "AsWritten", "Placement", "placed", "placement"]


class Placement(Protocol):
    """How the job being built differs from its file as written."""

    def location(self, path: str) -> str:
        """Where a sink writes the file path or URI `path`."""
        ...

    def table(self, table: str) -> str:
        """Which database table a sink writes for `table`."""
        ...

    def pace(self, records_per_second: float | None) -> float | None:
        """A generator source's rate (None: unpaced)."""
        ...

    @property
    def keeps_tables(self) -> bool:
        """Whether the run goes on with an earlier process's run (its driver was killed): a
        sink keeps what that run committed instead of starting from an empty table."""
        ...


class AsWritten:
    """The job as its file wrote it: every path, table and rate unchanged."""

    def location(self, path: str) -> str:
        return path

    def table(self, table: str) -> str:
        return table

    def pace(self, records_per_second: float | None) -> float | None:
        return records_per_second

    @property
    def keeps_tables(self) -> bool:
        return False


AS_WRITTEN = AsWritten()

_installed: contextvars.ContextVar[Placement | None] = contextvars.ContextVar(
    "barrierflow_placement", default=None
)
"""The placement `placed` installed in this context, None outside it. A job file builds its
sinks and sources on the thread that runs it, so that thread's context is the job's run; a
thread started elsewhere starts without one (`AS_WRITTEN`)."""


def placement() -> Placement:
    """The placement in force for the job being built in this context."""
    installed = _installed.get()
    return AS_WRITTEN if installed is None else installed


@contextlib.contextmanager
def placed(run: Placement) -> Iterator[None]:
    """Jobs built inside the block, in this context, take their outputs and rates from
    `run`; a job built meanwhile on another thread keeps its own placement."""
    installed = _installed.get()
    if installed is not None:
        raise RuntimeError(f"a placement is already in force: {installed!r}")
    token = _installed.set(run)
    try:
        yield
    finally:
        _installed.reset(token)
