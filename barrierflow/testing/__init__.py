"""Test your functions in memory: each harness runs the operator a job runs, with its real
state backend and timer service, on your thread, without Spark, in milliseconds.

Push elements with timestamps, move the watermark and processing time (timers fire as in a
job), read the main and side outputs, the state of a key and its timers, and `snapshot()`
to restore into a new harness (`restore_from=`), also at another parallelism
(`HarnessSnapshot.combine`, `ParallelHarness`). A function that raises comes back as a
`UserFunctionError` naming the element or timer and the line. See docs/testing.md.

>>> from barrierflow.testing import MapFunctionHarness
>>> with MapFunctionHarness(lambda n: n * 10) as harness:
...     harness.process_element(4, 1000)
...     harness.extract_output_records()
[(40, 1000)]
"""

from __future__ import annotations

from barrierflow.errors import UserFunctionError
from barrierflow.testing._broadcast import (
    BroadcastProcessFunctionHarness,
    KeyedBroadcastProcessFunctionHarness,
)
from barrierflow.testing._functions import (
    CoProcessFunctionHarness,
    FilterFunctionHarness,
    FlatMapFunctionHarness,
    MapFunctionHarness,
    ProcessFunctionHarness,
)
from barrierflow.testing._harness import OperatorHarness
from barrierflow.testing._keyed import (
    KeyedCoProcessFunctionHarness,
    KeyedHarness,
    KeyedProcessFunctionHarness,
)
from barrierflow.testing._keyed_functions import (
    KeyedFilterFunctionHarness,
    KeyedFlatMapFunctionHarness,
    KeyedMapFunctionHarness,
)
from barrierflow.testing._parallel import ParallelHarness
from barrierflow.testing._snapshot import HarnessSnapshot
from barrierflow.testing._window import WindowOperatorHarness

__all__ = [
    "BroadcastProcessFunctionHarness",
    "CoProcessFunctionHarness",
    "FilterFunctionHarness",
    "FlatMapFunctionHarness",
    "HarnessSnapshot",
    "KeyedBroadcastProcessFunctionHarness",
    "KeyedCoProcessFunctionHarness",
    "KeyedFilterFunctionHarness",
    "KeyedFlatMapFunctionHarness",
    "KeyedHarness",
    "KeyedMapFunctionHarness",
    "KeyedProcessFunctionHarness",
    "MapFunctionHarness",
    "OperatorHarness",
    "ParallelHarness",
    "ProcessFunctionHarness",
    "UserFunctionError",
    "WindowOperatorHarness",
]
