"""The keyed state handles a user function reads and writes, with PyFlink's names.

Each handle is scoped to the key of the record being processed: the same
`ValueState` object reads a different value for every key. Backends implement
these interfaces; `barrierflow.state.heap_backend` is the default one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from types import GenericAlias
from typing import Any


class State(ABC):
    """A piece of keyed state, scoped to the current key."""

    __class_getitem__ = classmethod(GenericAlias)  # generic in PyFlink: Foo[IN, OUT]

    @abstractmethod
    def clear(self) -> None:
        """Remove the current key's value."""


class ValueState(State):
    """One value per key; None means no value."""

    @abstractmethod
    def value(self) -> Any:
        """The current key's value, or None. Heap backend: the stored object itself."""

    @abstractmethod
    def update(self, value: Any) -> None:
        """Set the current key's value; `update(None)` is `clear()` (as in Flink)."""


def list_values(values: Iterable[Any] | None) -> list[Any]:
    """`values` as a new list for a `ListState`'s `add_all`/`update` (None: []); None in it
    is refused, as in Flink."""
    new = [] if values is None else list(values)
    if any(value is None for value in new):
        raise ValueError("cannot add None to a ListState")
    return new


class ListState(State):
    """A list of values per key."""

    @abstractmethod
    def get(self) -> list[Any]:
        """A new list of the current key's values ([] if none)."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Append one value (None is refused, as in Flink)."""

    @abstractmethod
    def add_all(self, values: Iterable[Any] | None) -> None:
        """Append values; None or [] changes nothing."""

    @abstractmethod
    def update(self, values: Iterable[Any] | None) -> None:
        """Replace the values; None or [] clears."""


class MapState(State):
    """A dict of user keys to values per key."""

    @abstractmethod
    def get(self, key: Any) -> Any:
        """The value of `key` for the current key, or None."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Set the value of `key`."""

    @abstractmethod
    def put_all(self, mapping: dict[Any, Any]) -> None:
        """Set every entry of `mapping`."""

    @abstractmethod
    def remove(self, key: Any) -> None:
        """Remove `key` (nothing happens if it is absent)."""

    @abstractmethod
    def contains(self, key: Any) -> bool:
        """Whether `key` has a value."""

    @abstractmethod
    def keys(self) -> list[Any]:
        """A new list of the user keys."""

    @abstractmethod
    def values(self) -> list[Any]:
        """A new list of the values."""

    @abstractmethod
    def items(self) -> list[tuple[Any, Any]]:
        """A new list of (user key, value) pairs."""

    @abstractmethod
    def is_empty(self) -> bool:
        """Whether the current key has no entries."""

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class ReducingState(State):
    """One value per key (and namespace) that every `add` folds a value into."""

    @abstractmethod
    def get(self) -> Any:
        """The folded value, or None if nothing was added."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Fold `value` in: `reduce(current, value)`, or `value` if there is none."""


class AggregatingState(State):
    """One accumulator per key (and namespace) that every `add` folds a value into with an
    `AggregateFunction`; `get` returns the function's result for it (PyFlink's name)."""

    @abstractmethod
    def get(self) -> Any:
        """`get_result(accumulator)`, or None if nothing was added."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Fold `value` in: `add(value, accumulator)`, starting from `create_accumulator()`."""
