"""Two-input process operators: `CoProcessOperator` (connected streams) and
`KeyedCoProcessOperator` (connected streams keyed alike: keyed state and timers).

Mailbox thread only. Each input's watermark is combined with the other's
(`TwoInputStreamOperator`); the keyed one fires its event-time timers with the
minimum, as Flink's KeyedCoProcessOperator does. Outputs carry the timestamp of the
record (or event-time timer) that produced them.
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.co_functions import CoProcessFunction, KeyedCoProcessFunction
from barrierflow.core.functions import as_callable
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.base import TwoInputStreamOperator
from barrierflow.runtime.operators.keyed import KeyedFunctionOperator
from barrierflow.runtime.operators.process import FunctionOperator

__all__ = ["CoProcessOperator", "KeyedCoProcessOperator"]


class CoProcessOperator(FunctionOperator, TwoInputStreamOperator):
    """Runs a CoProcessFunction over two non-keyed inputs (clocks, side outputs, no timers)."""

    def __init__(self, uid: str, name: str, function: Any) -> None:
        super().__init__(uid, name)
        if not isinstance(function, CoProcessFunction):
            raise TypeError(f"process() needs a CoProcessFunction, got {function!r}")
        self.function = function

    def process_batch1(self, batch: RecordBatch) -> None:
        self._process_with(batch, self.function.process_element1)

    def process_batch2(self, batch: RecordBatch) -> None:
        self._process_with(batch, self.function.process_element2)


class KeyedCoProcessOperator(KeyedFunctionOperator, TwoInputStreamOperator):
    """Runs a KeyedCoProcessFunction: both inputs share the keyed state and timers of a key.

    `key_selector1` keys the first input, `key_selector2` the second; both inputs are
    partitioned by them, so a key's records of both inputs meet in one subtask.
    """

    def __init__(
        self, uid: str, name: str, key_selector1: Any, key_selector2: Any, function: Any
    ) -> None:
        super().__init__(uid, name, key_selector1)
        if not isinstance(function, KeyedCoProcessFunction):
            raise TypeError(f"process() needs a KeyedCoProcessFunction, got {function!r}")
        self.function = function
        self.key_selector2 = key_selector2
        self._get_key2 = as_callable(key_selector2, "get_key", "KeySelector")

    def process_batch1(self, batch: RecordBatch) -> None:
        self._process_keyed(batch, self._get_key, self.function.process_element1)

    def process_batch2(self, batch: RecordBatch) -> None:
        self._process_keyed(batch, self._get_key2, self.function.process_element2)
