"""The subtask state file: one per subtask and checkpoint, its name, layout and reading.

A subtask writes all it snapshotted for checkpoint n into `chk-<n>/<file>`: one
versioned envelope (`barrierflow._envelope`, kind "subtask-state") whose header indexes
the body, and whose body holds each operator's keyed, operator and timer sections and
the channel state, back to back. The index is also the subtask's `SubtaskStateHandle`.
Reading slices sections out of a file; any failure names the file.

The file is built on the snapshot uploader thread from a `PendingStateFile`: the
sections taken at the barrier, with each operator's keyed state still a
`KeyedStateSnapshot` whose `write` serializes it there. A checkpoint's backend may put
side files for operator n into `<file>.files-<n>/` beside the file (`side_files_folder`),
inside the checkpoint's folder, so discarding the checkpoint deletes them with it; a
savepoint's keyed sections are canonical and have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from barrierflow import _envelope as state_format
from barrierflow import _fs
from barrierflow.checkpoint.files import file_error, read_checkpoint_file
from barrierflow.checkpoint.handles import (
    OperatorStateHandle,
    Section,
    SubtaskStateHandle,
    section_as_list,
)
from barrierflow.errors import StateRestoreError

if TYPE_CHECKING:
    from barrierflow.state.backend import KeyedStateSnapshot

SUBTASK_STATE = "subtask-state"
"""Envelope kind of the one state file a subtask writes per checkpoint."""


@dataclass(frozen=True)
class OperatorSections:
    """One operator's snapshot as encoded bytes (None: that part is empty)."""

    keyed: bytes | None = None
    operator: bytes | None = None
    timers: bytes | None = None


def state_file_name(vertex_id: int, subtask_index: int, deployment_id: str) -> str:
    """The name of a subtask's state file in a checkpoint folder (unique per deployment).

    >>> state_file_name(2, 0, "run-1")
    '2-0-run-1.state'
    """
    return f"{vertex_id}-{subtask_index}-{deployment_id}.state"


def state_file_location(job_dir: str, checkpoint_id: int, name: str) -> _fs.Location:
    """Where file `name` of checkpoint `checkpoint_id` goes below the job folder `job_dir`."""
    return _fs.Location(job_dir).child(f"chk-{checkpoint_id}", name)


def side_files_folder(state_file: _fs.Location, operator_number: int) -> _fs.Location:
    """The folder for side files of the `operator_number`-th operator of `state_file`.

    Beside the state file, directly in its checkpoint's folder (deleted with it,
    recursively, on every store; a backend names its files relative to the checkpoint's
    folder as `<this folder's name>/<file>`), named after the file, so it is unique per
    checkpoint, subtask, deployment (attempt) and operator. It may not exist yet: a
    backend creates it if it writes.

    >>> side_files_folder(_fs.Location("/job/chk-3/2-0-run-1.state"), 0).path
    '/job/chk-3/2-0-run-1.state.files-0'
    """
    return state_file.parent.child(f"{state_file.name}.files-{operator_number}")


def shared_folder(state_file: _fs.Location) -> _fs.Location:
    """The job's folder of shared files (incremental checkpoints), for a checkpoint's state
    file `chk-<n>/<file>`: `<job folder>/shared`, which `_metadata` names files relative to.

    >>> shared_folder(_fs.Location("/job/chk-3/2-0-run-1.state")).path
    '/job/shared'
    """
    return state_file.parent.parent.child("shared")


class HeldTimers(Protocol):
    """A timer service's snapshot as copied at the barrier (`runtime/timers/snapshot.py`,
    `changelog.py`)."""

    def encode(self, ordered: bool = False) -> bytes:
        """Its "timers" envelope; `ordered`: a savepoint's canonical form."""
        ...

    def write(self, shared: _fs.Location, final: bool = False) -> bytes:
        """A checkpoint's timers section (a changelog snapshot uploads files into the
        job's `shared` folder and lists them in `shared_files`; `final`: the job's final
        checkpoint)."""
        ...


@dataclass(frozen=True)
class HeldSections:
    """One operator's snapshot as taken at the barrier: its keyed state may still be a
    `KeyedStateSnapshot` and its timers a `TimerSnapshot` (both written on the uploader
    thread), the rest is encoded."""

    keyed: bytes | KeyedStateSnapshot | None = None
    operator: bytes | None = None
    timers: bytes | HeldTimers | None = None


