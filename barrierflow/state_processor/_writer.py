"""Writing a savepoint from tables: each keyed state's entries split into key groups by the
runtime's stable hash, encoded by the heap backend and timer service themselves.

Because keys are re-split on write, a written savepoint restores into a job of any
parallelism, and copying operators from a snapshot taken with another max
parallelism moves them to the writer's.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from barrierflow import _envelope, _fs
from barrierflow._clock import SystemClock
from barrierflow.checkpoint import subtask_state_file
from barrierflow.checkpoint.metadata import METADATA_SCHEMA
from barrierflow.checkpoint.storage import METADATA, METADATA_KIND
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.operators.broadcast import broadcast_operator_state
from barrierflow.runtime.timers import InternalTimerService, Timer
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.broadcast_state import encode_broadcast_maps
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import (
    DEFAULT_MAX_PARALLELISM,
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from barrierflow.state.operator_list_state import (
    SPLIT,
    UNION,
    OperatorListStateStore,
    even_split_part,
)
from barrierflow.state.operator_state import encode_operator_state
from barrierflow.state_processor import _frames
from barrierflow.state_processor._snapshot import Snapshot, TimerEntry, load

__all__ = ["KINDS", "SavepointWriter"]

KINDS = ("value", "list", "map")
"""The keyed state kinds a savepoint holds."""

_Entry = tuple[Any, Any, Any]
"""(key, user key or None, value)."""


@dataclass
class _NamedList:
    """One list of operator list state to write."""

    mode: str
    per_subtask: list[list[Any]]
    """Elements per subtask; when `whole`, the one list to spread over the subtasks."""
    whole: bool = False


@dataclass
class _Operator:
    name: str
    parallelism: int | None = None
    states: dict[str, tuple[str, list[_Entry]]] = field(default_factory=dict)
    operator_state: list[Any] | None = None
    """One value per subtask index, or None."""
    list_states: dict[str, _NamedList] = field(default_factory=dict)
    """A user function's operator list state by name; when set, it is the operator's
    operator state."""
    timers: list[TimerEntry] = field(default_factory=list)
    broadcast: dict[str, dict[Any, Any]] | None = None
    """A broadcast operator's maps by name (every subtask gets a copy), or None."""


