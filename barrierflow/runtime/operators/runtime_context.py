"""The RuntimeContext user functions receive in `open`."""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import RuntimeContext
from barrierflow.core.metrics import MetricGroup
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.operators.base import OperatorContext
from barrierflow.state.heap_backend import HeapKeyedStateBackend


class TaskRuntimeContext(RuntimeContext):
    """Subtask facts, the operator's user metrics and, on keyed streams, the keyed state
    backend."""

    def __init__(
        self,
        context: OperatorContext | None,
        backend: HeapKeyedStateBackend | None,
        metric_group: MetricGroup | None = None,
    ):
        assert context is not None, "operator used before setup()"
        self._context = context
        self._backend = backend
        self._metric_group = metric_group if metric_group is not None else MetricGroup()

    def get_metrics_group(self) -> MetricGroup:
        return self._metric_group

    def get_index_of_this_subtask(self) -> int:
        return self._context.subtask_index

    def get_number_of_parallel_subtasks(self) -> int:
        return self._context.parallelism

    def get_attempt_number(self) -> int:
        return self._context.attempt

    def get_state(self, descriptor: Any) -> Any:
        return self._keyed_backend().get_value_state(descriptor)

    def get_list_state(self, descriptor: Any) -> Any:
        return self._keyed_backend().get_list_state(descriptor)

    def get_map_state(self, descriptor: Any) -> Any:
        return self._keyed_backend().get_map_state(descriptor)

    def _keyed_backend(self) -> HeapKeyedStateBackend:
        if self._backend is None:
            raise ConfigurationError(
                "keyed state is only available on a keyed stream: call key_by() first"
            )
        return self._backend
