"""Checkpoint folders built the way a job builds them: operator snapshots from the real
heap backend, timer service and window logic, encoded into subtask state files and
`_metadata` by the checkpoint package's own functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from barrierflow import _envelope
from barrierflow.checkpoint import subtask_state_file
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.checkpoint.storage import METADATA, METADATA_KIND
from barrierflow.runtime.operators.base import OperatorSnapshot
from barrierflow.runtime.timers import timer_section
from barrierflow.state.backend import canonical_section
from barrierflow.state.key_groups import key_group_range_for_subtask
from barrierflow.state.operator_state import encode_operator_state


@dataclass(frozen=True)
class Operator:
    uid: str
    name: str


@dataclass(frozen=True)
class Vertex:
    parallelism: int
    operators: list[Operator]


@dataclass(frozen=True, order=True)
class Subtask:
    vertex_id: int
    subtask_index: int


@dataclass
class Shape:
    """A JobShape of one vertex per operator."""

    vertices: list[Vertex]
    job_name: str = "job"
    max_parallelism: int = 128
    extra: dict = field(default_factory=dict)

    def vertex(self, vertex_id: int) -> Vertex:
        return self.vertices[vertex_id]

    def operator_uids(self) -> list[str]:
        return [op.uid for v in self.vertices for op in v.operators]


def write_checkpoint(
    folder: Path,
    operators: dict[str, list[OperatorSnapshot]],
    *,
    max_parallelism: int = 128,
    checkpoint_id: int = 7,
    is_savepoint: bool = False,
) -> Path:
    """Write `folder` as checkpoint `checkpoint_id`: per uid, one snapshot per subtask."""
    folder.mkdir(parents=True, exist_ok=True)
    shape = Shape(
        [Vertex(len(snaps), [Operator(uid, f"Op {uid}")]) for uid, snaps in operators.items()],
        max_parallelism=max_parallelism,
    )
    handles = {}
    for vertex_id, (uid, snapshots) in enumerate(operators.items()):
        for index, snapshot in enumerate(snapshots):
            key_groups = key_group_range_for_subtask(max_parallelism, len(snapshots), index)
            name = subtask_state_file.state_file_name(vertex_id, index, "test")
            sections = subtask_state_file.OperatorSections(
                keyed=None if snapshot.keyed is None else canonical_section(snapshot.keyed),
                operator=None
                if snapshot.operator is None
                else encode_operator_state(snapshot.operator),
                timers=timer_section(snapshot.timers),
            )
            encoded = subtask_state_file.encode(
                name, vertex_id, index, (key_groups.start, key_groups.end), {uid: sections}, None
            )
            assert encoded is not None
            data, handle = encoded
            (folder / name).write_bytes(data)
            handles[Subtask(vertex_id, index)] = handle
    metadata = build_metadata(
        shape, checkpoint_id, 1_700_000_000_000, False, handles, is_savepoint=is_savepoint
    )
    (folder / METADATA).write_bytes(_envelope.encode(METADATA_KIND, metadata))
    return folder
