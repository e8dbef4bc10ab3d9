"""Changelog checkpoints of timers: upload the timers added and removed, not all of them.

With changelog checkpoints on (`env.enable_changelog_state_backend(True)`) the timer
queues record, per key group, each timer added, deleted or fired since the last snapshot
(`TimerPriorityQueue.track_changes`). A checkpoint then writes into the job folder's
`shared/` a delta, per key group with a change, of those timers the barrier's snapshot
holds (added) and those it does not (removed), and its timers section is a small
"timers-changelog" manifest naming the chain, as the heap backend's keyed state does
(`state/heap_changelog.py`, whose `Chain`, `DirtyLog` and rules this module reuses):

    {"version": 1, "max_parallelism": 128, "key_group_range": [start, end],
     "base": [name, size],            # a "timers" envelope (§6), names relative to the
     "deltas": [[name, size], ...],   # job folder, oldest first
     "base_entries": n}               # timers the base holds

A delta file is a "timers-delta" envelope whose header lists, per key group, the
timestamps of the timers added (`event_time`, `processing_time`) and removed
(`removed_event_time`, `removed_processing_time`), and whose body holds each key group's
pickled (key, namespace) pairs in that order, as a "timers" envelope does for its two.

A timer service of q9 holds every open auction's timer and adds and fires a few hundred a
second, so writing them whole at each 1 s checkpoint cost more than the keyed delta did.
Reuse rule and materialization are the keyed chain's: a delta holds every change since the
last completed checkpoint, and a new base is written when there is no confirmed chain
(the first checkpoint, after any restore) or the chain is long or large. Restores,
rescaling and the state processor read a manifest as the "timers" envelope it stands for
(`changelog_to_canonical`); savepoints stay canonical.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from barrierflow import _envelope, _fs
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.timers.snapshot import (
    DOMAINS,
    HEADER_VERSION,
    SNAPSHOT_KIND,
    TimerSnapshot,
    decode_sections,
    encode_sections,
)
from barrierflow.runtime.timers.timer import Timer
from barrierflow.state.changelog_files import chain_files, read_chain_file, upload_shared
from barrierflow.state.heap_changelog import (
    Chain,
    Pending,
    base_due,
    chain_written,
    union_dirty,
)
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.state.key_scope import check_header_version

__all__ = ["DELTA_KIND", "MANIFEST_KIND", "TimerChangelogSnapshot", "changelog_to_canonical"]

MANIFEST_KIND = "timers-changelog"
"""Envelope kind of a changelog checkpoint's timers section (the manifest)."""

DELTA_KIND = "timers-delta"
"""Envelope kind of a timers delta file in `shared/`."""

VERSION = 1
"""What a manifest's and a delta's header mean; bump it and keep reading older ones."""

DELTA_FIELDS = (*DOMAINS, "removed_event_time", "removed_processing_time")
"""A delta header's fields per key group, in the order of the body's pairs."""