@dataclass(frozen=True)
class PendingStateFile:
    """A subtask state file to build on the uploader thread (see the module docstring).

    `build` then `release`, or only `release` when the checkpoint is dropped first;
    `release` frees every keyed snapshot, once.
    """

    location: _fs.Location
    vertex_id: int
    subtask_index: int
    key_group_range: tuple[int, int]
    operators: dict[str, HeldSections]
    channel_state: bytes | None
    savepoint: bool
    """Canonical keyed sections (`write(None)`), no side files."""
    final: bool = False
    """The job's final checkpoint (the end of bounded input): changelog chains get a delta,
    never a new base (`KeyedStateSnapshot.write`)."""

    def build(self) -> tuple[list[bytes], SubtaskStateHandle]:
        """Write each keyed snapshot, then encode the file: its parts, to write in order
        (`_fs.write_parts`), and its handle. What `write` raises propagates (OSError:
        storage failed; ConfigurationError: a value cannot be serialized)."""
        sections: dict[str, OperatorSections] = {}
        shared = shared_folder(self.location)
        for number, (uid, held) in enumerate(self.operators.items()):
            keyed = held.keyed
            if keyed is not None and not isinstance(keyed, bytes):
                if self.savepoint:
                    keyed = keyed.write(None)
                else:
                    side_files = side_files_folder(self.location, number)
                    keyed = keyed.write(side_files, shared=shared, final=self.final)
            timers = held.timers
            if timers is not None and not isinstance(timers, bytes):
                if self.savepoint:
                    timers = timers.encode(ordered=True)
                else:
                    timers = timers.write(shared, final=self.final)
            sections[uid] = OperatorSections(keyed, held.operator, timers)
        encoded = encode_parts(
            self.location.name,
            self.vertex_id,
            self.subtask_index,
            self.key_group_range,
            sections,
            self.channel_state,
        )
        if encoded is None:
            raise ValueError(f"state file {self.location.uri} has nothing to write")
        return encoded

    def shared_files(self) -> list[tuple[str, int, bool]]:
        """After `build`: the shared files every keyed and timers section references, as
        (name relative to the job folder, size, uploaded by this build); [] for a
        savepoint."""
        found: list[tuple[str, int, bool]] = []
        if self.savepoint:
            return found
        for held in self.operators.values():
            for part in (held.keyed, held.timers):
                listed = getattr(part, "shared_files", None)  # bytes and None have none
                if listed is not None:
                    found += [(str(name), int(size), bool(new)) for name, size, new in listed()]
        return found

    def side_file_bytes(self) -> int:
        """After `build`: the bytes the keyed sections wrote beside the file (their
        checkpoint's own files); 0 for a savepoint."""
        if self.savepoint:
            return 0
        return sum(
            int(held.keyed.side_file_bytes())
            for held in self.operators.values()
            if hasattr(held.keyed, "side_file_bytes")  # bytes and None have none
        )

    def release(self) -> None:
        release_keyed(held.keyed for held in self.operators.values())


def release_keyed(snapshots: Any) -> None:
    """Release every `KeyedStateSnapshot` among `snapshots` (bytes and None need nothing);
    each release is attempted even if an earlier one raises."""
    error: BaseException | None = None
    for snapshot in snapshots:
        if snapshot is None or isinstance(snapshot, bytes):
            continue
        try:
            snapshot.release()
        except Exception as raised:  # the rest must still be freed
            error = raised
    if error is not None:
        raise error


def encode(
    name: str,
    vertex_id: int,
    subtask_index: int,
    key_group_range: tuple[int, int],
    operators: dict[str, OperatorSections],
    channel_state: bytes | None,
) -> tuple[bytes, SubtaskStateHandle] | None:
    """The file's bytes and its handle; None when there is nothing to write."""
    encoded = encode_parts(
        name, vertex_id, subtask_index, key_group_range, operators, channel_state
    )
    if encoded is None:
        return None
    parts, handle = encoded
    return b"".join(parts), handle


def encode_parts(
    name: str,
    vertex_id: int,
    subtask_index: int,
    key_group_range: tuple[int, int],
    operators: dict[str, OperatorSections],
    channel_state: bytes | None,
) -> tuple[list[bytes], SubtaskStateHandle] | None:
    """`encode` as the parts of the file, to write one after the other (never joined)."""
    parts: list[bytes] = []
    size = 0

    def section(data: bytes | None) -> Section | None:
        nonlocal size
        if data is None:
            return None
        start = size
        parts.append(data)
        size += len(data)
        return (start, len(data))

    index = {
        uid: OperatorStateHandle(section(s.keyed), section(s.operator), section(s.timers))
        for uid, s in operators.items()
    }
    channel = section(channel_state)
    if not index and channel is None:
        return None
    header: dict[str, Any] = {
        "vertex": vertex_id,
        "subtask": subtask_index,
        "operators": {
            uid: {
                "keyed": section_as_list(h.keyed),
                "operator": section_as_list(h.operator),
                **({"timers": list(h.timers)} if h.timers is not None else {}),
            }
            for uid, h in index.items()
        },
    }
    if channel is not None:
        header["channel_state"] = list(channel)
    handle = SubtaskStateHandle(name, subtask_index, key_group_range, index, channel)
    return state_format.envelope_parts(SUBTASK_STATE, header, parts), handle


class SubtaskStateReader:
    """Reads state files once each and slices sections out of their bodies.

    >>> SubtaskStateReader().slice("file:///no/such/file.state", 0, 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    barrierflow.errors.StateRestoreError: cannot read the 'subtask-state' file \
file:///no/such/file.state: it is missing ...
    """

    def __init__(self) -> None:
        self._bodies: dict[str, bytes] = {}

    def slice(self, uri: str, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) of the body of the state file at `uri`."""
        body = self._bodies.get(uri)
        if body is None:
            body = self._bodies[uri] = self._read(uri)
        if offset < 0 or offset + length > len(body):
            error = StateRestoreError(
                f"state file {uri} is truncated: section [{offset}, {offset + length}) "
                f"beyond its {len(body)} bytes"
            )
            raise file_error(error, uri)
        return body[offset : offset + length]

    @staticmethod
    def _read(uri: str) -> bytes:
        _, payload = read_checkpoint_file(_fs.Location(uri), SUBTASK_STATE)
        return bytes(payload)