class SavepointWriter:
    """Builds a savepoint folder: operators copied from snapshots and states from tables.

    Guarantees: the folder is a savepoint in today's format (`_metadata` written
    last), which a job restores at any parallelism with this max parallelism; keys
    land in the key groups the runtime computes (`stable_hash`). Assumes values are
    picklable and operator state msgpack-able (docs/savepoint-format.md).

    >>> import tempfile
    >>> folder = tempfile.mkdtemp() + "/bootstrap"
    >>> written = (
    ...     SavepointWriter(max_parallelism=128)
    ...     .with_keyed_state("count", "reduce", {"ant": ("ant", 1000), "bee": ("bee", 7)})
    ...     .write(folder)
    ... )
    >>> sorted((e.key, e.value) for e in written.keyed_entries("count", "reduce"))
    [('ant', ('ant', 1000)), ('bee', ('bee', 7))]
    """

    def __init__(
        self, max_parallelism: int = DEFAULT_MAX_PARALLELISM, *, job_name: str = "state-processor"
    ) -> None:
        if max_parallelism < 1:
            raise ConfigurationError(f"max_parallelism must be at least 1, got {max_parallelism}")
        self.max_parallelism = max_parallelism
        self.job_name = job_name
        self._operators: dict[str, _Operator] = {}

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot | str | os.PathLike[str]) -> SavepointWriter:
        """A writer holding every operator of `snapshot` (a Snapshot or its path): the start
        of modifying one state and writing the rest unchanged."""
        snapshot = snapshot if isinstance(snapshot, Snapshot) else load(snapshot)
        writer = cls(snapshot.max_parallelism, job_name=snapshot.job_name or "state-processor")
        return writer.with_operator_of(snapshot)

    def with_operator_of(self, snapshot: Snapshot, *uids: str) -> SavepointWriter:
        """Copy operators `uids` (all if none) of `snapshot`: keyed state, operator state,
        timers and parallelism."""
        for uid in uids or snapshot.uids():
            info = snapshot.operator(uid)
            operator = _Operator(info.name, info.parallelism)
            for state in info.states:
                entries = [
                    (e.key, e.user_key, e.value) for e in snapshot.keyed_entries(uid, state.name)
                ]
                operator.states[state.name] = (state.kind, entries)
            copies = snapshot.broadcast_copies(uid)
            if copies:
                operator.broadcast = copies[0][1]
            if info.list_states:
                for subtask, lists in snapshot._decoded_lists(uid):
                    for list_name, (mode, values) in lists.items():
                        named = operator.list_states.setdefault(list_name, _NamedList(mode, []))
                        per_subtask = named.per_subtask
                        per_subtask.extend([] for _ in range(subtask + 1 - len(per_subtask)))
                        per_subtask[subtask] = values
            elif info.has_operator_state and not copies:
                by_subtask = dict(snapshot.operator_state_entries(uid))
                operator.operator_state = [by_subtask.get(i) for i in range(max(by_subtask) + 1)]
            operator.timers = list(snapshot.timer_entries(uid))
            self._operators[uid] = operator
        return self

    def with_keyed_state(
        self,
        uid: str,
        state_name: str,
        data: Any,
        kind: str = "value",
        *,
        name: str | None = None,
        parallelism: int | None = None,
    ) -> SavepointWriter:
        """Set keyed state `state_name` of operator `uid` to `data`, replacing what it held.

        `data` is a Spark DataFrame with columns key and value (map state: also
        user_key, or namespace for a window operator's state), a dict of key -> value,
        or an iterable of (key, value) / (key, user key, value) tuples. `kind` is
        "value", "list" (value: a list) or "map".
        """
        if kind not in KINDS:
            raise ConfigurationError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        operator = self._operator(uid, name, parallelism)
        operator.states[state_name] = (kind, list(_entries(data, kind)))
        return self

    def with_operator_state(
        self,
        uid: str,
        values: Any,
        *,
        name: str | None = None,
    ) -> SavepointWriter:
        """Set operator `uid`'s operator state: one msgpack-able value per subtask (a list,
        or a DataFrame with columns subtask and state)."""
        if _is_frame(values):
            by_subtask = dict(_frames.frame_rows(values, ["subtask", "state"]))
            values = [by_subtask.get(i) for i in range(max(by_subtask, default=-1) + 1)]
        operator = self._operator(uid, name, None)
        operator.operator_state = list(values)
        operator.list_states.clear()
        operator.broadcast = None
        return self

    def with_broadcast_state(
        self,
        uid: str,
        state_name: str,
        data: Any,
        *,
        name: str | None = None,
        parallelism: int | None = None,
    ) -> SavepointWriter:
        """Set broadcast state `state_name` of operator `uid` (a (Keyed)BroadcastProcess
        Function's, whose `MapStateDescriptor` has that name) to `data`, replacing what it
        held; its other broadcast states and its function's list state stay. Every subtask
        gets a copy, as every running subtask holds one.

        `data` is a Spark DataFrame with columns key and value (what
        `Snapshot.broadcast_state` reads), a dict, or an iterable of (key, value).

        >>> import tempfile
        >>> folder = tempfile.mkdtemp() + "/bootstrap"
        >>> written = (
        ...     SavepointWriter()
        ...     .with_broadcast_state("rules", "thresholds", {"cpu": 90}, parallelism=2)
        ...     .write(folder)
        ... )
        >>> [(e.state_name, e.key, e.value) for e in written.broadcast_entries("rules")]
        [('thresholds', 'cpu', 90)]
        >>> written.operator("rules").broadcast_states
        (BroadcastStateInfo(name='thresholds', entries=1, subtasks=2),)
        """
        operator = self._operator(uid, name, parallelism)
        if operator.operator_state is not None:
            raise ConfigurationError(
                f"operator {uid!r} holds operator state that is not a broadcast operator's "
                "(a source's or sink's); it cannot also hold broadcast state"
            )
        if _is_frame(data):
            data = _frames.frame_rows(data, ["key", "value"])
        elif isinstance(data, Mapping):
            data = data.items()
        mapping = {}
        for row in data:
            row = tuple(row)
            if len(row) != 2:
                raise ConfigurationError(f"broadcast state rows are (key, value), got {row!r}")
            mapping[row[0]] = row[1]
        if operator.broadcast is None:
            operator.broadcast = {}
        operator.broadcast[state_name] = mapping
        return self

    def with_operator_list_state(
        self,
        uid: str,
        state_name: str,
        data: Any,
        mode: str = SPLIT,
        *,
        name: str | None = None,
    ) -> SavepointWriter:
        """Set list `state_name` of the operator list state of operator `uid`'s user function
        (a `CheckpointedFunction`), replacing what it held; its other lists stay.

        `data` is a Spark DataFrame with columns subtask and value (rows with another
        state_name, when the column is there, are left out: the shape
        `Snapshot.operator_list_state` reads), a dict of subtask -> elements, or an
        iterable of elements, cut into contiguous near-equal parts over the written
        subtasks. `mode` is "split" (the function calls `get_list_state`) or "union"
        (`get_union_list_state`). A restore redistributes the elements over the job's
        parallelism as the mode says (docs/savepoint-format.md, § 5).

        >>> import tempfile
        >>> folder = tempfile.mkdtemp() + "/bootstrap"
        >>> written = (
        ...     SavepointWriter()
        ...     .with_operator_list_state("numbering", "seen", {0: [3], 1: [4, 5]})
        ...     .write(folder)
        ... )
        >>> [(e.subtask, e.value) for e in written.operator_list_entries("numbering", "seen")]
        [(0, 3), (1, 4), (1, 5)]
        """
        if mode not in (SPLIT, UNION):
            raise ConfigurationError(f'mode must be "split" or "union", got {mode!r}')
        operator = self._operator(uid, name, None)
        if operator.operator_state is not None:
            raise ConfigurationError(
                f"operator {uid!r} holds operator state that is not a function's list state "
                "(a source's or sink's); it cannot also hold operator list state"
            )
        operator.list_states[state_name] = _list_elements(data, state_name, mode)
        return self

    def without_operator(self, uid: str) -> SavepointWriter:
        """Leave operator `uid` out of the savepoint."""
        self._operators.pop(uid, None)
        return self

    def _operator(self, uid: str, name: str | None, parallelism: int | None) -> _Operator:
        operator = self._operators.setdefault(uid, _Operator(name or uid))
        if name is not None:
            operator.name = name
        if parallelism is not None:
            operator.parallelism = parallelism
        return operator

    # ---- writing ----------------------------------------------------------------------------

    def write(self, path: str | os.PathLike[str], *, checkpoint_id: int = 0) -> Snapshot:
        """Write the savepoint folder `path` (it must not hold a `_metadata` yet); returns it
        loaded."""
        folder = _fs.location(path)
        target = folder.child(METADATA)
        if _fs.exists(target):
            raise ConfigurationError(f"{target} exists: will not overwrite a snapshot")
        _fs.make_dirs(folder)
        token = secrets.token_hex(6)
        operators: dict[str, Any] = {}
        for index, (uid, operator) in enumerate(sorted(self._operators.items())):
            if operator.list_states:
                operator = replace(operator, operator_state=_list_state_snapshots(operator))
            if operator.broadcast is not None:
                operator = replace(operator, operator_state=_with_broadcast(operator))
            parallelism = max(operator.parallelism or 1, len(operator.operator_state or ()))
            subtasks = self._write_operator(folder, index, token, uid, operator, parallelism)
            if subtasks:
                operators[uid] = {
                    "name": operator.name,
                    "parallelism": parallelism,
                    "subtasks": subtasks,
                }
        metadata = {
            "schema": METADATA_SCHEMA,
            "checkpoint_id": checkpoint_id,
            "timestamp": SystemClock().epoch_millis(),
            "job_name": self.job_name,
            "is_final": False,
            "is_savepoint": True,
            "max_parallelism": self.max_parallelism,
            "operators": operators,
        }
        _fs.write_atomic(target, _envelope.encode(METADATA_KIND, metadata))
        return load(folder.uri)

    def _write_operator(
        self,
        folder: _fs.Location,
        index: int,
        token: str,
        uid: str,
        operator: _Operator,
        parallelism: int,
    ) -> list[dict[str, Any]]:
        operator_state = operator.operator_state or []
        keyed_parallelism = min(parallelism, self.max_parallelism)
        keyed = self._split_keyed(operator, keyed_parallelism)
        timers = self._split_timers(operator, keyed_parallelism)
        subtasks = []
        for subtask in range(parallelism):
            if subtask < keyed_parallelism:
                key_groups = key_group_range_for_subtask(
                    self.max_parallelism, keyed_parallelism, subtask
                )
            else:  # operator state of more subtasks than there are key groups
                key_groups = KeyGroupRange.empty()
            state = operator_state[subtask] if subtask < len(operator_state) else None
            sections = subtask_state_file.OperatorSections(
                keyed=keyed[subtask] if subtask < len(keyed) else None,
                operator=None if state is None else encode_operator_state(state),
                timers=timers[subtask] if subtask < len(timers) else None,
            )
            if sections == subtask_state_file.OperatorSections():
                continue
            file = subtask_state_file.state_file_name(index, subtask, f"sp-{token}")
            encoded = subtask_state_file.encode(
                file, index, subtask, (key_groups.start, key_groups.end), {uid: sections}, None
            )
            assert encoded is not None
            data, handle = encoded
            _fs.write_bytes(folder.child(file), data)
            stored = handle.operators[uid]
            subtasks.append(
                {
                    "subtask": subtask,
                    "file": file,
                    "key_group_range": [key_groups.start, key_groups.end],
                    "keyed": None if stored.keyed is None else list(stored.keyed),
                    "operator": None if stored.operator is None else list(stored.operator),
                    "timers": None if stored.timers is None else list(stored.timers),
                }
            )
        return subtasks

    def _split_keyed(self, operator: _Operator, parallelism: int) -> list[bytes | None]:
        if not operator.states:
            return []
        backends = [
            HeapKeyedStateBackend(
                key_group_range_for_subtask(self.max_parallelism, parallelism, i),
                self.max_parallelism,
            )
            for i in range(parallelism)
        ]
        for state_name, (kind, entries) in operator.states.items():
            handles = [_state(backend, state_name, kind) for backend in backends]
            for key, user_key, value in entries:
                group = assign_to_key_group(key, self.max_parallelism)
                subtask = subtask_for_key_group(self.max_parallelism, parallelism, group)
                backends[subtask].set_current_key(key)
                handle = handles[subtask]
                if kind == "map":
                    handle.put(user_key, value)
                elif kind == "list":
                    handle.add_all(list(value))
                else:
                    handle.update(value)
        # A savepoint holds the canonical keyed-state envelope (docs/savepoint-format.md).
        return [canonical_bytes(backend) for backend in backends]

    def _split_timers(self, operator: _Operator, parallelism: int) -> list[bytes | None]:
        if not operator.timers:
            return []
        services = [
            InternalTimerService(
                key_group_range_for_subtask(self.max_parallelism, parallelism, i),
                self.max_parallelism,
                _NoCallbacks(),
            )
            for i in range(parallelism)
        ]
        for timer in operator.timers:
            group = assign_to_key_group(timer.key, self.max_parallelism)
            service = services[subtask_for_key_group(self.max_parallelism, parallelism, group)]
            if timer.domain == "event_time":
                service.register_event_time_timer(timer.key, timer.namespace, timer.timestamp)
            else:
                service.register_processing_time_timer(timer.key, timer.namespace, timer.timestamp)
        return [
            service.snapshot()
            if service.num_event_time_timers() or service.num_processing_time_timers()
            else None
            for service in services
        ]


