"""A savepoint or checkpoint read as plain Python: its operators, and the entries of their
keyed state, operator state and timers (docs/savepoint-format.md, no Spark needed).

The reader follows the documented format rather than restoring a backend: every
envelope's version is checked, keyed state is read key group by key group, and
every error names the file it came from.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from barrierflow import _envelope, _fs
from barrierflow.checkpoint.files import read_checkpoint_file
from barrierflow.checkpoint.metadata import METADATA_SCHEMA
from barrierflow.checkpoint.storage import METADATA, METADATA_KIND
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.operators.broadcast import split_broadcast_operator_state
from barrierflow.runtime.timers import SNAPSHOT_KIND as TIMERS_KIND
from barrierflow.runtime.timers.changelog import MANIFEST_KIND as TIMERS_CHANGELOG_KIND
from barrierflow.runtime.timers.changelog import (
    changelog_to_canonical as timers_changelog_to_canonical,
)
from barrierflow.state.broadcast_state import decode_broadcast_maps
from barrierflow.state.heap_backend import KEYED_STATE, decode_key_group
from barrierflow.state.key_scope import check_keyed_header_version
from barrierflow.state.operator_list_state import decode_lists, is_list_state
from barrierflow.state.operator_state import decode_operator_state
from barrierflow.state.rocksdb_encoding import NATIVE_KIND, section_kind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BroadcastEntry",
    "BroadcastStateInfo",
    "KeyedEntry",
    "ListStateInfo",
    "OperatorInfo",
    "OperatorListEntry",
    "Snapshot",
    "StateInfo",
    "TimerEntry",
    "load",
]

WINDOW_STATES = frozenset({"window-contents", "merging-window-set"})
"""State names only a window operator writes; an operator holding one keeps its map states
per (key, namespace = window), so they read as namespaced by default."""

_TIMERS_VERSION = 1


@dataclass(frozen=True)
class StateInfo:
    """One keyed state of an operator: its name and kind ("value", "list" or "map")."""

    name: str
    kind: str


@dataclass(frozen=True)
class ListStateInfo:
    """One named list of a user function's operator list state (`CheckpointedFunction`)."""

    name: str
    mode: str
    """"split" (`get_list_state`) or "union" (`get_union_list_state`)."""
    elements: int
    """Its elements over all subtasks."""
    subtasks: int
    """The subtasks that stored the list."""


@dataclass(frozen=True)
class BroadcastStateInfo:
    """One broadcast state of a (Keyed)BroadcastProcessFunction's operator: a map every
    subtask holds a copy of."""

    name: str
    entries: int
    """Its entries (in one copy: every subtask's copy is the same)."""
    subtasks: int
    """The subtasks that stored a copy."""


@dataclass(frozen=True)
class OperatorInfo:
    """One operator of a snapshot, as `_metadata` and the keyed-state headers describe it."""

    uid: str
    name: str
    parallelism: int
    """The operator's parallelism when the snapshot was taken."""
    states: tuple[StateInfo, ...]
    """Its keyed states, by name."""
    keyed_bytes: int
    operator_bytes: int
    timer_bytes: int
    has_operator_state: bool
    list_states: tuple[ListStateInfo, ...] = ()
    """Its user function's operator list state, by name (empty: none)."""
    broadcast_states: tuple[BroadcastStateInfo, ...] = ()
    """Its broadcast states, by name (empty: no broadcast operator)."""

    @property
    def namespaced(self) -> bool:
        """Whether its map states hold one value per (key, namespace): a window operator's."""
        return any(state.name in WINDOW_STATES for state in self.states)


@dataclass(frozen=True)
class KeyedEntry:
    """One entry of a keyed state: a value per key, or per (key, user key) of map state."""

    key_group: int
    key: Any
    user_key: Any
    """The map key of map state; None for value and list state."""
    value: Any


@dataclass(frozen=True)
class OperatorListEntry:
    """One element of a named list of operator list state, as subtask `subtask` stored it."""

    state_name: str
    subtask: int
    mode: str
    value: Any


@dataclass(frozen=True)
class BroadcastEntry:
    """One entry of a broadcast state's map, from the copy of the lowest subtask."""

    state_name: str
    key: Any
    value: Any


@dataclass(frozen=True)
class TimerEntry:
    """One registered timer: `domain` is "event_time" or "processing_time"."""

    key_group: int
    domain: str
    timestamp: int
    key: Any
    namespace: Any


