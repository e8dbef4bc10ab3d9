"""Harnesses for functions on non-keyed streams: `ProcessFunction`, `CoProcessFunction`,
`MapFunction`, `FlatMapFunction`, `FilterFunction` (also plain callables), over the
operators a job runs. Their only state is a `CheckpointedFunction`'s operator list state."""

from __future__ import annotations

from typing import Any

from barrierflow.runtime.operators.co_process import CoProcessOperator
from barrierflow.runtime.operators.process import ProcessOperator
from barrierflow.runtime.operators.stateless import FilterOperator, FlatMapOperator, MapOperator
from barrierflow.testing._harness import OperatorHarness, TwoInputs
from barrierflow.testing._keyed import UID, built


def _name(function: Any) -> str:
    return getattr(function, "__name__", None) or type(function).__name__


class _OneInput(OperatorHarness):
    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """One record (with its event time in ms, or None)."""
        self._push(self.operator.process_batch, value, timestamp, "the element")


class ProcessFunctionHarness(_OneInput):
    """Drives a `ProcessFunction` as `stream.process(function)` runs it (side outputs,
    clocks; timers need a keyed stream).

    >>> from barrierflow import OutputTag
    >>> from barrierflow.functions import ProcessFunction
    >>> ODD = OutputTag("odd")
    >>> class Split(ProcessFunction):
    ...     def process_element(self, value, ctx):
    ...         yield (ODD, value) if value % 2 else value
    >>> harness = ProcessFunctionHarness(Split())
    >>> for n in range(4):
    ...     harness.process_element(n, 100 + n)
    >>> harness.extract_output_records(), harness.get_side_output(ODD)
    ([(0, 100), (2, 102)], [1, 3])
    """

    def __init__(self, function: Any, **settings: Any) -> None:
        operator = built(ProcessOperator, UID, _name(function), function)
        super().__init__(operator, function, **settings)


class MapFunctionHarness(_OneInput):
    """Drives a `MapFunction` (or a plain callable) as `stream.map(function)` runs it.

    >>> harness = MapFunctionHarness(str.upper)
    >>> harness.process_element("a", 5)
    >>> harness.extract_output_records()
    [('A', 5)]
    """

    def __init__(self, function: Any, **settings: Any) -> None:
        operator = built(MapOperator, UID, _name(function), function)
        super().__init__(operator, function, **settings)


class FlatMapFunctionHarness(_OneInput):
    """Drives a `FlatMapFunction` (or a callable returning an iterable) as
    `stream.flat_map(function)` runs it.

    >>> harness = FlatMapFunctionHarness(str.split)
    >>> harness.process_element("to be", 7)
    >>> harness.extract_output_records()
    [('to', 7), ('be', 7)]
    """

    def __init__(self, function: Any, **settings: Any) -> None:
        operator = built(FlatMapOperator, UID, _name(function), function)
        super().__init__(operator, function, **settings)


class FilterFunctionHarness(_OneInput):
    """Drives a `FilterFunction` (or a predicate) as `stream.filter(function)` runs it.

    >>> harness = FilterFunctionHarness(str.isdigit)
    >>> for value in ["1", "x", "22"]:
    ...     harness.process_element(value)
    >>> harness.extract_output_values()
    ['1', '22']
    """

    def __init__(self, function: Any, **settings: Any) -> None:
        operator = built(FilterOperator, UID, _name(function), function)
        super().__init__(operator, function, **settings)


class CoProcessFunctionHarness(TwoInputs, OperatorHarness):
    """Drives a `CoProcessFunction` as `a.connect(b).process(function)` runs it.

    >>> from barrierflow.functions import CoProcessFunction
    >>> class Tag(CoProcessFunction):
    ...     def process_element1(self, value, ctx):
    ...         yield ("left", value)
    ...     def process_element2(self, value, ctx):
    ...         yield ("right", value)
    >>> harness = CoProcessFunctionHarness(Tag())
    >>> harness.process_element2(1); harness.process_element1(2)
    >>> harness.extract_output_values()
    [('right', 1), ('left', 2)]
    """

    def __init__(self, function: Any, **settings: Any) -> None:
        operator = built(CoProcessOperator, UID, _name(function), function)
        super().__init__(operator, function, **settings)

    def process_element1(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the first input through `process_element1`."""
        self._push(self.operator.process_batch1, value, timestamp, "the first input's element")

    def process_element2(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the second input through `process_element2`."""
        self._push(self.operator.process_batch2, value, timestamp, "the second input's element")
