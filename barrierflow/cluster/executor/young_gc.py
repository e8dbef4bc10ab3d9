"""The cyclic garbage collector's young-generation threshold in a stream task's process.

CPython starts a young collection whenever the container objects allocated since the
last one, net of those freed, pass the threshold (700 by default). A stream task
decodes each input batch into a list of tuples at once, so the count passes 700 within
nearly every batch, and each collection walks every container made since the last
that is still alive: above all the state values the records just wrote (a keyed count
stores a new tuple per record). Most of them are tuples of atomic values, which the
walk then stops tracking, so every state value is walked about once for nothing: up
to a tenth of a keyed task's time at 1 M keys here, and more with checkpoints, whose
held snapshots keep old values alive.

A task replaces state values one for one and drops each batch whole, so its net count
barely moves: with a threshold above a batch's transient objects, young collections
run only when containers really pile up (new keys, held snapshots, cyclic garbage). The
price: up to 100 000 unreachable containers in cycles may wait for a collection, where
CPython's default lets 700 wait. The heap backend raises the threshold further while a
snapshot is held (`state/heap_backend.py`, `GC_WHILE_HELD`).
"""

from __future__ import annotations

import gc

TASK_YOUNG_THRESHOLD = 100_000
"""Young-generation threshold of a stream task's process (CPython's default: 700)."""


def raise_young_threshold(threshold: int = TASK_YOUNG_THRESHOLD) -> None:
    """Raise this process's young-generation threshold to `threshold`; a higher one, or a
    collector disabled (threshold 0), is left alone."""
    young, *older = gc.get_threshold()
    if 0 < young < threshold:
        gc.set_threshold(threshold, *older)
