"""Changelog (incremental) checkpoints of the heap backend: upload what changed, not all.

With `env.enable_changelog_state_backend(True)` (PyFlink's name; Flink's changelog state
backend, Spark's RocksDB changelog checkpointing) the heap backend records, per state and
key group, the keys written, cleared or handed out mutable since the last snapshot (its
`TrackedGroup`), and a checkpoint's `write` uploads into the job folder's `shared/` only
a delta: per key group, each dirty key's value as the snapshot's copy-on-write version
holds it, or a tombstone where it holds none. The checkpoint's keyed section is then a
small "heap-changelog" manifest naming a chain: one base (a full canonical "keyed-state"
envelope, itself a shared file) and the deltas after it, in order, with their sizes:

    {"version": 1, "max_parallelism": 128, "key_group_range": [start, end],
     "states": [[name, kind], ...],
     "base": [name, size],                  # names relative to the job folder
     "deltas": [[name, size], ...],         # oldest first
     "base_entries": n}                     # keys the base holds (optional)

A delta file is a "heap-changelog-delta" envelope with the canonical header's fields
(states, key_groups: {key group: [offset, length]}) and one section per key group
(marshalled or pickled, `heap_sections.encode_whole`): a list with one change per state
of its header, `[keys, values]`, a value None where the key was removed (state never
stores None), and for a map state whose maps changed entry by entry (version 2)
`[keys, values, patched keys, patches]`, each patch `[user keys, their values, removed
user keys]` applied to the key's map (a key in `keys` is written whole). Files of the
first layout, `[{key: value}, [removed key, ...]]`, are still read.

Reuse rule (Flink's, as the RocksDB backend's): a checkpoint references only deltas of
checkpoints that completed (or of a chain restored from this same job folder). The dirty
keys swapped out at a snapshot stay pending until that checkpoint completes, so each delta
holds every change since the last completed checkpoint; an aborted checkpoint's changes
fold into the next delta (`DirtyLog`).

Materialization: a checkpoint writes a new base instead of a delta (from its copy-on-write
version, on the uploader thread) when there is no completed chain yet, the chain was
restored from another job folder (or from other sections than exactly one manifest of this
backend's key-group range), its deltas add up to more than `DELTA_RATIO` times the state's
estimated full size (the state's entries now times the larger of the base's bytes per entry
and the newest delta's, so values that grew since the base count), or it has `MAX_DELTAS`
deltas; but not while an earlier checkpoint that wrote a base is still pending (`base_due`):
the checkpoints meanwhile add deltas to the confirmed chain; nor at a bounded job's final
checkpoint, read only if the job fails before its end. So a restore reads at most a base,
deltas about twice the state, one more delta, and the deltas written while the next base
was pending. Savepoints (`write(None)`) stay canonical.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from barrierflow import _envelope, _fs
from barrierflow.core.state_descriptors import StateKind
from barrierflow.errors import StateRestoreError
from barrierflow.state.changelog_files import chain_files, read_chain_file, upload_shared
from barrierflow.state.heap_backend import KEYED_STATE, decode_key_group
from barrierflow.state.heap_sections import MARSHAL_WHOLE_TAG, encode_whole
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.state.key_scope import (
    KEYED_STATE_VERSION,
    check_header_version,
    check_keyed_header_version,
)

if TYPE_CHECKING:
    from barrierflow.state.heap_backend import HeapKeyedStateSnapshot

CHANGELOG_KIND = "heap-changelog"
"""Envelope kind of a changelog checkpoint's keyed section (the manifest)."""

DELTA_KIND = "heap-changelog-delta"
"""Envelope kind of a delta file in `shared/`."""

CHANGELOG_VERSION = 2
"""2: a delta's map states may hold per-entry patches. Readers take 1 up to this."""

MAX_DELTAS = 32
"""A chain with this many deltas is materialized (a new base) at the next checkpoint."""

DELTA_RATIO = 2
"""A chain whose deltas add up to more than this many times the state's estimated full
size is materialized at the next checkpoint: a restore reads at most about
`1 + DELTA_RATIO` times the state, and a state that changes a quarter of its keys per
checkpoint writes a base about every eighth."""

