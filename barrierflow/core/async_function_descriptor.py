"""`AsyncFunctionDescriptor`: PyFlink's record of one async I/O step (the function, its
timeout, capacity, retry strategy and output mode), as `AsyncDataStream.ordered_wait` /
`unordered_wait` describe it. A plain value: barrierflow's `AsyncDataStream` builds its
operator from the same five things, and code that builds a descriptor itself gets them back.

>>> ordered = AsyncFunctionDescriptor.OutputMode.ORDERED
>>> descriptor = AsyncFunctionDescriptor(None, 1000, 10, None, ordered)
>>> descriptor.capacity, descriptor.output_mode.name
(10, 'ORDERED')
"""

from __future__ import annotations

import enum
from typing import Any


class AsyncFunctionDescriptor:
    """An async function with its timeout, capacity, retry strategy and output mode."""

    class OutputMode(enum.Enum):
        """Results in input order (ORDERED) or as they complete (UNORDERED)."""

        ORDERED = 0
        UNORDERED = 1

    def __init__(
        self,
        async_function: Any,
        timeout: Any,
        capacity: int,
        async_retry_strategy: Any,
        output_mode: AsyncFunctionDescriptor.OutputMode,
    ) -> None:
        self.async_function = async_function
        self.timeout = timeout
        self.capacity = capacity
        self.async_retry_strategy = async_retry_strategy
        self.output_mode = output_mode

    def __repr__(self) -> str:
        return (
            f"AsyncFunctionDescriptor({self.async_function!r}, timeout={self.timeout!r}, "
            f"capacity={self.capacity}, output_mode={self.output_mode.name})"
        )
