"""Operator list state of user functions: named lists, snapshotted as operator state and
redistributed over a new parallelism by even split or by union.

A snapshot is msgpack-able operator state (`state/operator_state.py`) with each user
element pickled on its own inside it, so a restore hands each new subtask its share
without unpickling anyone else's:

    {"version": 1, "parallelism": <p when taken>,
     "lists": {<name>: {"mode": "split" | "union", "elements": [<pickle>, ...]}}}

Redistribution (`redistribute`), for the old subtasks' snapshots in old-subtask order:

- split: the elements of all old subtasks, concatenated in old-subtask order, are cut
  into `parallelism` contiguous parts whose sizes differ by at most one (the first
  parts take the extra element); new subtask i takes part i. At the parallelism the
  snapshots were taken at, each subtask takes back exactly its own elements.
- union: every new subtask takes every element of every old subtask.

>>> old = [OperatorListStateStore(), OperatorListStateStore()]
>>> for store, values in zip(old, (["a", "b", "c"], ["d"])):
...     store.get_list_state(ListStateDescriptor("buffer")).update(values)
>>> snapshots = [(i, store.snapshot(parallelism=2)) for i, store in enumerate(old)]
>>> [OperatorListStateStore.restored(snapshots, i, 3).get_list_state(
...     ListStateDescriptor("buffer")).get() for i in range(3)]
[['a', 'b'], ['c'], ['d']]
>>> [OperatorListStateStore.restored(snapshots, i, 2).get_list_state(
...     ListStateDescriptor("buffer")).get() for i in range(2)]
[['a', 'b', 'c'], ['d']]
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from barrierflow.core.functions import OperatorStateStore
from barrierflow.core.state_descriptors import ListStateDescriptor
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state.values import ListState

LIST_STATE_VERSION = 1
"""Schema of an operator list state snapshot (see the module docstring)."""

SPLIT = "split"
"""Redistributed by even split (`get_list_state`)."""
UNION = "union"
"""Redistributed by union (`get_union_list_state`)."""

_PICKLE_PROTOCOL = 5


@dataclass
class _NamedList:
    """One named list: its redistribution mode and its elements, each still pickled
    until the function first asks for the list."""

    mode: str
    pickled: list[bytes] = field(default_factory=list)
    state: _OperatorListState | None = None


class _OperatorListState(ListState):
    """A list of one subtask's operator state. Mailbox thread only."""

    def __init__(self, values: list[Any]) -> None:
        self._values = values

    def get(self) -> list[Any]:
        return list(self._values)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("ListState.add(None): None cannot be stored in a list state")
        self._values.append(value)

    def add_all(self, values: Iterable[Any] | None) -> None:
        for value in values or ():
            self.add(value)

    def update(self, values: Iterable[Any] | None) -> None:
        self._values = []
        self.add_all(values)

    def clear(self) -> None:
        self._values = []


class OperatorListStateStore(OperatorStateStore):
    """The operator list state of one user function in one subtask. Mailbox thread only.

    Lists restored but never asked for again are kept as restored and written back in
    every snapshot, so state survives a job version that does not use it for a while.
    """

    def __init__(self) -> None:
        self._lists: dict[str, _NamedList] = {}

    @classmethod
    def restored(
        cls, snapshots: Sequence[tuple[int, Any]], subtask_index: int, parallelism: int
    ) -> OperatorListStateStore:
        """The store of new subtask `subtask_index` of `parallelism`, from every old
        subtask's snapshot as (old subtask index, snapshot)."""
        store = cls()
        for name, (mode, pickled) in redistribute(snapshots, subtask_index, parallelism).items():
            store._lists[name] = _NamedList(mode, pickled)
        return store

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        return self._get(state_descriptor, SPLIT)

    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        return self._get(state_descriptor, UNION)

    def _get(self, descriptor: ListStateDescriptor, mode: str) -> ListState:
        if not isinstance(descriptor, ListStateDescriptor):
            raise ConfigurationError(
                f"operator list state needs a ListStateDescriptor, got {descriptor!r}"
            )
        named = self._lists.setdefault(descriptor.name, _NamedList(mode))
        if named.mode != mode:
            raise ConfigurationError(
                f"operator state {descriptor.name!r} is a {_ASKED[named.mode]} list state; it "
                f"was asked for as a {_ASKED[mode]} one. Keep one kind per name"
            )
        if named.state is None:
            named.state = _OperatorListState(_unpickled(descriptor.name, named.pickled))
            named.pickled = []
        return named.state

    def snapshot(self, parallelism: int) -> dict[str, Any]:
        """Every list, each element pickled now (a copy: later changes do not reach it)."""
        lists: dict[str, Any] = {}
        for name, named in self._lists.items():
            if named.state is None:
                pickled = list(named.pickled)
            else:
                pickled = []
                for value in named.state.get():
                    try:
                        pickled.append(pickle.dumps(value, protocol=_PICKLE_PROTOCOL))
                    except Exception as error:
                        raise ConfigurationError(
                            f"an element of operator state {name!r} ({value!r:.200}) cannot be "
                            f"pickled, so it cannot be checkpointed: {error}"
                        ) from error
            lists[name] = {"mode": named.mode, "elements": pickled}
        return {"version": LIST_STATE_VERSION, "parallelism": parallelism, "lists": lists}


