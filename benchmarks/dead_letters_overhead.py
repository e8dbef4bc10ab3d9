"""What `with_dead_letters()` costs while no record fails: each user-function operator fed
the same batches with the option off and on (issue 21, item 7).

    .venv/bin/python benchmarks/dead_letters_overhead.py

Prints microseconds per batch of 1,000 records (the best of 15 runs, off and on in turns)
for each operator and the overhead of the option in percent. Operators run alone with a
discarding output, and trivial functions: the worst case (a real function costs more per
record, the option the same).
"""

from __future__ import annotations

import timeit
from typing import Any

from barrierflow.functions import ProcessFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.base import OperatorContext
from barrierflow.runtime.operators.process import ProcessOperator
from barrierflow.runtime.operators.stateless import FilterOperator, FlatMapOperator, MapOperator
from barrierflow.state.key_groups import KeyGroupRange

BATCH = 1000
ROUNDS = 500


class Discard:
    """An output that drops everything."""

    def collect(self, batch: Any) -> None:
        pass

    def collect_side(self, tag_id: str, batch: Any) -> None:
        pass


class Double(ProcessFunction):
    def process_element(self, value, ctx):
        yield value * 2


def started(operator: Any) -> Any:
    context = OperatorContext(0, 1, 128, KeyGroupRange(0, 127), 0, "bench")
    operator.setup(context, Discard())
    operator.initialize_state(None)
    operator.open()
    return operator


def per_batch_us(make: Any) -> tuple[float, float]:
    """The best time per batch off and on, measured in turns (a busy machine slows both)."""
    batch = RecordBatch(list(range(BATCH)), list(range(BATCH)))
    operators = [started(make(False)), started(make(True))]
    best = [float("inf"), float("inf")]
    for _ in range(15):
        for i, operator in enumerate(operators):
            took = timeit.timeit(lambda op=operator: op.process_batch(batch), number=ROUNDS)
            best[i] = min(best[i], took / ROUNDS * 1e6)
    return best[0], best[1]


OPERATORS = {
    "map": lambda on: MapOperator("m", "Map", lambda v: v + 1, dead_letters=on),
    "filter": lambda on: FilterOperator("f", "Filter", lambda v: v % 2, dead_letters=on),
    "flat_map": lambda on: FlatMapOperator("f", "FlatMap", lambda v: (v, v), dead_letters=on),
    "process": lambda on: ProcessOperator("p", "Process", Double(), dead_letters=on),
}

if __name__ == "__main__":
    print(f"{'operator':10} {'off us':>8} {'on us':>8} {'overhead':>9}")
    for name, make in OPERATORS.items():
        off, on = per_batch_us(make)
        print(f"{name:10} {off:8.1f} {on:8.1f} {100 * (on - off) / off:8.1f}%")
