"""Harnesses for broadcast state: `KeyedBroadcastProcessFunction` and
`BroadcastProcessFunction`, over the operators a job runs (`KeyedBroadcastProcessOperator`,
`CoBroadcastProcessOperator`). Input 1 is the (keyed) stream, input 2 the broadcast
stream; each subtask keeps its own copy of the broadcast state, as in a job."""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import as_callable
from barrierflow.core.state_descriptors import MapStateDescriptor
from barrierflow.runtime.operators.broadcast import (
    CoBroadcastProcessOperator,
    KeyedBroadcastProcessOperator,
)
from barrierflow.testing._harness import OperatorHarness, TwoInputs
from barrierflow.testing._keyed import UID, KeyedHarness, built


class _BroadcastInput:
    """The broadcast side of a broadcast harness, and its state."""

    operator: Any
    _push: Any

    def process_broadcast_element(self, value: Any, timestamp: int | None = None) -> None:
        """One element of the broadcast stream through `process_broadcast_element` (its
        watermark is `process_watermark2`)."""
        self._push(self.operator.process_batch2, value, timestamp, "the broadcast element")

    def get_broadcast_state(self, descriptor: MapStateDescriptor) -> dict[Any, Any]:
        """This subtask's copy of the broadcast state `descriptor` names, as a dict."""
        return dict(self.operator.broadcast_states.read_only_state(descriptor).items())


class KeyedBroadcastProcessFunctionHarness(_BroadcastInput, TwoInputs, KeyedHarness):
    """Drives a `KeyedBroadcastProcessFunction` as
    `stream.key_by(key_selector).connect(rules.broadcast(*descriptors)).process(function)`
    runs it: keyed state and timers per key on input 1, writable broadcast state (and
    `apply_to_keyed_state`) on the broadcast input.

    >>> from barrierflow.functions import KeyedBroadcastProcessFunction
    >>> from barrierflow.state import MapStateDescriptor
    >>> LIMITS = MapStateDescriptor("limits", None, None)
    >>> class OverLimit(KeyedBroadcastProcessFunction):
    ...     def process_broadcast_element(self, value, ctx):
    ...         ctx.get_broadcast_state(LIMITS).put(*value)
    ...     def process_element(self, value, ctx):
    ...         limit = ctx.get_broadcast_state(LIMITS).get(value[0])
    ...         if limit is not None and value[1] > limit:
    ...             yield value
    >>> harness = KeyedBroadcastProcessFunctionHarness(OverLimit(), lambda r: r[0], LIMITS)
    >>> harness.process_broadcast_element(("eur", 100))
    >>> harness.process_element(("eur", 150), 1); harness.process_element(("usd", 999), 2)
    >>> harness.extract_output_values(), harness.get_broadcast_state(LIMITS)
    ([('eur', 150)], {'eur': 100})
    """

    def __init__(
        self,
        function: Any,
        key_selector: Any,
        *descriptors: MapStateDescriptor,
        **settings: Any,
    ) -> None:
        name = type(function).__name__
        operator = built(
            KeyedBroadcastProcessOperator, UID, name, key_selector, function, list(descriptors)
        )
        self._get_key = as_callable(key_selector, "get_key", "KeySelector")
        super().__init__(operator, function, **settings)

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the keyed stream through `process_element` (its watermark is
        `process_watermark1`)."""
        call = self.operator.process_batch1
        self._keyed_push(call, self._get_key, value, timestamp, "the element")


class BroadcastProcessFunctionHarness(_BroadcastInput, TwoInputs, OperatorHarness):
    """Drives a `BroadcastProcessFunction` as
    `stream.connect(rules.broadcast(*descriptors)).process(function)` runs it.

    >>> from barrierflow.functions import BroadcastProcessFunction
    >>> from barrierflow.state import MapStateDescriptor
    >>> WORDS = MapStateDescriptor("words", None, None)
    >>> class Censor(BroadcastProcessFunction):
    ...     def process_broadcast_element(self, value, ctx):
    ...         ctx.get_broadcast_state(WORDS).put(value, True)
    ...     def process_element(self, value, ctx):
    ...         yield "***" if ctx.get_broadcast_state(WORDS).contains(value) else value
    >>> harness = BroadcastProcessFunctionHarness(Censor(), WORDS)
    >>> harness.process_element("hello"); harness.process_broadcast_element("darn")
    >>> harness.process_element("darn")
    >>> harness.extract_output_values()
    ['hello', '***']
    """

    def __init__(self, function: Any, *descriptors: MapStateDescriptor, **settings: Any) -> None:
        name = type(function).__name__
        operator = built(CoBroadcastProcessOperator, UID, name, function, list(descriptors))
        super().__init__(operator, function, **settings)

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the non-broadcast stream through `process_element`."""
        self._push(self.operator.process_batch1, value, timestamp, "the element")
