"""BroadcastStream and BroadcastConnectedStream (PyFlink's names): a stream with broadcast
state, `stream.broadcast(descriptor, ...)`, connected with a keyed or non-keyed stream
and processed by a (Keyed)BroadcastProcessFunction.

>>> from barrierflow import StreamExecutionEnvironment
>>> from barrierflow.functions import KeyedBroadcastProcessFunction
>>> from barrierflow.state import MapStateDescriptor
>>> RULES = MapStateDescriptor("rules", None, None)
>>> class Threshold(KeyedBroadcastProcessFunction):
...     def process_element(self, value, ctx):
...         limit = ctx.get_broadcast_state(RULES).get("limit")
...         if limit is not None and value[1] > limit:
...             yield value
...     def process_broadcast_element(self, value, ctx):
...         ctx.get_broadcast_state(RULES).put("limit", value)
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> rules = env.from_collection([5]).broadcast(RULES)
>>> events = env.from_collection([("a", 3), ("a", 7)]).key_by(lambda e: e[0])
>>> _ = events.connect(rules).process(Threshold()).print()
>>> [v.name for v in env.get_job_graph().vertices]
['Collection', 'Collection', 'KeyedBroadcastProcess -> Print']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from barrierflow.api.connected_streams import add_two_input_operator
from barrierflow.core.broadcast_functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from barrierflow.core.state_descriptors import MapStateDescriptor
from barrierflow.errors import JobDefinitionError
from barrierflow.runtime.operators.broadcast import (
    CoBroadcastProcessOperator,
    KeyedBroadcastProcessOperator,
)

if TYPE_CHECKING:
    from barrierflow.api.datastream import DataStream

__all__ = ["BroadcastConnectedStream", "BroadcastStream"]


class BroadcastStream:
    """A stream whose every element reaches every subtask of the operator it is connected
    to, which keeps the broadcast states `broadcast_state_descriptors` declares. Only
    `DataStream.connect` / `KeyedStream.connect` take it."""

    def __init__(
        self, input_stream: DataStream, broadcast_state_descriptors: Sequence[MapStateDescriptor]
    ) -> None:
        descriptors = list(broadcast_state_descriptors)
        if not descriptors:
            raise JobDefinitionError("broadcast state needs at least one MapStateDescriptor")
        names = set()
        for descriptor in descriptors:
            if not isinstance(descriptor, MapStateDescriptor):
                raise JobDefinitionError(
                    f"broadcast(...) takes MapStateDescriptors, got {descriptor!r:.200}"
                )
            if descriptor.name in names:
                raise JobDefinitionError(
                    f"broadcast(...) got two MapStateDescriptors named {descriptor.name!r}"
                )
            names.add(descriptor.name)
        self.input_stream = input_stream
        self.broadcast_state_descriptors = descriptors

    @property
    def descriptors(self) -> list[MapStateDescriptor]:
        """The broadcast states' descriptors (`broadcast_state_descriptors`)."""
        return self.broadcast_state_descriptors


class BroadcastConnectedStream:
    """A keyed or non-keyed stream connected with a `BroadcastStream`; `process` runs a
    `KeyedBroadcastProcessFunction` or a `BroadcastProcessFunction` over both."""

    def __init__(
        self,
        non_broadcast_stream: DataStream,
        broadcast_stream: BroadcastStream,
        broadcast_state_descriptors: Sequence[MapStateDescriptor],
    ) -> None:
        if non_broadcast_stream._env is not broadcast_stream.input_stream._env:
            raise JobDefinitionError("connect needs streams of the same environment")
        self.non_broadcast_stream = non_broadcast_stream
        self.broadcast_stream = broadcast_stream
        self.broadcast_state_descriptors = list(broadcast_state_descriptors)

    def _is_keyed_stream(self) -> bool:
        from barrierflow.api.datastream import KeyedStream

        return isinstance(self.non_broadcast_stream, KeyedStream)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        """Input 1 is the (keyed) stream, input 2 the broadcast stream (see the functions);
        `output_type` (a `Types` value) is how `print()` writes the results, as elsewhere."""
        keyed = self._is_keyed_stream()
        if isinstance(func, KeyedBroadcastProcessFunction):
            if not keyed:
                raise JobDefinitionError(
                    "a KeyedBroadcastProcessFunction needs a keyed stream: "
                    "key_by(...).connect(broadcast_stream)"
                )
            processed = add_two_input_operator(
                self.non_broadcast_stream,
                self.broadcast_stream.input_stream,
                "KeyedBroadcastProcess",
                KeyedBroadcastProcessOperator,
                self.non_broadcast_stream._key_selector,
                func,
                self.broadcast_state_descriptors,
            )
            return processed._declare(output_type, "process")
        if isinstance(func, BroadcastProcessFunction):
            if keyed:
                raise JobDefinitionError(
                    "a BroadcastProcessFunction applies to a non-keyed stream; on a keyed "
                    "stream use a KeyedBroadcastProcessFunction"
                )
            processed = add_two_input_operator(
                self.non_broadcast_stream,
                self.broadcast_stream.input_stream,
                "BroadcastProcess",
                CoBroadcastProcessOperator,
                func,
                self.broadcast_state_descriptors,
            )
            return processed._declare(output_type, "process")
        raise JobDefinitionError(
            "process() on a broadcast-connected stream needs a BroadcastProcessFunction or "
            f"KeyedBroadcastProcessFunction, got {func!r:.200}"
        )
