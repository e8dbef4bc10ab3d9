"""The window operator's keyed state, as one narrow protocol, and its in-memory twin.

`WindowLogic` keeps everything it knows in a `WindowStateAccess` (and its timers
in a `WindowTimerAccess`): the contents of each window, the trigger's state per
window, and the merging-window set per key. It holds nothing between calls, so
a snapshot of these two is a snapshot of the windows.

Values are addressed by (state name, key, namespace). The namespace is a window
for per-window state and None for per-key state (Flink's VoidNamespace). A
backend over the heap keyed state backend needs one `MapState` per name, keyed
by namespace, read and written under `set_current_key(key)`.

>>> state = InMemoryWindowState()
>>> state.put("window-contents", "alice", "w1", [1, 2])
>>> state.get("window-contents", "alice", "w1")
[1, 2]
>>> state.remove("window-contents", "alice", "w1")
>>> state.get("window-contents", "alice", "w1") is None
True
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any, Protocol

__all__ = ["InMemoryWindowState", "WindowStateAccess"]


class WindowStateAccess(Protocol):
    """Named values per (key, namespace). Mailbox thread only.

    Contract: `get` returns None for an absent value; `put` never receives None
    (the logic calls `remove` instead); the logic always `put`s a value it changed,
    so a backend may hand out copies or the stored object itself.
    """

    def get(self, name: str, key: Hashable, namespace: Hashable) -> Any:
        """The value of state `name` for `key` in `namespace`, or None."""

    def put(self, name: str, key: Hashable, namespace: Hashable, value: Any) -> None:
        """Set the value of state `name` for `key` in `namespace` (never None)."""

    def remove(self, name: str, key: Hashable, namespace: Hashable) -> None:
        """Remove the value; nothing happens if there is none."""


class InMemoryWindowState:
    """A `WindowStateAccess` in one dict, for tests and for running without a backend.

    Stores values by reference, like the heap backend. `snapshot` deep-copies.
    """

    def __init__(self, entries: dict[tuple[str, Hashable, Hashable], Any] | None = None) -> None:
        self._entries: dict[tuple[str, Hashable, Hashable], Any] = dict(entries or {})

    def get(self, name: str, key: Hashable, namespace: Hashable) -> Any:
        return self._entries.get((name, key, namespace))

    def put(self, name: str, key: Hashable, namespace: Hashable, value: Any) -> None:
        if value is None:
            raise ValueError(f"state {name!r} cannot hold None; remove the value instead")
        self._entries[(name, key, namespace)] = value

    def remove(self, name: str, key: Hashable, namespace: Hashable) -> None:
        self._entries.pop((name, key, namespace), None)

    def entries(self) -> dict[tuple[str, Hashable, Hashable], Any]:
        """Every value, by (name, key, namespace) (a new dict of the stored values)."""
        return dict(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def snapshot(self) -> dict[tuple[str, Hashable, Hashable], Any]:
        """A deep copy of every value: later changes do not reach it."""
        return copy.deepcopy(self._entries)

    @classmethod
    def restore(cls, snapshot: dict[tuple[str, Hashable, Hashable], Any]) -> InMemoryWindowState:
        """A new state holding a deep copy of `snapshot`."""
        return cls(copy.deepcopy(snapshot))