def load(path: str | os.PathLike[str]) -> Snapshot:
    """The snapshot at `path`: a savepoint or `chk-N` folder, or its `_metadata` file.

    Raises StateRestoreError (missing, damaged, or written by a newer barrierflow) or
    CheckpointStorageError (the storage cannot be read), each naming the file.

    >>> load("/no/such/savepoint")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    barrierflow.errors.StateRestoreError: cannot read the 'checkpoint-metadata' file \
file:///no/such/savepoint/_metadata: it is missing ...
    """
    where = _fs.location(path).without_trailing_slash()
    folder = where.parent if where.name == METADATA else where
    metadata_file = folder.child(METADATA)
    header, _ = read_checkpoint_file(metadata_file, METADATA_KIND)
    if not isinstance(header, dict) or not isinstance(header.get("operators"), dict):
        raise StateRestoreError(f"{metadata_file}: not checkpoint metadata (no operators map)")
    schema = header.get("schema")
    if not isinstance(schema, int) or not 1 <= schema <= METADATA_SCHEMA:
        raise StateRestoreError(
            f"{metadata_file}: metadata schema {schema!r}; this barrierflow reads schemas 1 "
            f"to {METADATA_SCHEMA}"
        )
    return Snapshot(folder, header)


class Snapshot:
    """The state of one savepoint or checkpoint, read lazily, each state file once.

    Guarantees: every entry it yields is what the job restores (the same key
    groups, values and timers); assumes the files are not changed while it reads.
    """

    def __init__(self, folder: _fs.Location, metadata: dict[str, Any]) -> None:
        self.folder = folder
        self.metadata = metadata
        self._files = SubtaskStateReader()

    # ---- what the metadata says -------------------------------------------------------------

    @property
    def path(self) -> str:
        """The folder's URI."""
        return self.folder.uri

    @property
    def checkpoint_id(self) -> int:
        return int(self.metadata["checkpoint_id"])

    @property
    def is_savepoint(self) -> bool:
        return bool(self.metadata.get("is_savepoint", False))

    @property
    def job_name(self) -> str:
        return str(self.metadata.get("job_name", ""))

    @property
    def max_parallelism(self) -> int:
        return int(self.metadata["max_parallelism"])

    def uids(self) -> list[str]:
        """The uids of the operators holding state, sorted."""
        return sorted(self.metadata["operators"])

    def operators(self) -> list[OperatorInfo]:
        """Every operator holding state, by uid."""
        return [self.operator(uid) for uid in self.uids()]

    def operator(self, uid: str) -> OperatorInfo:
        """The operator `uid`; KeyError naming the uids there are if it holds no state."""
        stored = self._stored(uid)
        sizes = {"keyed": 0, "operator": 0, "timers": 0}
        for entry in stored["subtasks"]:
            for part in sizes:
                section = entry.get(part)
                if section is not None:
                    sizes[part] += int(section[1])
        states: dict[str, str] = {}
        for header, _body, _file in self._keyed_sections(uid):
            for name, kind in header["states"]:
                states.setdefault(name, kind)
        lists: dict[str, ListStateInfo] = {}
        for _subtask, decoded in self._decoded_lists(uid):
            for name, (mode, values) in decoded.items():
                known = lists.get(name, ListStateInfo(name, mode, 0, 0))
                lists[name] = ListStateInfo(
                    name, mode, known.elements + len(values), known.subtasks + 1
                )
        copies = self._broadcast_maps(uid)
        broadcast = tuple(
            BroadcastStateInfo(name, len(mapping), len(copies))
            for name, mapping in (copies[0][1].items() if copies else ())
        )
        return OperatorInfo(
            uid=uid,
            name=str(stored.get("name", "")),
            parallelism=int(stored.get("parallelism", len(stored["subtasks"]))),
            states=tuple(StateInfo(name, kind) for name, kind in states.items()),
            keyed_bytes=sizes["keyed"],
            operator_bytes=sizes["operator"],
            timer_bytes=sizes["timers"],
            has_operator_state=any(e.get("operator") is not None for e in stored["subtasks"]),
            list_states=tuple(lists.values()),
            broadcast_states=broadcast,
        )

    def state_info(self, uid: str, state_name: str) -> StateInfo:
        """The keyed state `state_name` of `uid`; KeyError naming the states there are."""
        states = {state.name: state for state in self.operator(uid).states}
        if state_name not in states:
            raise KeyError(
                f"operator {uid!r} has no keyed state {state_name!r}; it has "
                f"{', '.join(sorted(states)) or 'none'}"
            )
        return states[state_name]

    def _stored(self, uid: str) -> dict[str, Any]:
        operators = self.metadata["operators"]
        if uid not in operators:
            raise KeyError(
                f"{self.path} holds no state of operator {uid!r}; it holds "
                f"{', '.join(sorted(operators)) or 'none'}"
            )
        return operators[uid]

    # ---- keyed state ------------------------------------------------------------------------

    def keyed_entries(self, uid: str, state_name: str) -> Iterator[KeyedEntry]:
        """Every entry of keyed state `state_name` of `uid`, by key group.

        Value state: one entry per key; list state: one per key, the value a list;
        map state: one per (key, user key).
        """
        kind = self.state_info(uid, state_name).kind
        for header, body, file in self._keyed_sections(uid):
            names = [name for name, _ in header["states"]]
            if state_name not in names:
                continue
            position = names.index(state_name)
            for key_group, per_state in self._key_groups(header, body, file):
                entries = per_state[position]
                for key, value in entries.items():
                    if kind == "map":
                        for user_key, item in value.items():
                            yield KeyedEntry(key_group, key, user_key, item)
                    else:
                        yield KeyedEntry(key_group, key, None, value)

    def key_count(self, uid: str, state_name: str) -> int:
        """How many keys have a value in state `state_name` of `uid`."""
        return len({(e.key_group, _hashable(e.key)) for e in self.keyed_entries(uid, state_name)})

    def values_of_key(self, uid: str, key: Any) -> dict[str, Any]:
        """Every keyed state's value for `key` in `uid` (map state: a dict), absent states left
        out."""
        found: dict[str, Any] = {}
        for state in self.operator(uid).states:
            for entry in self.keyed_entries(uid, state.name):
                if entry.key != key:
                    continue
                if state.kind == "map":
                    found.setdefault(state.name, {})[entry.user_key] = entry.value
                else:
                    found[state.name] = entry.value
        return found

    def _keyed_sections(self, uid: str) -> Iterator[tuple[dict[str, Any], memoryview, str]]:
        """(header, body, file URI) of each keyed-state snapshot of `uid`."""
        for entry in self._stored(uid)["subtasks"]:
            section = entry.get("keyed")
            if section is None:
                continue
            uri, data = self._section(entry, section)
            try:
                if section_kind(data) == NATIVE_KIND:  # a RocksDB checkpoint's own files
                    data = self._native_as_canonical(uri, section, data)
                elif section_kind(data) == "heap-changelog":  # heap base + deltas in shared/
                    from barrierflow.state.heap_changelog import changelog_to_canonical

                    data = changelog_to_canonical(data, self.folder)
                header, body = _envelope.decode(data, KEYED_STATE)
            except StateRestoreError as error:
                raise StateRestoreError(f"{uri}: keyed state of {uid!r}: {error}") from error
            _check_keyed_header(header, uri, self.max_parallelism)
            yield header, body, uri

    def _native_as_canonical(self, uri: str, section: list[int], data: bytes) -> bytes:
        """A RocksDB checkpoint's keyed section read as the canonical one (once per section:
        its files are downloaded)."""
        from barrierflow.state.rocksdb_backend import native_to_canonical

        cache = self.__dict__.setdefault("_canonical_sections", {})
        cache_key = (uri, *section)
        if cache_key not in cache:
            cache[cache_key] = native_to_canonical(data, self.folder)
        return cache[cache_key]

    def _key_groups(
        self, header: dict[str, Any], body: memoryview, uri: str
    ) -> Iterator[tuple[int, list[dict[Any, Any]]]]:
        names = [name for name, _ in header["states"]]
        for key_group, (offset, length) in sorted(
            (int(g), s) for g, s in header["key_groups"].items()
        ):
            try:
                per_state = decode_key_group(body, key_group, offset, length, names)
            except StateRestoreError as error:
                raise StateRestoreError(f"{uri}: {error}") from error
            yield key_group, per_state

    # ---- operator state and timers ----------------------------------------------------------

    def operator_state_entries(self, uid: str) -> list[tuple[int, Any]]:
        """(subtask index, value) of the operator state each subtask of `uid` stored."""
        return [(subtask, value) for subtask, _uri, value in self._operator_states(uid)]

    def _operator_states(self, uid: str) -> list[tuple[int, str, Any]]:
        """(subtask index, file URI, value) of each subtask's operator state, by subtask."""
        result = []
        for entry in self._stored(uid)["subtasks"]:
            section = entry.get("operator")
            if section is None:
                continue
            uri, data = self._section(entry, section)
            try:
                result.append((int(entry["subtask"]), uri, decode_operator_state(data)))
            except StateRestoreError as error:
                raise StateRestoreError(f"{uri}: operator state of {uid!r}: {error}") from error
        return sorted(result, key=lambda item: item[0])

    def operator_list_entries(
        self, uid: str, state_name: str | None = None
    ) -> Iterator[OperatorListEntry]:
        """Every element of `uid`'s operator list state (all lists, or list `state_name`),
        subtask by subtask in stored order (docs/savepoint-format.md, § 5)."""
        for subtask, lists in self._decoded_lists(uid):
            for name, (mode, values) in lists.items():
                if state_name is None or name == state_name:
                    for item in values:
                        yield OperatorListEntry(name, subtask, mode, item)

    def _decoded_lists(self, uid: str) -> Iterator[tuple[int, dict[str, tuple[str, list[Any]]]]]:
        """(subtask, its lists) of every subtask whose operator state is list state."""
        for subtask, uri, value in self._operator_states(uid):
            parts = split_broadcast_operator_state(value)
            if parts is not None:  # a broadcast operator's function keeps its lists inside
                value = parts[1]
            if not is_list_state(value):
                continue
            try:
                yield subtask, decode_lists(value)
            except StateRestoreError as error:
                raise StateRestoreError(
                    f"{uri}: operator list state of {uid!r}: {error}"
                ) from error

    def broadcast_entries(
        self, uid: str, state_name: str | None = None
    ) -> Iterator[BroadcastEntry]:
        """Every entry of `uid`'s broadcast states (all, or `state_name`), read from the copy
        of its lowest subtask, as Flink's state processor reads one copy: every subtask saw
        every broadcast element, so the copies are the same. KeyError naming the broadcast
        states there are for an unknown `state_name`."""
        copies = self._broadcast_maps(uid)
        maps = copies[0][1] if copies else {}
        if state_name is not None and state_name not in maps:
            raise KeyError(
                f"operator {uid!r} has no broadcast state {state_name!r}; it has "
                f"{', '.join(sorted(maps)) or 'none'}"
            )
        for name, mapping in maps.items():
            if state_name is None or name == state_name:
                for key, value in mapping.items():
                    yield BroadcastEntry(name, key, value)

    def broadcast_copies(self, uid: str) -> list[tuple[int, dict[str, dict[Any, Any]]]]:
        """(subtask, its broadcast maps by name, sorted) of every subtask of `uid` that
        stored a copy, by subtask."""
        return self._broadcast_maps(uid)

    def _broadcast_maps(self, uid: str) -> list[tuple[int, dict[str, dict[Any, Any]]]]:
        copies = []
        for subtask, uri, value in self._operator_states(uid):
            parts = split_broadcast_operator_state(value)
            if parts is None:
                continue
            try:
                maps = decode_broadcast_maps(parts[0])
                copies.append((subtask, {name: maps[name] for name in sorted(maps)}))
            except StateRestoreError as error:
                raise StateRestoreError(f"{uri}: broadcast state of {uid!r}: {error}") from error
        return copies

    def timer_entries(self, uid: str) -> Iterator[TimerEntry]:
        """Every timer of `uid`, by key group, event time first."""
        for entry in self._stored(uid)["subtasks"]:
            section = entry.get("timers")
            if section is None:
                continue
            uri, data = self._section(entry, section)
            try:
                if section_kind(data) == TIMERS_CHANGELOG_KIND:  # base + deltas in shared/
                    data = timers_changelog_to_canonical(data, self.folder)
                yield from _timers(data, self.max_parallelism)
            except StateRestoreError as error:
                raise StateRestoreError(f"{uri}: timers of {uid!r}: {error}") from error

    # ---- as Spark DataFrames ----------------------------------------------------------------

    def keyed_state(
        self, spark: SparkSession, uid: str, state_name: str, *, namespaced: bool | None = None
    ) -> DataFrame:
        """Keyed state `state_name` of `uid` as a DataFrame (columns: see the package guide).

        Value and list state: key, namespace, value (list state: value is the array of
        the key's elements). Map state: key, namespace, user_key, value, a row per entry;
        `namespaced` map state (a window operator's, the default when the operator holds
        window state): key, namespace (the map key: the window), value.
        """
        from barrierflow.state_processor._frames import to_frame

        kind = self.state_info(uid, state_name).kind
        if namespaced is None:
            namespaced = self.operator(uid).namespaced
        entries = self.keyed_entries(uid, state_name)
        if kind == "map" and namespaced:
            rows = [(e.key, e.user_key, e.value) for e in entries]
            return to_frame(spark, ["key", "namespace", "value"], rows)
        if kind == "map":
            rows = [(e.key, None, e.user_key, e.value) for e in entries]
            return to_frame(spark, ["key", "namespace", "user_key", "value"], rows)
        return to_frame(
            spark, ["key", "namespace", "value"], [(e.key, None, e.value) for e in entries]
        )

    def operator_state(self, spark: SparkSession, uid: str) -> DataFrame:
        """Operator state of `uid`: columns subtask, state (a row per subtask that stored one)."""
        from barrierflow.state_processor._frames import to_frame

        return to_frame(spark, ["subtask", "state"], self.operator_state_entries(uid))

    def operator_list_state(
        self, spark: SparkSession, uid: str, state_name: str | None = None
    ) -> DataFrame:
        """Operator list state of `uid`'s user function: columns state_name, subtask, value,
        a row per element (of list `state_name` only, when given)."""
        from barrierflow.state_processor._frames import to_frame

        rows = [
            (e.state_name, e.subtask, e.value) for e in self.operator_list_entries(uid, state_name)
        ]
        return to_frame(spark, ["state_name", "subtask", "value"], rows)

    def broadcast_state(self, spark: SparkSession, uid: str, state_name: str) -> DataFrame:
        """Broadcast state `state_name` of `uid`: columns key, value (a row per map entry,
        from one copy; see `broadcast_entries`)."""
        from barrierflow.state_processor._frames import to_frame

        rows = [(e.key, e.value) for e in self.broadcast_entries(uid, state_name)]
        return to_frame(spark, ["key", "value"], rows)

    def timers(self, spark: SparkSession, uid: str) -> DataFrame:
        """Timers of `uid`: columns domain, timestamp, key, namespace."""
        from barrierflow.state_processor._frames import to_frame

        rows = [(t.domain, t.timestamp, t.key, t.namespace) for t in self.timer_entries(uid)]
        return to_frame(spark, ["domain", "timestamp", "key", "namespace"], rows)

    def _section(self, entry: dict[str, Any], section: list[int]) -> tuple[str, bytes]:
        uri = self.folder.child(entry["file"]).uri
        offset, length = section
        return uri, self._files.slice(uri, int(offset), int(length))


