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
run only when containers really pile up (new keys, cyclic garbage), which keeps the
garbage a collection may leave waiting bounded by the threshold (100 000 objects, a
few tens of MB at most). The heap backend raises it further while a snapshot is held
(`state/heap_backend.py`, `GC_WHILE_HELD`).
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
