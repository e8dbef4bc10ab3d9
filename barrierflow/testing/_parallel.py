"""Several subtasks of one keyed operator side by side, each record sent to the subtask that
owns its key (as a keyed exchange sends it), watermarks and processing time to all: a job's
operator at parallelism n, for snapshot/restore at another parallelism."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barrierflow.errors import ConfigurationError
from barrierflow.state.key_groups import assign_to_key_group, subtask_for_key_group
from barrierflow.testing._keyed import KeyedHarness
from barrierflow.testing._snapshot import HarnessSnapshot


class ParallelHarness:
    """`parallelism` keyed harnesses made by `make(**settings)`, one per subtask.

    `make` builds one subtask's harness from the keyword arguments it is given
    (`parallelism`, `subtask_index`, `restore_from` and `settings`), with a fresh function
    each time, as each subtask of a job deserializes its own.

    >>> from barrierflow.testing import KeyedProcessFunctionHarness
    >>> from barrierflow.functions import KeyedProcessFunction
    >>> from barrierflow.state import ValueStateDescriptor
    >>> class Count(KeyedProcessFunction):
    ...     def open(self, runtime_context):
    ...         self.n = runtime_context.get_state(ValueStateDescriptor("n"))
    ...     def process_element(self, value, ctx):
    ...         self.n.update((self.n.value() or 0) + 1)
    ...         yield value, self.n.value()
    >>> def make(**settings):
    ...     return KeyedProcessFunctionHarness(Count(), lambda word: word, **settings)
    >>> two = ParallelHarness(make, 2)
    >>> for word in ["a", "b", "a"]:
    ...     two.process_element(word)
    >>> three = ParallelHarness(make, 3, restore_from=two.snapshot())
    >>> three.process_element("a"); three.process_element("b")
    >>> sorted(three.extract_output_values())
    [('a', 3), ('b', 2)]
    """

    def __init__(
        self,
        make: Callable[..., KeyedHarness],
        parallelism: int,
        *,
        restore_from: HarnessSnapshot | None = None,
        **settings: Any,
    ) -> None:
        if parallelism < 1:
            raise ConfigurationError(f"parallelism must be at least 1, got {parallelism}")
        self.parallelism = parallelism
        self.subtasks: list[KeyedHarness] = []
        for index in range(parallelism):
            harness = make(
                parallelism=parallelism, subtask_index=index, restore_from=restore_from,
                **settings,
            )  # fmt: skip
            if not isinstance(harness, KeyedHarness):
                raise ConfigurationError(
                    f"ParallelHarness needs keyed harnesses from make(), got {harness!r:.200}"
                )
            self.subtasks.append(harness)
        self.max_parallelism = self.subtasks[0].context.max_parallelism

    def subtask_for(self, key: Any) -> KeyedHarness:
        """The subtask's harness that owns `key`."""
        group = assign_to_key_group(key, self.max_parallelism)
        return self.subtasks[subtask_for_key_group(self.max_parallelism, self.parallelism, group)]

    def _route(self, method: str, selector: str, value: Any, timestamp: int | None) -> None:
        first = self.subtasks[0]
        get_key = getattr(first, selector)
        key = first._guarded(f"the key selector on {value!r:.200}", lambda: get_key(value))
        getattr(self.subtask_for(key), method)(value, timestamp)

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """One record to the subtask of its key."""
        self._route("process_element", "_get_key", value, timestamp)

    def process_element1(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the first input to the subtask of its key."""
        self._route("process_element1", "_get_key1", value, timestamp)

    def process_element2(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the second input to the subtask of its key."""
        self._route("process_element2", "_get_key2", value, timestamp)

    def process_broadcast_element(self, value: Any, timestamp: int | None = None) -> None:
        """One element of the broadcast stream to every subtask, as broadcast partitioning
        sends it (broadcast harnesses)."""
        for harness in self.subtasks:
            harness.process_broadcast_element(value, timestamp)  # type: ignore[attr-defined]

    def process_watermark(self, timestamp: int) -> None:
        """Every subtask's event time reaches `timestamp`."""
        for harness in self.subtasks:
            harness.process_watermark(timestamp)

    def process_watermark1(self, timestamp: int) -> None:
        """Every subtask's first input's watermark reaches `timestamp` (two-input harnesses)."""
        for harness in self.subtasks:
            harness.process_watermark1(timestamp)  # type: ignore[attr-defined]

    def process_watermark2(self, timestamp: int) -> None:
        """Every subtask's second input's watermark reaches `timestamp`."""
        for harness in self.subtasks:
            harness.process_watermark2(timestamp)  # type: ignore[attr-defined]

    def set_processing_time(self, time_ms: int) -> None:
        """Every subtask's processing time moves to `time_ms` (firing what is due)."""
        for harness in self.subtasks:
            harness.set_processing_time(time_ms)

    def snapshot(self) -> HarnessSnapshot:
        """Every subtask's snapshot, combined (restore it at any parallelism)."""
        return HarnessSnapshot.combine(harness.snapshot() for harness in self.subtasks)

    def extract_output_values(self) -> list[Any]:
        """The main output's values of every subtask (subtask by subtask)."""
        return [value for h in self.subtasks for value in h.extract_output_values()]

    def get_side_output(self, tag: Any) -> list[Any]:
        """Side output `tag`'s values of every subtask (subtask by subtask)."""
        return [value for h in self.subtasks for value in h.get_side_output(tag)]

    def clear_output(self) -> None:
        for harness in self.subtasks:
            harness.clear_output()

    def close(self) -> None:
        for harness in self.subtasks:
            harness.close()