@dataclass
class TimerChangelogSnapshot:
    """A timer service's snapshot with changelog checkpoints: the timers as held at the
    barrier, the chain the checkpoint may build on, and the changes its delta must hold
    (every pending snapshot's, `DirtyLog.snapshot`)."""

    held: TimerSnapshot
    confirmed: Chain | None
    records: list[Pending]
    _listed: list[tuple[str, int, bool]] = field(default_factory=list)

    def encode(self, ordered: bool = False) -> bytes:
        """Every timer as a "timers" envelope (a savepoint's section)."""
        return self.held.encode(ordered)

    def write(self, shared: _fs.Location, final: bool = False) -> bytes:
        """Upload a delta (or a new base; `final`: the job's final checkpoint, see
        `base_due`) into `shared` and return the manifest naming the chain (uploader
        thread); the chain is recorded in this checkpoint's `Pending`, for
        later checkpoints once it completes. OSError: the file is deleted (best effort) and
        the error propagates."""
        folder = shared.without_trailing_slash().uri
        new_base = base_due(self.confirmed, self.records, folder, final)
        data = self.held.encode() if new_base else self._delta()
        entry = upload_shared(shared, "timerbase" if new_base else "timerdelta", [data])
        fields, self._listed = chain_written(self.confirmed, self.records, folder, entry, new_base)
        header = {
            "version": VERSION,
            "max_parallelism": self.held.max_parallelism,
            "key_group_range": list(self.held.key_group_range),
            **fields,
        }
        return _envelope.encode(MANIFEST_KIND, header)

    def shared_files(self) -> list[tuple[str, int, bool]]:
        """After `write`: the chain's files as (name relative to the job folder, size,
        uploaded by this write)."""
        return self._listed

    def _delta(self) -> bytes:
        """The "timers-delta" envelope of the changes since the confirmed chain."""
        changed = union_dirty(self.records)
        held = {key_group: domains for key_group, *domains in self.held.key_groups}
        none: tuple[Collection[Timer], ...] = (frozenset(), frozenset())
        rows = []
        for key_group in sorted({g for groups in changed.values() for g in groups}):
            now = held.get(key_group, none)
            added: list[list[Timer]] = []
            removed: list[list[Timer]] = []
            for domain, timers in zip(DOMAINS, now, strict=True):
                touched = changed.get(domain, {}).get(key_group, ())
                added.append([timer for timer in touched if timer in timers])
                removed.append([timer for timer in touched if timer not in timers])
            rows.append((key_group, [*added, *removed]))
        sections, chunks = encode_sections(rows, DELTA_FIELDS)
        header = {
            "version": VERSION,
            "max_parallelism": self.held.max_parallelism,
            "key_group_range": list(self.held.key_group_range),
            "key_groups": sections,
        }
        return _envelope.encode(DELTA_KIND, header, b"".join(chunks))


def changelog_to_canonical(
    section: bytes | memoryview,
    base: _fs.Location | None,
    key_group_range: KeyGroupRange | None = None,
) -> bytes:
    """The "timers" envelope a manifest stands for: its base read, each delta applied in
    order, per key group (only those in `key_group_range` if given). Files resolve
    against the job folder of the checkpoint folder `base`. StateRestoreError for damage or
    a missing file."""
    header, _ = _envelope.decode(section, MANIFEST_KIND)
    check_header_version(header, "a timers-changelog manifest", VERSION)
    if base is None:
        raise StateRestoreError(
            "a timers-changelog checkpoint's files resolve against its checkpoint folder, "
            "which was not given"
        )
    try:
        files = chain_files(header, "timers-changelog")
        max_parallelism = header["max_parallelism"]
        key_group_range = key_group_range or KeyGroupRange(*header["key_group_range"])
    except (KeyError, TypeError, ValueError) as error:
        raise StateRestoreError(f"malformed timers-changelog header: {error!r}") from error
    timers: dict[int, tuple[set[Timer], set[Timer]]] = {}
    for number, (name, size) in enumerate(files):
        kind = SNAPSHOT_KIND if number == 0 else DELTA_KIND
        data, location = read_chain_file(base, name, size, kind)
        file_header, body = _checked(data, kind, location, max_parallelism)
        fields = DOMAINS if number == 0 else DELTA_FIELDS
        try:
            for key_group, per_field in decode_sections(
                file_header["key_groups"], body, fields, key_group_range
            ):
                domains = timers.setdefault(key_group, (set(), set()))
                added, removed = per_field[:2], per_field[2:]  # a base removes none
                for domain, timers_added in zip(domains, added, strict=True):
                    domain.update(timers_added)
                for domain, timers_removed in zip(domains, removed, strict=False):
                    domain.difference_update(timers_removed)
        except StateRestoreError:
            raise
        except Exception as error:
            raise StateRestoreError(f"{kind} file {location} cannot be read: {error!r}") from error
    return TimerSnapshot(
        max_parallelism,
        (key_group_range.start, key_group_range.end),
        [(key_group, *timers[key_group]) for key_group in sorted(timers)],
    ).encode()


def _checked(
    data: bytes, kind: str, location: _fs.Location, max_parallelism: Any
) -> tuple[dict[str, Any], memoryview]:
    """A chain file's header, checked, and its body."""
    header, body = _envelope.decode(data, kind)
    check_header_version(
        header, f"{kind} file {location}", HEADER_VERSION if kind == SNAPSHOT_KIND else VERSION
    )
    if header.get("max_parallelism") != max_parallelism:
        raise StateRestoreError(
            f"{kind} file {location} has max parallelism {header.get('max_parallelism')}, "
            f"its manifest {max_parallelism}"
        )
    return header, body
