"""ConnectedStreams: `a.connect(b)`, two streams into one two-input operator (PyFlink's names).

>>> from barrierflow import StreamExecutionEnvironment
>>> from barrierflow.functions import CoMapFunction
>>> class Tag(CoMapFunction):
...     def map1(self, value):
...         return ("left", value)
...     def map2(self, value):
...         return ("right", value)
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> a, b = env.from_collection([1, 2]), env.from_collection(["x"])
>>> _ = a.connect(b).map(Tag()).print()
>>> [v.name for v in env.get_job_graph().vertices]
['Collection', 'Collection', 'CoMap -> Print']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from barrierflow.api.checkpointed_functions import DelegatedCheckpointing
from barrierflow.core.co_functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
    _CoFlatMapAsProcess,
    _CoMapAsProcess,
)
from barrierflow.core.functions import CheckpointedFunction
from barrierflow.errors import JobDefinitionError
from barrierflow.graph.transformation import Transformation
from barrierflow.runtime.operators.co_process import CoProcessOperator, KeyedCoProcessOperator

if TYPE_CHECKING:
    from barrierflow.api.datastream import DataStream

__all__ = ["ConnectedStreams"]


class ConnectedStreams:
    """Two streams whose records meet in one operator, each keeping its own type.

    After `key_by(key_selector1, key_selector2)` (or when both streams were keyed) the
    operator is keyed: a `KeyedCoProcessFunction` gets keyed state and timers shared by
    the records of both streams with the same key.
    """

    def __init__(self, stream1: DataStream, stream2: DataStream) -> None:
        if stream1._env is not stream2._env:
            raise JobDefinitionError("connect needs streams of the same environment")
        self.stream1 = stream1
        self.stream2 = stream2

    def _keyed(self) -> bool:
        from barrierflow.api.datastream import KeyedStream

        return isinstance(self.stream1, KeyedStream) and isinstance(self.stream2, KeyedStream)

    def key_by(
        self, key_selector1: Any, key_selector2: Any, key_type: Any = None
    ) -> ConnectedStreams:
        """Key both streams, the first by `key_selector1`, the second by `key_selector2`."""
        return ConnectedStreams(
            self.stream1.key_by(key_selector1), self.stream2.key_by(key_selector2)
        )

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        """A `CoProcessFunction`, or on keyed streams a `KeyedCoProcessFunction`."""
        if isinstance(func, KeyedCoProcessFunction):
            if not self._keyed():
                raise JobDefinitionError(
                    "a KeyedCoProcessFunction needs keyed streams: connect two KeyedStreams "
                    "or call key_by(key_selector1, key_selector2) first"
                )
            return self._add(
                "KeyedCoProcess",
                KeyedCoProcessOperator,
                self.stream1._key_selector,
                self.stream2._key_selector,
                func,
            )._declare(output_type, "process")
        if isinstance(func, CoProcessFunction):
            return self._add("CoProcess", CoProcessOperator, func)._declare(output_type, "process")
        raise JobDefinitionError(
            f"process() needs a CoProcessFunction or KeyedCoProcessFunction, got {func!r}"
        )

    def map(self, func: CoMapFunction, output_type: Any = None) -> DataStream:
        if not isinstance(func, CoMapFunction):
            raise JobDefinitionError(f"map() needs a CoMapFunction, got {func!r}")
        wrapper = _CheckpointedCoMap if isinstance(func, CheckpointedFunction) else _CoMapAsProcess
        return self._add("CoMap", CoProcessOperator, wrapper(func))._declare(output_type, "map")

    def flat_map(self, func: CoFlatMapFunction, output_type: Any = None) -> DataStream:
        if not isinstance(func, CoFlatMapFunction):
            raise JobDefinitionError(f"flat_map() needs a CoFlatMapFunction, got {func!r}")
        checkpointed = isinstance(func, CheckpointedFunction)
        wrapper = _CheckpointedCoFlatMap if checkpointed else _CoFlatMapAsProcess
        flat_mapped = self._add("CoFlatMap", CoProcessOperator, wrapper(func))
        return flat_mapped._declare(output_type, "flat_map")

    def _add(self, name: str, operator_class: type, *args: Any) -> DataStream:
        return add_two_input_operator(self.stream1, self.stream2, name, operator_class, *args)


class _CheckpointedCoMap(_CoMapAsProcess, DelegatedCheckpointing):
    """A CoMapFunction that keeps operator list state, run by the co-process operator."""


class _CheckpointedCoFlatMap(_CoFlatMapAsProcess, DelegatedCheckpointing):
    """A CoFlatMapFunction that keeps operator list state, run by the co-process operator."""


def add_two_input_operator(
    stream1: DataStream, stream2: DataStream, name: str, operator_class: type, *args: Any
) -> DataStream:
    """A two-input operator fed by `stream1` (first input) and `stream2` (second input)."""
    from barrierflow.api.datastream import DataStream

    transformation = Transformation(
        "operator",
        name,
        [stream1._transformation, stream2._transformation],
        operator_class=operator_class,
        operator_args=args,
        two_inputs=True,
    )
    stream1._env._add(transformation)
    return DataStream(stream1._env, transformation)
