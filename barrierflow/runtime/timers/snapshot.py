"""A timer service's snapshot: held at the barrier, encoded later on the uploader thread.

The synchronous part takes each key group's set of timers of both time domains as it is
(`TimerPriorityQueue.hold`: the queue copies a held set before it next changes it, so
timers fired or deleted after the barrier stay in the snapshot and timers added after it
are not in it; a `Timer` is immutable, and its key and namespace are hashable values
nothing changes in place, as for any dict key). The barrier pays per key group; copying
every timer into lists there cost about a tenth of a microsecond per timer (200 000
timers: 19 ms), encoding them one to two (an unsorted encoding 180-350 ms, the sorted
one the barrier paid before that 560 ms). `encode` writes the "timers" envelope
(`docs/savepoint-format.md` §6): per key group, the timestamps of both domains in the
header and the pickled (key, namespace) pairs in the body. A savepoint's timestamps
ascend within each domain; a checkpoint's are written as the snapshot holds them,
unsorted (a restore adds every timer to its queue, which orders them).
"""

from __future__ import annotations

import pickle
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from barrierflow import _envelope
from barrierflow.runtime.timers.timer import Timer, new_timer

if TYPE_CHECKING:
    from barrierflow import _fs
    from barrierflow.state.key_groups import KeyGroupRange

__all__ = [
    "DOMAINS",
    "HEADER_VERSION",
    "SNAPSHOT_KIND",
    "TimerSnapshot",
    "decode_sections",
    "encode_sections",
    "timer_section",
]

SNAPSHOT_KIND = "timers"
"""The kind of checkpoint envelope (`barrierflow._envelope`) a timer snapshot uses."""

HEADER_VERSION = 1
"""What a "timers" header and body mean; bump it and keep reading older ones."""

DOMAINS = ("event_time", "processing_time")
"""A "timers" header's fields per key group: the timestamps of each time domain."""

_PICKLE_PROTOCOL = 5

_timestamp = itemgetter(0)


@dataclass(frozen=True)
class TimerSnapshot:
    """Every timer of one service as it was at the barrier, per key group."""

    max_parallelism: int
    key_group_range: tuple[int, int]
    key_groups: list[tuple[int, Collection[Timer], Collection[Timer]]]
    """(key group, its event-time timers, its processing-time timers), by key group."""

    def encode(self, ordered: bool = False) -> bytes:
        """The "timers" envelope; `ordered`: timestamps ascending within each domain (a
        savepoint's canonical form; one sort per key group and domain)."""
        rows = self.key_groups
        if ordered:
            rows = [
                (key_group, sorted(event_time, key=_timestamp), sorted(processing, key=_timestamp))
                for key_group, event_time, processing in rows
            ]
        sections, chunks = encode_sections(
            ((key_group, domains) for key_group, *domains in rows), DOMAINS
        )
        header = {
            "version": HEADER_VERSION,
            "max_parallelism": self.max_parallelism,
            "key_group_range": list(self.key_group_range),
            "key_groups": sections,
        }
        return _envelope.encode(SNAPSHOT_KIND, header, b"".join(chunks))

    def write(self, shared: _fs.Location, final: bool = False) -> bytes:
        """A checkpoint's section: the whole "timers" envelope (`shared` and `final` are
        for changelog snapshots, `runtime/timers/changelog.py`)."""
        return self.encode()


def encode_sections(
    key_groups: Iterable[tuple[int, Sequence[Collection[Timer]]]], fields: tuple[str, ...]
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Per key group, its header entry (each of `fields`: the timestamps of that
    collection of timers; offset and length in the body) and its body chunk (the pickled
    (key, namespace) pairs of all the collections, in order)."""
    sections: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    offset = 0
    for key_group, collections in key_groups:
        section: dict[str, Any] = {"key_group": key_group}
        pairs: list[tuple[Any, Any]] = []
        for field, timers in zip(fields, collections, strict=True):
            section[field], field_pairs = _columns(timers)
            pairs += field_pairs
        chunk = pickle.dumps(pairs, protocol=_PICKLE_PROTOCOL)
        section["offset"], section["length"] = offset, len(chunk)
        sections.append(section)
        chunks.append(chunk)
        offset += len(chunk)
    return sections, chunks


def decode_sections(
    sections: Any, body: memoryview, fields: tuple[str, ...], wanted: KeyGroupRange | None
) -> Iterator[tuple[int, list[list[Timer]]]]:
    """`encode_sections` read back: per key group in `wanted` (None: all), its timers per
    field. Others are skipped without unpickling. KeyError, TypeError, ValueError or an
    unpickling error for damage."""
    for section in sections:
        key_group = section["key_group"]
        if wanted is not None and key_group not in wanted:
            continue
        start, length = section["offset"], section["length"]
        pairs = pickle.loads(body[start : start + length])
        stamps = [section[field] for field in fields]
        if len(pairs) != sum(map(len, stamps)):
            raise ValueError(f"key group {key_group} has {len(pairs)} keys for its timestamps")
        per_field: list[list[Timer]] = []
        at = 0
        for timestamps in stamps:
            per_field.append(
                [
                    new_timer(Timer, (timestamp, key, namespace))
                    for timestamp, (key, namespace) in zip(
                        timestamps, pairs[at : at + len(timestamps)], strict=True
                    )
                ]
            )
            at += len(timestamps)
        yield key_group, per_field


def _columns(timers: Collection[Timer]) -> tuple[list[int], list[tuple[Any, Any]]]:
    """The timestamps of `timers` and their (key, namespace) pairs, in their order: one
    C-level pass over the timers (they lie scattered in memory, so each pass over them
    costs cache misses: encoding 200 000 timers took 179 ms here against 253 ms with one
    pass per column, best of seven)."""
    if not timers:
        return [], []
    timestamps, keys, namespaces = zip(*timers, strict=True)
    return list(timestamps), list(zip(keys, namespaces, strict=True))


def timer_section(held: bytes | TimerSnapshot | None, ordered: bool = True) -> bytes | None:
    """An operator snapshot's timers as the "timers" envelope (None: no timers)."""
    if held is None or isinstance(held, bytes):
        return held
    return held.encode(ordered)