_NONE: frozenset[Any] = frozenset()
_NO_GROUPS: dict[int, Any] = {}

DirtyKeys = dict[str, dict[int, set[Any]]]
"""Per state name, per key-group index (key group minus the range's start), keys changed."""

DirtyEntries = dict[str, dict[int, dict[Any, set[Any]]]]
"""Per map state name, per key-group index, key -> user keys changed within its map."""


@dataclass(frozen=True)
class Chain:
    """A base and its deltas (names relative to the job folder, sizes), oldest first, in
    the shared folder `folder` (its `folder_key`)."""

    folder: str
    base: tuple[str, int]
    deltas: tuple[tuple[str, int], ...] = ()
    base_entries: int = 0
    """Entries (keys over all states) the base holds; 0: unknown."""
    entry_bytes: float = 0.0
    """Bytes per entry the newest delta wrote, key groups' fixed cost left out; 0: unknown."""

    @property
    def delta_bytes(self) -> int:
        return sum(size for _, size in self.deltas)

    def files(self) -> list[tuple[str, int]]:
        return [self.base, *self.deltas]

    def needs_base(self, folder: str, live_entries: int = 0) -> bool:
        """Whether the next checkpoint into `folder` must write a new base instead of a
        delta. `live_entries`: the state's entries now, which scale the base's (or the
        newest delta's, `entry_bytes`) bytes per entry to the state's full size."""
        full = self.base[1]
        if self.base_entries and live_entries > self.base_entries:
            full = full * live_entries // self.base_entries
        full = max(full, int(self.entry_bytes * live_entries))
        return (
            folder != self.folder
            or len(self.deltas) >= MAX_DELTAS
            or self.delta_bytes > DELTA_RATIO * full
        )


@dataclass
class Pending:
    """One checkpoint's snapshot: the dirty keys swapped out at it, and (after its write)
    the chain it wrote, which later checkpoints build on once it completed."""

    checkpoint_id: int
    dirty: DirtyKeys
    chain: Chain | None = None
    live_entries: int = 0
    """Entries (keys over all states) the state held at the snapshot."""
    entries: DirtyEntries = field(default_factory=dict)
    """Map entries changed within keys not in `dirty`."""


