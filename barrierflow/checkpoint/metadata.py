"""Checkpoint metadata: built from the tasks' acknowledgements, and turned back into
what each subtask of a (possibly changed) job restores.

Metadata is keyed by operator uid, and file names are relative to the checkpoint
folder, so a checkpoint can be moved and restored into a job with other
parallelism.

Unaligned checkpoints also hold channel state (in-flight data) per subtask, under
"channel_state": the parallelism of every operator when it was taken, and per
subtask the slice of its state file. Channel state maps onto channels, so such a
checkpoint restores only into a job with the same parallelism everywhere.
Metadata without the section (older, or aligned checkpoints) reads as none.

A savepoint's metadata says so ("is_savepoint"); retention never deletes it.
Metadata written before the flag existed reads as a checkpoint.

An incremental checkpoint's metadata lists every shared file its state references
("shared_files": [[name, size], ...], names relative to the job folder, the parent of the
checkpoint's folder: `shared/<file>`), which the driver's shared-state registry counts.
Savepoints and full checkpoints have none; metadata without the field references none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from barrierflow import _fs
from barrierflow.checkpoint.handles import OperatorRestore, SubtaskStateHandle, section_as_list
from barrierflow.checkpoint.job_shape import JobShape, SubtaskRef
from barrierflow.errors import StateRestoreError
from barrierflow.state.key_groups import KeyGroupRange, key_group_range_for_subtask

METADATA_SCHEMA = 1


def build_metadata(
    graph: JobShape,
    checkpoint_id: int,
    timestamp: int,
    is_final: bool,
    handles: dict[SubtaskRef, SubtaskStateHandle | None],
    *,
    is_savepoint: bool = False,
    shared_files: Iterable[tuple[str, int]] = (),
) -> dict[str, Any]:
    operators: dict[str, dict[str, Any]] = {}
    for vertex in graph.vertices:
        for op in vertex.operators:
            operators[op.uid] = {"name": op.name, "parallelism": vertex.parallelism, "subtasks": []}
    for _subtask, handle in sorted(handles.items()):
        if handle is None:
            continue
        for uid, entry in handle.operators.items():
            operators[uid]["subtasks"].append(
                {
                    "subtask": handle.subtask,
                    "file": handle.file,
                    "key_group_range": list(handle.key_group_range),
                    "keyed": section_as_list(entry.keyed),
                    "operator": section_as_list(entry.operator),
                    "timers": section_as_list(entry.timers),
                }
            )
    channel_state = []
    for subtask, handle in sorted(handles.items()):
        if handle is None or handle.channel_state is None:
            continue
        head = graph.vertex(subtask.vertex_id).operators[0].uid
        offset, length = handle.channel_state
        channel_state.append(
            {
                "uid": head,
                "subtask": subtask.subtask_index,
                "file": handle.file,
                "offset": offset,
                "length": length,
            }
        )
    extra: dict[str, Any] = {}
    if channel_state:
        extra["channel_state"] = {
            "parallelism": {
                op.uid: vertex.parallelism for vertex in graph.vertices for op in vertex.operators
            },
            "subtasks": channel_state,
        }
    shared = dict(shared_files)  # one entry a file, whichever subtasks name it
    if shared:
        extra["shared_files"] = [[name, size] for name, size in sorted(shared.items())]
    return {
        **extra,
        "schema": METADATA_SCHEMA,
        "checkpoint_id": checkpoint_id,
        "timestamp": timestamp,
        "job_name": graph.job_name,
        "is_final": is_final,
        "is_savepoint": is_savepoint,
        "max_parallelism": graph.max_parallelism,
        "operators": {uid: o for uid, o in operators.items() if o["subtasks"]},
    }


def shared_files(metadata: dict[str, Any]) -> list[tuple[str, int]]:
    """The shared files a checkpoint references, as (name relative to the job folder, size);
    [] for savepoints, full checkpoints and metadata older than the field. Raises
    StateRestoreError for a name that is not a plain file of `shared/`."""
    found = []
    for entry in metadata.get("shared_files") or []:
        name, size = str(entry[0]), int(entry[1])
        parts = name.split("/")
        if len(parts) != 2 or parts[0] != "shared" or parts[1] in ("", ".", ".."):
            raise StateRestoreError(f"the metadata names the shared file {name!r}")
        found.append((name, size))
    return found


def shared_file_location(checkpoint_folder: _fs.Location, name: str) -> _fs.Location:
    """Where shared file `name` of the checkpoint in `checkpoint_folder` is: relative to
    its parent (the job folder it was taken in, even after the folder moved).

    >>> shared_file_location(_fs.Location("/jobs/a/chk-7"), "shared/x.sst").path
    '/jobs/a/shared/x.sst'
    """
    return checkpoint_folder.parent.child(*name.split("/"))


def is_savepoint(metadata: dict[str, Any]) -> bool:
    """Whether the metadata is a savepoint's (absent in metadata older than the flag: no)."""
    return bool(metadata.get("is_savepoint", False))


