"""`MemorySize` and `SlotSharingGroup`, PyFlink's values for an operator's resources.

On Spark each subtask is one Spark task holding a task slot of its own, and Spark places the
tasks: a slot sharing group has nothing to share or separate, and its resources are Spark's
to give (`spark.task.cpus`, the executors' memory). `DataStream.slot_sharing_group(group)`
keeps the group's name on the operator (the job graph shows it); the resources are checked as
Flink checks them, so a group Flink refuses is refused here too, and are otherwise unused.

>>> str(MemorySize.of_mebi_bytes(64)), str(MemorySize(bytes_size=1536))
('64 mb', '1536 bytes')
>>> builder = SlotSharingGroup.builder("heavy").set_cpu_cores(1.5)
>>> group = builder.set_task_heap_memory_mb(100).build()
>>> group.get_name(), group.get_cpu_cores(), str(group.get_task_heap_memory())
('heavy', 1.5, '100 mb')
"""

from __future__ import annotations

from functools import total_ordering
from typing import Any

from barrierflow.errors import ConfigurationError

_UNITS = ((1 << 40, "tb"), (1 << 30, "gb"), (1 << 20, "mb"), (1 << 10, "kb"))


@total_ordering
class MemorySize:
    """A number of bytes, viewable in binary units (Flink's `MemorySize`)."""

    def __init__(self, j_memory_size: Any = None, bytes_size: int | None = None) -> None:
        if j_memory_size is not None:
            raise ConfigurationError(
                "MemorySize wraps no Java object in barrierflow: give bytes_size=, or use "
                "MemorySize.of_mebi_bytes(n)"
            )
        if isinstance(bytes_size, bool) or not isinstance(bytes_size, int) or bytes_size < 0:
            raise ConfigurationError(
                f"a memory size must be a number of bytes >= 0, got {bytes_size!r}"
            )
        self._bytes = bytes_size

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> MemorySize:
        if isinstance(mebi_bytes, bool) or not isinstance(mebi_bytes, int):
            raise ConfigurationError(f"of_mebi_bytes needs an integer, got {mebi_bytes!r}")
        return MemorySize(bytes_size=mebi_bytes << 20)

    def get_bytes(self) -> int:
        return self._bytes

    def get_kibi_bytes(self) -> int:
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        return self._bytes >> 40

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemorySize) and self._bytes == other._bytes

    def __lt__(self, other: MemorySize) -> bool:
        if not isinstance(other, MemorySize):
            raise ConfigurationError(f"cannot compare a MemorySize with {other!r}")
        return self._bytes < other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __str__(self) -> str:
        """Flink's form: the largest unit that divides the size exactly ('64 mb', '1536 bytes')."""
        for factor, unit in _UNITS:
            if self._bytes and self._bytes % factor == 0:
                return f"{self._bytes // factor} {unit}"
        return f"{self._bytes} bytes"

    def __repr__(self) -> str:
        return f"MemorySize({self})"


class SlotSharingGroup:
    """A named group of operators and the resources Flink would give its slot (kept, unused
    on Spark: see the module's docstring)."""

    def __init__(
        self,
        name: str,
        cpu_cores: float | None = None,
        task_heap_memory: MemorySize | None = None,
        task_off_heap_memory: MemorySize | None = None,
        managed_memory: MemorySize | None = None,
        external_resources: dict[str, float] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a slot sharing group needs a non-empty name, got {name!r}")
        self._name = name
        self._cpu_cores = cpu_cores
        self._heap = task_heap_memory
        self._off_heap = task_off_heap_memory
        self._managed = managed_memory
        self._external = dict(external_resources or {})

    def get_name(self) -> str:
        return self._name

    def get_managed_memory(self) -> MemorySize | None:
        return self._managed

    def get_task_heap_memory(self) -> MemorySize | None:
        return self._heap

    def get_task_off_heap_memory(self) -> MemorySize | None:
        return self._off_heap

    def get_cpu_cores(self) -> float | None:
        return self._cpu_cores

    def get_external_resources(self) -> dict[str, float]:
        return dict(self._external)

    @staticmethod
    def builder(name: str) -> SlotSharingGroup.Builder:
        return SlotSharingGroup.Builder(name)

    def _key(self) -> tuple[Any, ...]:
        return (self._name, self._cpu_cores, self._heap, self._off_heap, self._managed,
                tuple(sorted(self._external.items())))  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotSharingGroup) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"SlotSharingGroup({self._name!r})"

    class Builder:
        """Collects a group's resources; `build()` checks them as Flink does."""

        def __init__(self, name: str) -> None:
            self._name = name
            self._cpu: float | None = None
            self._heap: MemorySize | None = None
            self._off_heap: MemorySize | None = None
            self._managed: MemorySize | None = None
            self._external: dict[str, float] = {}

        def set_cpu_cores(self, cpu_cores: float) -> SlotSharingGroup.Builder:
            self._cpu = _positive(cpu_cores, "cpu cores")
            return self

        def set_task_heap_memory(self, task_heap_memory: MemorySize) -> SlotSharingGroup.Builder:
            self._heap = _memory(task_heap_memory, "task heap memory")
            return self

        def set_task_heap_memory_mb(self, task_heap_memory_mb: int) -> SlotSharingGroup.Builder:
            return self.set_task_heap_memory(MemorySize.of_mebi_bytes(task_heap_memory_mb))

        def set_task_off_heap_memory(
            self, task_off_heap_memory: MemorySize
        ) -> SlotSharingGroup.Builder:
            self._off_heap = _memory(task_off_heap_memory, "task off-heap memory")
            return self

        def set_task_off_heap_memory_mb(
            self, task_off_heap_memory_mb: int
        ) -> SlotSharingGroup.Builder:
            return self.set_task_off_heap_memory(MemorySize.of_mebi_bytes(task_off_heap_memory_mb))

        def set_managed_memory(self, managed_memory: MemorySize) -> SlotSharingGroup.Builder:
            self._managed = _memory(managed_memory, "managed memory")
            return self

        def set_managed_memory_mb(self, managed_memory_mb: int) -> SlotSharingGroup.Builder:
            return self.set_managed_memory(MemorySize.of_mebi_bytes(managed_memory_mb))

        def set_external_resource(self, name: str, value: float) -> SlotSharingGroup.Builder:
            self._external[name] = _positive(value, f"external resource {name!r}")
            return self

        def build(self) -> SlotSharingGroup:
            """A name alone, or resources with both cpu cores and task heap memory (Flink's
            rule); unset memory of a group with resources is 0 bytes, as in Flink."""
            if (
                self._cpu is None
                and self._heap is None
                and self._off_heap is None
                and (self._managed is None and not self._external)
            ):
                return SlotSharingGroup(self._name)
            if self._cpu is None or self._heap is None:
                raise ConfigurationError(
                    f"slot sharing group {self._name!r}: cpu cores and task heap memory are "
                    "both needed when a group names resources"
                )
            zero = MemorySize(bytes_size=0)
            return SlotSharingGroup(
                self._name,
                self._cpu,
                self._heap,
                self._off_heap or zero,
                self._managed or zero,
                self._external,
            )


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigurationError(f"{what} must be a positive number, got {value!r}")
    return float(value)


def _memory(value: Any, what: str) -> MemorySize:
    if not isinstance(value, MemorySize) or value.get_bytes() <= 0:
        raise ConfigurationError(f"{what} must be a positive MemorySize, got {value!r}")
    return value