def _check_keyed_header(header: Any, uri: str, max_parallelism: int) -> None:
    try:
        check_keyed_header_version(header)
    except StateRestoreError as error:
        raise StateRestoreError(f"{uri}: {error}") from error
    if header.get("max_parallelism") != max_parallelism:
        raise StateRestoreError(
            f"{uri}: keyed state has max parallelism {header.get('max_parallelism')}, the "
            f"metadata {max_parallelism}"
        )


def _timers(data: bytes, max_parallelism: int) -> Iterator[TimerEntry]:
    header, body = _envelope.decode(data, TIMERS_KIND)
    version = header.get("version") if isinstance(header, dict) else None
    if not isinstance(version, int) or not 1 <= version <= _TIMERS_VERSION:
        raise StateRestoreError(
            f"timer snapshot version {version!r}; this barrierflow reads versions 1 to "
            f"{_TIMERS_VERSION}"
        )
    if header.get("max_parallelism") != max_parallelism:
        raise StateRestoreError(f"timers have max parallelism {header.get('max_parallelism')}")
    try:
        for section in header["key_groups"]:
            start, length = section["offset"], section["length"]
            pairs = pickle.loads(body[start : start + length])
            stamps = [("event_time", t) for t in section["event_time"]]
            stamps += [("processing_time", t) for t in section["processing_time"]]
            if len(pairs) != len(stamps):
                raise ValueError(f"key group {section['key_group']}: keys do not match timestamps")
            for (domain, timestamp), (key, namespace) in zip(stamps, pairs, strict=True):
                yield TimerEntry(section["key_group"], domain, timestamp, key, namespace)
    except (KeyError, TypeError, ValueError, pickle.UnpicklingError) as error:
        raise StateRestoreError(f"timer snapshot cannot be read: {error!r}") from error


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