@dataclass
class DirtyLog:
    """Which changes the next delta must hold, and which chain it may build on (pure
    bookkeeping; mailbox thread, except `Pending.chain`, set by the uploader thread before
    the checkpoint can complete)."""

    confirmed: Chain | None = None
    """The chain of the last completed checkpoint (or restored one); None: write a base."""
    pending: list[Pending] = field(default_factory=list)
    """Snapshots since `confirmed`'s, oldest first: their dirty keys are not yet in it."""
    written_folder: str | None = None
    """The shared folder of the last completed checkpoint this backend wrote (not of a
    restored chain): where its next writes go."""

    def snapshot(
        self,
        checkpoint_id: int,
        dirty: DirtyKeys,
        live_entries: int = 0,
        entries: DirtyEntries | None = None,
    ) -> tuple[Chain | None, list[Pending]]:
        """A checkpoint's snapshot took `dirty` and `entries` (swapped out of the live
        state) when the state held `live_entries` entries: the chain it builds on and the
        changes its delta holds (every pending snapshot's)."""
        record = Pending(checkpoint_id, dirty, live_entries=live_entries, entries=entries or {})
        self.pending.append(record)
        return self.confirmed, list(self.pending)

    def complete(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` completed: its chain is what later deltas follow, and
        the changes of its snapshot and earlier ones are in it. Nothing for a checkpoint
        whose write made no chain (a savepoint, a failed write) or that is unknown, nor for
        one that added a delta to a base older than the confirmed chain's (written while
        that newer base was pending, `base_due`): its changes stay pending, for the next
        delta after the newer base."""
        for record in self.pending:
            if record.checkpoint_id == checkpoint_id and record.chain is not None:
                chain, confirmed = record.chain, self.confirmed
                if confirmed is not None and chain.base != confirmed.base and chain.deltas:
                    return
                self.confirmed = chain
                self.written_folder = chain.folder
                self.pending = [r for r in self.pending if r.checkpoint_id > checkpoint_id]
                return

    def restored(self, chain: Chain | None) -> None:
        """The state now equals `chain` (None: something else; the next checkpoint writes a
        base)."""
        self.confirmed = chain
        self.written_folder = None
        self.pending = []

    def delta_reads(self) -> Callable[[str, int], list[Container[Any]]] | None:
        """For the snapshot just taken (the last pending one), when its write is certain to
        be a delta: `base_due` says so for the folder this backend's completed checkpoints
        went to, leaving out the earlier pending ones (a base one of them wrote is not known
        before its write). Then what that delta reads of state `name`'s key group `index`:
        the containers holding its keys (every pending snapshot's dirty keys and keys with
        changed map entries). None: the write may be a base."""
        folder = self.written_folder
        if folder is None or base_due(self.confirmed, self.pending[-1:], folder):
            return None
        records = list(self.pending)

        def reads(name: str, index: int) -> list[Container[Any]]:
            found: list[Container[Any]] = []
            for record in records:
                keys = record.dirty.get(name, _NO_GROUPS).get(index)
                if keys:
                    found.append(keys)
                changed = record.entries.get(name, _NO_GROUPS).get(index)
                if changed:
                    found.append(changed)
            return found

        return reads


def base_due(
    confirmed: Chain | None, records: list[Pending], folder: str, final: bool = False
) -> bool:
    """Whether the checkpoint of the last of `records` writes a new base into `folder`: no
    confirmed chain, or it needs one (`Chain.needs_base`) and no earlier checkpoint still
    pending already wrote one there. Until that one completes the deltas follow the
    confirmed chain: a base of a large state takes longer to write than the checkpoint
    interval, and the next checkpoint must not write a second one meanwhile. `final` (the
    job's final checkpoint): a chain in `folder` always gets a delta."""
    if confirmed is None:
        return True
    if final and confirmed.folder == folder:
        return False
    if not confirmed.needs_base(folder, records[-1].live_entries):
        return False
    return confirmed.folder != folder or not any(
        record.chain is not None and not record.chain.deltas and record.chain.folder == folder
        for record in records[:-1]
    )


def union_dirty(records: Iterable[Pending]) -> DirtyKeys:
    """Every key in any of `records`, per state and key-group index."""
    return _union([record.dirty for record in records], _merge_keys)


def union_entries(records: Iterable[Pending]) -> DirtyEntries:
    """Every changed map entry in any of `records`, per state, key-group index and key."""
    return _union([record.entries for record in records], _merge_entries)


def _union(changes: list[dict[str, dict[int, Any]]], merge: Callable[[Any, Any], Any]) -> Any:
    """`changes` (per state name, per key-group index) merged per key group by
    `merge(merged so far or None, next)`, which never changes its second argument."""
    if len(changes) == 1:  # the common case: swapped-out changes are never changed, no copy
        return changes[0]
    merged: dict[str, dict[int, Any]] = {}
    for change in changes:
        for name, groups in change.items():
            into = merged.setdefault(name, {})
            for index, changed in groups.items():
                into[index] = merge(into.get(index), changed)
    return merged


def _merge_keys(found: set[Any] | None, keys: set[Any]) -> set[Any]:
    if found is None:
        return set(keys)
    found |= keys
    return found


def _merge_entries(
    found: dict[Any, set[Any]] | None, changed: dict[Any, set[Any]]
) -> dict[Any, set[Any]]:
    found = {} if found is None else found
    for key, user_keys in changed.items():
        found[key] = _merge_keys(found.get(key), user_keys)
    return found


def _patches(
    held: dict[Any, Any], whole: list[Any], changed: dict[Any, set[Any]]
) -> tuple[list[Any], list[list[Any]]]:
    """The keys whose maps changed entry by entry (not in `whole`) and per key `[user
    keys, values, removed user keys]` as the snapshot's map `held[key]` has them. A map
    with at most twice as many entries as changed is added to `whole` instead (written
    whole: smaller and cheaper than its patch), as is a key `held` has no map for."""
    written = set(whole)
    keys: list[Any] = []
    patches: list[list[Any]] = []
    for key, user_keys in changed.items():
        if key in written:
            continue
        current = held.get(key)
        if current is None or len(current) <= 2 * len(user_keys):
            whole.append(key)  # a map gone was cleared, so marked whole: not expected
            written.add(key)
            continue
        present = list(user_keys)
        try:  # entries are put far more often than removed: first assume none was
            patches.append([present, list(map(current.__getitem__, present)), []])
        except KeyError:  # some were removed
            present = list(current.keys() & user_keys)
            removed = list(user_keys - current.keys())
            patches.append([present, list(map(current.__getitem__, present)), removed])
        keys.append(key)
    return keys, patches


def encode_delta(
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    states: list[tuple[str, StateKind]],
    held: list[list[dict[Any, Any]]],
    filters: list[Callable[[Any], Any] | None],
    dirty: DirtyKeys,
    fast: bool = True,
    entries: DirtyEntries | None = None,
) -> tuple[list[bytes], float]:
    """A delta file's envelope parts and the bytes per key it wrote (`Chain.entry_bytes`):
    per key group with a change, per state, the dirty keys and their values in the
    snapshot's version `held` (filtered as `set_snapshot_filter` says), None where it holds
    none (a tombstone: state never stores None), and for a map state the patches of the maps
    changed entry by entry (`entries`; a filtered state's are written whole). Marshalled
    where every object allows it (`heap_sections.encode_whole`), else pickled; `fast` False:
    always pickled."""
    entries = entries or {}
    names = [name for name, _ in states]
    indices = sorted(
        {index for changes in (dirty, entries) for g in changes.values() for index in g}
    )
    sections: list[bytes] = []
    key_groups: dict[int, list[int]] = {}
    offset = written = 0
    for index in indices:
        per_state: list[list[Any]] = []
        for name, groups, transform in zip(names, held, filters, strict=True):
            keys = list(dirty.get(name, {}).get(index, _NONE))
            changed = entries.get(name, {}).get(index)
            patched: list[Any] = []
            patches: list[list[Any]] = []
            if changed and transform is not None:  # the filter applies to whole values
                keys = list(set(keys).union(changed))
            elif changed:
                patched, patches = _patches(groups[index], keys, changed)
            # C-level passes (no Python frame per key): the hot part of a write
            values = list(map(groups[index].get, keys))
            if transform is not None:
                values = [None if value is None else transform(value) for value in values]
            per_state.append([keys, values, patched, patches] if patched else [keys, values])
            written += len(keys) + len(patched)
        section = encode_whole(names, per_state, fast)
        fast = fast and section[0] == MARSHAL_WHOLE_TAG
        key_groups[key_group_range.start + index] = [offset, len(section)]
        sections.append(section)
        offset += len(section)
    header = {
        "version": CHANGELOG_VERSION,
        "max_parallelism": max_parallelism,
        "key_group_range": [key_group_range.start, key_group_range.end],
        "states": [[name, kind.value] for name, kind in states],
        "key_groups": key_groups,
    }
    empty = len(encode_whole(names, [[[], []] for _ in names], True))
    entry_bytes = (offset - empty * len(sections)) / written if written else 0.0
    return _envelope.envelope_parts(DELTA_KIND, header, sections), entry_bytes


def write_changelog(
    snapshot: HeapKeyedStateSnapshot,
    held: list[list[dict[Any, Any]]],
    shared: _fs.Location,
    confirmed: Chain | None,
    records: list[Pending],
    final: bool = False,
) -> tuple[bytes, list[tuple[str, int, bool]]]:
    """A checkpoint's changelog write (uploader thread): a delta (or a new base, see the
    module docstring; `final`: the job's final checkpoint) uploaded into `shared`, and the
    manifest naming the chain. Returns the manifest and the `shared_files()` listing; the
    chain is recorded in the last of `records` (this checkpoint's). OSError: the file this
    call wrote is deleted (best effort) and the error propagates."""
    folder = shared.without_trailing_slash().uri
    rng, max_parallelism = snapshot._range, snapshot._max_parallelism
    entry_bytes = 0.0
    new_base = base_due(confirmed, records, folder, final)
    if new_base:
        # a base: the canonical envelope, marshalled where every object allows it
        base = snapshot._canonical_header_and_sections(fast=True)
        parts = _envelope.envelope_parts(KEYED_STATE, *base)
    else:
        dirty, changed = union_dirty(records), union_entries(records)
        parts, entry_bytes = encode_delta(
            rng, max_parallelism, snapshot._states, held, snapshot._filters, dirty, entries=changed
        )
    entry = upload_shared(shared, "heapbase" if new_base else "heapdelta", parts)
    fields, listed = chain_written(confirmed, records, folder, entry, new_base, entry_bytes)
    header = {
        "version": CHANGELOG_VERSION,
        "max_parallelism": max_parallelism,
        "key_group_range": [rng.start, rng.end],
        "states": [[name, kind.value] for name, kind in snapshot._states],
        **fields,
    }
    return _envelope.encode(CHANGELOG_KIND, header), listed


def chain_written(
    confirmed: Chain | None,
    records: list[Pending],
    folder: str,
    entry: tuple[str, int],
    new_base: bool,
    entry_bytes: float = 0.0,
) -> tuple[dict[str, Any], list[tuple[str, int, bool]]]:
    """A checkpoint uploaded `entry` into `folder`, a new base or a delta after `confirmed`:
    its chain, recorded in the last of `records`, as a manifest's chain fields, and as the
    `shared_files()` listing (name, size, uploaded by this write)."""
    if new_base:
        chain = Chain(folder, entry, base_entries=records[-1].live_entries)
    else:
        assert confirmed is not None
        deltas = (*confirmed.deltas, entry)
        chain = Chain(folder, confirmed.base, deltas, confirmed.base_entries, entry_bytes)
    records[-1].chain = chain
    fields = {
        "base": list(chain.base),
        "deltas": [list(delta) for delta in chain.deltas],
        "base_entries": chain.base_entries,
    }
    return fields, [(name, size, name == entry[0]) for name, size in chain.files()]


# ---- reading -------------------------------------------------------------------------------


def read_manifest(section: bytes | memoryview) -> dict[str, Any]:
    """A changelog manifest's header, checked (StateRestoreError for damage)."""
    header, _ = _envelope.decode(section, CHANGELOG_KIND)
    check_header_version(header, "heap-changelog keyed state", CHANGELOG_VERSION)
    try:
        chain_files(header, "heap-changelog")
        KeyGroupRange(*header["key_group_range"])
    except (KeyError, TypeError, ValueError) as error:
        raise StateRestoreError(f"malformed heap-changelog header: {error!r}") from error
    return header


def manifest_chain(header: dict[str, Any], base: _fs.Location) -> Chain:
    """The chain a manifest names, in the shared folder of the checkpoint folder `base`."""
    folder = base.parent.child("shared").without_trailing_slash().uri
    return Chain(
        folder,
        (str(header["base"][0]), int(header["base"][1])),
        tuple((str(name), int(size)) for name, size in header["deltas"]),
        _entries(header.get("base_entries", 0)),
    )


def _entries(value: Any) -> int:
    """A manifest's optional "base_entries" (0: absent or not a count)."""
    return value if type(value) is int and value > 0 else 0


def changelog_to_canonical(
    section: bytes | memoryview,
    base: _fs.Location | None,
    key_group_range: KeyGroupRange | None = None,
) -> bytes:
    """The canonical "keyed-state" envelope of a changelog manifest: its base read, then
    each delta applied in order, per key group (only those in `key_group_range` if given).
    Files resolve against the job folder of the checkpoint folder `base`. StateRestoreError
    for damage or a missing file. (The RocksDB backend's `native_to_canonical` twin.)"""
    header = read_manifest(section)
    if base is None:
        raise StateRestoreError(
            "a heap-changelog checkpoint's files resolve against its checkpoint folder, "
            "which was not given"
        )
    chain = manifest_chain(header, base)
    wanted = key_group_range
    try:
        states: dict[str, str] = {str(name): str(kind) for name, kind in header["states"]}
    except (KeyError, TypeError, ValueError) as error:
        raise StateRestoreError(f"malformed heap-changelog header: {error!r}") from error
    groups: dict[int, dict[str, dict[Any, Any]]] = {}

    def load(name: str, size: int) -> tuple[Any, memoryview, list[str]]:
        data, location = read_chain_file(base, name, size, "heap-changelog")
        kind = KEYED_STATE if name == chain.base[0] else DELTA_KIND
        file_header, body = _envelope.decode(data, kind)
        if kind == KEYED_STATE:
            check_keyed_header_version(file_header)
        else:
            check_header_version(file_header, f"heap-changelog delta {location}", CHANGELOG_VERSION)
        if file_header.get("max_parallelism") != header.get("max_parallelism"):
            raise StateRestoreError(
                f"heap-changelog file {location} has max parallelism "
                f"{file_header.get('max_parallelism')}, its manifest "
                f"{header.get('max_parallelism')}"
            )
        try:
            names = [str(state) for state, _ in file_header["states"]]
            for state, kind_name in file_header["states"]:
                states.setdefault(str(state), str(kind_name))
        except (KeyError, TypeError, ValueError) as error:
            raise StateRestoreError(
                f"malformed heap-changelog file {location}: {error!r}"
            ) from error
        return file_header, body, names

    file_header, body, names = load(*chain.base)
    for key_group, (offset, length) in sorted(_key_groups(file_header).items()):
        if wanted is not None and key_group not in wanted:
            continue
        per_state = decode_key_group(body, key_group, offset, length, names)
        # copies: a pickle may give two states one dict (a snapshot's shared empty dict)
        groups[key_group] = {
            name: dict(entries) for name, entries in zip(names, per_state, strict=True)
        }
    for delta in chain.deltas:
        file_header, body, names = load(*delta)
        for key_group, (offset, length) in sorted(_key_groups(file_header).items()):
            if wanted is not None and key_group not in wanted:
                continue
            per_state = decode_key_group(body, key_group, offset, length, names)
            into = groups.setdefault(key_group, {})
            for name, change in zip(names, per_state, strict=True):
                try:
                    _apply_change(into.setdefault(name, {}), change)
                except (TypeError, ValueError) as error:
                    raise StateRestoreError(
                        f"key group {key_group} of heap-changelog delta {delta[0]} is "
                        f"malformed: {error!r}"
                    ) from error
    ordered = list(states.items())
    sections: list[bytes] = []
    index: dict[int, list[int]] = {}
    offset = 0
    for key_group in sorted(groups):
        per_state = [groups[key_group].get(name, {}) for name, _ in ordered]
        if not any(per_state):
            continue
        section_bytes = pickle.dumps(per_state, protocol=5)
        index[key_group] = [offset, len(section_bytes)]
        sections.append(section_bytes)
        offset += len(section_bytes)
    canonical = {
        "version": KEYED_STATE_VERSION,
        "max_parallelism": header["max_parallelism"],
        "key_group_range": list(header["key_group_range"]),
        "states": [[name, kind] for name, kind in ordered],
        "key_groups": index,
    }
    return _envelope.encode_parts(KEYED_STATE, canonical, sections)


def _apply_change(entries: dict[Any, Any], change: Any) -> None:
    """One state's change in a delta's key group applied to `entries`: `[keys, values]`
    (None: removed), with a map state's `[patched keys, patches]` after them, or the first
    layout's `[{key: value}, [removed key, ...]]`."""
    first, second, *patched = change
    if isinstance(first, dict):
        entries.update(first)
        for key in second:
            entries.pop(key, None)
        return
    if len(first) != len(second):
        raise ValueError(f"{len(first)} keys but {len(second)} values")
    entries.update(zip(first, second, strict=True))
    for key, value in zip(first, second, strict=True):
        if value is None:
            del entries[key]
    if patched:
        keys, patches = patched
        for key, (user_keys, values, removed) in zip(keys, patches, strict=True):
            current = entries.get(key)
            if current is None:
                current = entries[key] = {}
            current.update(zip(user_keys, values, strict=True))
            for user_key in removed:
                current.pop(user_key, None)
            if not current:
                del entries[key]


def _key_groups(header: dict[str, Any]) -> dict[int, tuple[int, int]]:
    try:
        return {int(g): (int(o), int(n)) for g, (o, n) in header["key_groups"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise StateRestoreError(f"malformed heap-changelog file header: {error!r}") from error