def _with_broadcast(operator: _Operator) -> list[Any]:
    """Each subtask's operator state of a broadcast operator: the same copy of the maps,
    beside the function's list state of that subtask (if any)."""
    assert operator.broadcast is not None
    function_states = operator.operator_state or []
    copy = encode_broadcast_maps(operator.broadcast)
    parallelism = max(operator.parallelism or 1, len(function_states))
    return [
        broadcast_operator_state(
            copy, function_states[subtask] if subtask < len(function_states) else None
        )
        for subtask in range(parallelism)
    ]


def _list_state_snapshots(operator: _Operator) -> list[Any]:
    """One operator list state snapshot per subtask, encoded by the runtime's own store."""
    parallelism = max(
        [operator.parallelism or 1]
        + [len(named.per_subtask) for named in operator.list_states.values() if not named.whole]
    )
    snapshots = []
    for subtask in range(parallelism):
        store = OperatorListStateStore()
        for state_name, named in operator.list_states.items():
            descriptor = ListStateDescriptor(state_name)
            state = (
                store.get_union_list_state(descriptor)
                if named.mode == UNION
                else store.get_list_state(descriptor)
            )
            per_subtask = named.per_subtask
            if named.whole:
                state.update(even_split_part(per_subtask, subtask, parallelism))
            elif subtask < len(per_subtask):
                state.update(per_subtask[subtask])
        snapshots.append(store.snapshot(parallelism))
    return snapshots


