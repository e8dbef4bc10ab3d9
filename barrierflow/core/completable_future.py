"""`CompletableFuture`: PyFlink's future (`cancel`, `cancelled`, `done`, `result`,
`exception`). barrierflow's futures, those `JobClient` returns among them, are
`concurrent.futures.Future`, which has each of those methods with the same meaning (and
`add_done_callback`), so the name is that class: `isinstance(client.cancel(),
CompletableFuture)` holds.

>>> from concurrent.futures import Future
>>> CompletableFuture is Future
True
"""

from __future__ import annotations

from concurrent.futures import Future as CompletableFuture

__all__ = ["CompletableFuture"]