_ASKED = {SPLIT: "get_list_state (even split)", UNION: "get_union_list_state (union)"}


def redistribute(
    snapshots: Sequence[tuple[int, Any]], subtask_index: int, parallelism: int
) -> dict[str, tuple[str, list[bytes]]]:
    """Each list's mode and the pickled elements new subtask `subtask_index` of
    `parallelism` takes from the old subtasks' snapshots (see the module docstring)."""
    ordered = sorted(snapshots, key=lambda item: item[0])
    old_parallelism = {_checked(state)["parallelism"] for _, state in ordered}
    same = old_parallelism == {parallelism} and [i for i, _ in ordered] == list(range(parallelism))
    gathered: dict[str, tuple[str, list[list[bytes]]]] = {}
    for _, state in ordered:
        for name, entry in state["lists"].items():
            mode, elements = entry["mode"], entry["elements"]
            if mode not in (SPLIT, UNION) or not isinstance(elements, list):
                raise StateRestoreError(f"operator state {name!r} is malformed: {entry!r:.200}")
            known = gathered.setdefault(name, (mode, []))
            if known[0] != mode:
                raise StateRestoreError(
                    f"operator state {name!r} is stored both as {known[0]} and as {mode} state"
                )
            known[1].append(elements)
    result: dict[str, tuple[str, list[bytes]]] = {}
    for name, (mode, per_old) in gathered.items():
        if mode == UNION:
            result[name] = (mode, [data for elements in per_old for data in elements])
        elif same:
            result[name] = (mode, list(per_old[subtask_index]))
        else:
            result[name] = (mode, even_split_part(per_old, subtask_index, parallelism))
    return result


def even_split_part(per_old: Sequence[Sequence[Any]], subtask_index: int, parallelism: int) -> list:
    """Part `subtask_index` of the old lists concatenated and cut into `parallelism`
    contiguous parts whose sizes differ by at most one (the first parts are the longer).

    >>> [even_split_part([[1, 2, 3], [4, 5]], i, 3) for i in range(3)]
    [[1, 2], [3, 4], [5]]
    >>> [even_split_part([[1], [2], [3]], i, 2) for i in range(2)]
    [[1, 2], [3]]
    """
    everything = [item for items in per_old for item in items]
    base, extra = divmod(len(everything), parallelism)
    start = subtask_index * base + min(subtask_index, extra)
    return everything[start : start + base + (1 if subtask_index < extra else 0)]


def is_list_state(state: Any) -> bool:
    """Whether an operator state value has the shape of a list state snapshot (its version
    may still be one this barrierflow does not read: `decode_lists` says so)."""
    return isinstance(state, dict) and {"version", "parallelism", "lists"} <= state.keys()


def decode_lists(state: Any) -> dict[str, tuple[str, list[Any]]]:
    """Each list's mode and unpickled elements in one subtask's snapshot (for readers such
    as the state processor; a restore goes through `redistribute`).

    >>> store = OperatorListStateStore()
    >>> store.get_union_list_state(ListStateDescriptor("offsets")).update([3, 5])
    >>> decode_lists(store.snapshot(parallelism=1))
    {'offsets': ('union', [3, 5])}
    """
    lists = {}
    for name, entry in _checked(state)["lists"].items():
        mode, elements = entry.get("mode"), entry.get("elements")
        if mode not in (SPLIT, UNION) or not isinstance(elements, list):
            raise StateRestoreError(f"operator state {name!r} is malformed: {entry!r:.200}")
        lists[name] = (mode, _unpickled(name, elements))
    return lists


def _unpickled(name: str, pickled: Sequence[bytes]) -> list[Any]:
    values = []
    for index, data in enumerate(pickled):
        try:
            values.append(pickle.loads(data))
        except Exception as error:
            raise StateRestoreError(
                f"element {index} of operator state {name!r} cannot be unpickled: {error!r}"
            ) from error
    return values


def _checked(state: Any) -> dict[str, Any]:
    if (
        not isinstance(state, dict)
        or state.get("version") != LIST_STATE_VERSION
        or not isinstance(state.get("parallelism"), int)
        or not isinstance(state.get("lists"), dict)
    ):
        version = state.get("version") if isinstance(state, dict) else None
        raise StateRestoreError(
            f"unknown operator list state (version {version!r}; this barrierflow reads "
            f"version {LIST_STATE_VERSION}): {state!r:.200}"
        )
    return state