def _list_elements(data: Any, state_name: str, mode: str) -> _NamedList:
    """The elements per subtask of `data` (see `with_operator_list_state`)."""
    if _is_frame(data):
        rows: Iterable[tuple[Any, ...]]
        if "state_name" in data.columns:
            rows = (
                (subtask, value)
                for name, subtask, value in _frames.frame_rows(
                    data, ["state_name", "subtask", "value"]
                )
                if name == state_name
            )
        else:
            rows = _frames.frame_rows(data, ["subtask", "value"])
        by_subtask: dict[int, list[Any]] = {}
        for subtask, value in rows:
            by_subtask.setdefault(int(subtask), []).append(value)
        data = by_subtask
    if isinstance(data, Mapping):
        if any(not isinstance(k, int) or k < 0 for k in data):
            raise ConfigurationError(
                f"operator list state by subtask needs subtask indexes >= 0, got {list(data)}"
            )
        per_subtask: list[list[Any]] = [[] for _ in range(max(data, default=-1) + 1)]
        for subtask, values in data.items():
            per_subtask[subtask] = list(values)
        return _NamedList(mode, per_subtask)
    return _NamedList(mode, [list(data)], whole=True)


class _NoCallbacks:
    """Timers are only registered and snapshotted here, never fired."""

    def on_event_time(self, timer: Timer) -> None:
        raise AssertionError("a savepoint writer fires no timers")

    on_processing_time = on_event_time


