"""DataStreamSink: the end of a pipeline, and the operator-parallelism check DataStream
shares with it."""

from __future__ import annotations

from typing import Any

from barrierflow.errors import JobDefinitionError
from barrierflow.graph.transformation import Transformation


class DataStreamSink:
    """The end of a pipeline; carries the sink operator's uid, name and parallelism."""

    def __init__(self, transformation: Transformation) -> None:
        self._transformation = transformation

    def uid(self, uid: str) -> DataStreamSink:
        if not isinstance(uid, str) or not uid:
            raise JobDefinitionError(f"uid must be a non-empty string, got {uid!r}")
        self._transformation.uid = uid
        return self

    def name(self, name: str) -> DataStreamSink:
        self._transformation.name = name
        return self

    def set_parallelism(self, parallelism: int) -> DataStreamSink:
        """The sink's parallelism; above the environment's and the command line's."""
        self._transformation.parallelism = operator_parallelism(parallelism)
        return self

    def disable_chaining(self) -> DataStreamSink:
        """Run the sink in a stream task of its own (see `DataStream.disable_chaining`)."""
        self._transformation.chaining = "never"
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStreamSink:
        """Accepted and kept as a name; changes nothing on Spark (see
        `DataStream.slot_sharing_group`)."""
        name = getattr(slot_sharing_group, "get_name", None)
        self._transformation.slot_sharing_group = name() if callable(name) else slot_sharing_group
        return self


def operator_parallelism(value: int) -> int:
    """An operator's parallelism: an integer >= 1, not a bool. Whether it is within the max
    parallelism is checked when the job graph is built (the max may still change)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobDefinitionError(
            f"an operator's parallelism must be an integer >= 1, got {value!r}"
        )
    return value