def check_compatible(
    graph: JobShape,
    metadata: dict[str, Any],
    where: str,
    *,
    allow_non_restored_state: bool = False,
) -> list[str]:
    """Refuse to restore state the job cannot take (unknown operators, other key groups).

    Operators are matched by uid; an operator of the job without state in `metadata`
    starts empty. State of an operator the job no longer has is refused, naming its uid
    and name, unless `allow_non_restored_state`: then the returned list names it (as
    "uid (name)") and it is left out of the restore.
    """
    uids = set(graph.operator_uids())
    unknown = sorted(set(metadata["operators"]) - uids)
    names = [f"{u} ({metadata['operators'][u]['name']})" for u in unknown]
    if unknown and not allow_non_restored_state:
        raise StateRestoreError(
            f"{where} holds state of operators that are not in this job: {', '.join(names)}. "
            "Give operators stable uid()s, or allow skipping that state "
            "(--allow-non-restored-state)"
        )
    channel_state = metadata.get("channel_state")
    if channel_state:
        recorded = channel_state["parallelism"]
        now = {op.uid: v.parallelism for v in graph.vertices for op in v.operators}
        if recorded != now:
            changed = sorted(
                f"{uid} ({recorded.get(uid, 'absent')} -> {now.get(uid, 'absent')})"
                for uid in set(recorded) | set(now)
                if recorded.get(uid) != now.get(uid)
            )
            raise StateRestoreError(
                f"{where} is an unaligned checkpoint holding in-flight data, which restores "
                "only into the same operators with the same parallelism; changed: "
                f"{', '.join(changed)}. To rescale, take a savepoint (always aligned) at the "
                "old parallelism and restore that, or restore an aligned checkpoint"
            )
    if metadata["max_parallelism"] != graph.max_parallelism:
        raise StateRestoreError(
            f"{where} was taken with max parallelism {metadata['max_parallelism']}, this job "
            f"has {graph.max_parallelism}; keyed state cannot be redistributed across them"
        )
    return names


def restore_assignment(
    graph: JobShape, metadata: dict[str, Any], checkpoint_dir: _fs.Location, subtask: SubtaskRef
) -> dict[str, OperatorRestore]:
    """What each operator of `subtask` restores: overlapping keyed state, all operator state."""
    vertex = graph.vertex(subtask.vertex_id)
    own = key_group_range_for_subtask(
        graph.max_parallelism, vertex.parallelism, subtask.subtask_index
    )
    result: dict[str, OperatorRestore] = {}
    for op in vertex.operators:
        stored = metadata["operators"].get(op.uid)
        if stored is None:
            continue
        keyed, operator, timers = [], [], []
        for entry in stored["subtasks"]:
            uri = checkpoint_dir.child(entry["file"]).uri
            start, end = entry["key_group_range"]
            overlaps = len(KeyGroupRange(start, end).intersection(own)) > 0
            if entry["keyed"] is not None and overlaps:
                keyed.append((uri, *entry["keyed"]))
            if entry["operator"] is not None:
                operator.append((entry["subtask"], uri, *entry["operator"]))
            # Metadata written before timers were checkpointed has no "timers".
            if entry.get("timers") is not None and overlaps:
                timers.append((uri, *entry["timers"]))
        result[op.uid] = OperatorRestore(keyed=keyed, operator=operator, timers=timers)
    return result


def channel_state_assignment(
    graph: JobShape, metadata: dict[str, Any], checkpoint_dir: _fs.Location, subtask: SubtaskRef
) -> tuple[str, int, int] | None:
    """(file URI, offset, length) of the channel state `subtask` replays, or None."""
    section = metadata.get("channel_state")
    if not section:
        return None
    head = graph.vertex(subtask.vertex_id).operators[0].uid
    for entry in section["subtasks"]:
        if entry["uid"] == head and entry["subtask"] == subtask.subtask_index:
            uri = checkpoint_dir.child(entry["file"]).uri
            return (uri, entry["offset"], entry["length"])
    return None
