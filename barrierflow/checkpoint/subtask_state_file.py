"""The subtask state file: one per subtask and checkpoint, its name, layout and reading.

A subtask writes all it snapshotted for checkpoint n into `chk-<n>/<file>`: one
versioned envelope (`barrierflow._envelope`, kind "subtask-state") whose header indexes
the body, and whose body holds each operator's keyed, operator and timer sections and
the channel state, back to back. The index is also the subtask's `SubtaskStateHandle`.
Reading slices sections out of a file; any failure names the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def encode(
    name: str,
    vertex_id: int,
    subtask_index: int,
    key_group_range: tuple[int, int],
    operators: dict[str, OperatorSections],
    channel_state: bytes | None,
) -> tuple[bytes, SubtaskStateHandle] | None:
    """The file's bytes and its handle; None when there is nothing to write."""
    body = bytearray()

    def section(data: bytes | None) -> Section | None:
        if data is None:
            return None
        start = len(body)
        body.extend(data)
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
    return state_format.encode(SUBTASK_STATE, header, bytes(body)), handle


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
