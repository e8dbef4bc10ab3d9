"""The RuntimeContext user functions receive in `open`."""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import RuntimeContext
from barrierflow.core.metrics import MetricGroup
from barrierflow.core.state_descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.operators.base import OperatorContext
from barrierflow.state.backend import KeyedStateBackend
from barrierflow.state.handles import keyed_state_handle
from barrierflow.state.values import State


class TaskRuntimeContext(RuntimeContext):
    """Subtask facts, the operator's user metrics and, on keyed streams, the keyed state
    backend."""

    def __init__(
        self,
        context: OperatorContext | None,
        backend: KeyedStateBackend | None,
        metric_group: MetricGroup | None = None,
    ):
        assert context is not None, "operator used before setup()"
        self._context = context
        self._backend = backend
        self._metric_group = metric_group if metric_group is not None else MetricGroup()
        self._handles: dict[str, tuple[StateDescriptor, State]] = {}

    def get_metrics_group(self) -> MetricGroup:
        return self._metric_group

    def get_index_of_this_subtask(self) -> int:
        return self._context.subtask_index

    def get_number_of_parallel_subtasks(self) -> int:
        return self._context.parallelism

    def get_attempt_number(self) -> int:
        return self._context.attempt

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return self._context.job_parameters.get(key, default_value)

    def get_state(self, descriptor: Any) -> Any:
        return self._handle(descriptor, ValueStateDescriptor)

    def get_list_state(self, descriptor: Any) -> Any:
        return self._handle(descriptor, ListStateDescriptor)

    def get_map_state(self, descriptor: Any) -> Any:
        return self._handle(descriptor, MapStateDescriptor)

    def get_reducing_state(self, descriptor: Any) -> Any:
        return self._handle(descriptor, ReducingStateDescriptor)

    def get_aggregating_state(self, descriptor: Any) -> Any:
        return self._handle(descriptor, AggregatingStateDescriptor)

    def _handle(self, descriptor: Any, expected: type[StateDescriptor]) -> State:
        """The handle for `descriptor`, the same one for every call with an equal
        descriptor (TTL wrappers keep their sweep cursor in it)."""
        if not isinstance(descriptor, expected):
            raise ConfigurationError(f"expected a {expected.__name__}, got {descriptor!r:.200}")
        backend = self._keyed_backend()
        known = self._handles.get(descriptor.name)
        if known is not None:
            declared, handle = known
            if type(declared) is not type(descriptor) or (
                declared.time_to_live() != descriptor.time_to_live()
            ):
                raise ConfigurationError(
                    f"state {descriptor.name!r} was asked for as {type(declared).__name__} "
                    f"(TTL {declared.time_to_live()}) and now as {type(descriptor).__name__} "
                    f"(TTL {descriptor.time_to_live()}); give each state its own name"
                )
            return handle
        handle = keyed_state_handle(backend, descriptor, self._context.processing_time)
        self._handles[descriptor.name] = (descriptor, handle)
        return handle

    def _keyed_backend(self) -> KeyedStateBackend:
        if self._backend is None:
            raise ConfigurationError(
                "keyed state is only available on a keyed stream: call key_by() first"
            )
        return self._backend