def _state(backend: HeapKeyedStateBackend, name: str, kind: str) -> Any:
    if kind == "map":
        return backend.get_map_state(MapStateDescriptor(name))
    if kind == "list":
        return backend.get_list_state(ListStateDescriptor(name))
    return backend.get_value_state(ValueStateDescriptor(name))


def _is_frame(data: Any) -> bool:
    return hasattr(data, "toLocalIterator") and hasattr(data, "schema")


def _entries(data: Any, kind: str) -> Iterable[_Entry]:
    """(key, user key, value) triples of `data` (see `with_keyed_state`)."""
    if _is_frame(data):
        if kind == "map":
            inner = "user_key" if "user_key" in data.columns else "namespace"
            yield from _frames.frame_rows(data, ["key", inner, "value"])
        else:
            for key, value in _frames.frame_rows(data, ["key", "value"]):
                yield key, None, value
        return
    if isinstance(data, Mapping):
        data = data.items()
    for row in data:
        row = tuple(row)
        if kind == "map":
            if len(row) != 3:
                raise ConfigurationError(f"map state rows are (key, user key, value), got {row!r}")
            yield row[0], row[1], row[2]
        else:
            if len(row) != 2:
                raise ConfigurationError(f"{kind} state rows are (key, value), got {row!r}")
            yield row[0], None, row[1]
