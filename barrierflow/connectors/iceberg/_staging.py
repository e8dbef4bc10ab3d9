"""What the sink's subtasks hand to its committer, and what the table says was committed.

A subtask pre-commits checkpoint K of deployment D by writing, under the table's metadata
folder, `barrierflow/<lineage>.<job digest>.<sink uid>/<D>/ck-<K>/`:
`<subtask>.avro`, an Iceberg manifest listing the data files it wrote (append mode), or
`<subtask>.parquet`, its rows (upsert mode), and `<subtask>.dead.avro` for the data files
of its dead letters. No snapshot lists these files, so no reader sees them.

Every snapshot the committer makes carries `barrierflow.job`, `barrierflow.sink`,
`barrierflow.lineage`, `barrierflow.deployment` and `barrierflow.checkpoint` in its
summary. Walking the table's history for them says, per deployment of this job's sink and
lineage, the highest checkpoint committed: the committer never commits a folder at or
below it again, and the restore deletes the data files of folders above it (never
committed) and the folders themselves, in every lineage of the job's sink
(`list_lineages`), not only its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from typing import Any

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.iceberg._catalog import folder_of

__all__ = [
    "CHECKPOINT",
    "DEPLOYMENT",
    "JOB",
    "LINEAGE",
    "SINK",
    "committed_floors",
    "delete_tree",
    "files_in",
    "list_checkpoints",
    "list_deployments",
    "list_lineages",
    "read_manifest",
    "staging_root",
    "summary_properties",
    "write_manifest",
]

JOB, SINK, LINEAGE = "barrierflow.job", "barrierflow.sink", "barrierflow.lineage"
DEPLOYMENT, CHECKPOINT = "barrierflow.deployment", "barrierflow.checkpoint"

_CK = re.compile(r"ck-(\d+)")


def _hand_offs(table: Any) -> str:
    return f"{table.location().rstrip('/')}/metadata/barrierflow"


def _suffix(context: SinkContext) -> str:
    """`.<job digest>.<sink uid>`: what every lineage's root of this job's sink ends with."""
    job = hashlib.sha256(context.job_name.encode()).hexdigest()[:8]
    uid = re.sub(r"[^A-Za-z0-9_-]", "_", context.operator_uid)[:64]
    return f".{job}.{uid}"


def staging_root(table: Any, context: SinkContext, lineage: str) -> str:
    """The folder of this sink's hand-offs in this job and `lineage` (the lineage of the
    run that wrote them: a savepoint restored into new storage commits them from there)."""
    return f"{_hand_offs(table)}/{lineage or 'none'}{_suffix(context)}"


def list_lineages(table: Any, context: SinkContext) -> list[tuple[str, str]]:
    """(lineage, root) of every lineage of this job's sink that handed files over to
    `table`: its own, earlier ones, and ones a savepoint of it was restored into."""
    suffix = _suffix(context)
    found = []
    for name in _children(table, _hand_offs(table)):
        if name.endswith(suffix) and len(name) > len(suffix):
            lineage = name[: -len(suffix)]
            found.append(("" if lineage == "none" else lineage, f"{_hand_offs(table)}/{name}"))
    return found


def summary_properties(
    context: SinkContext, lineage: str, deployment: str, checkpoint: int
) -> dict[str, str]:
    """What every snapshot of the hand-offs of `lineage`, `deployment` up to `checkpoint`
    carries in its summary."""
    return {
        JOB: context.job_name,
        SINK: context.operator_uid,
        LINEAGE: lineage,
        DEPLOYMENT: deployment,
        CHECKPOINT: str(checkpoint),
    }


def committed_floors(table: Any, context: SinkContext, lineage: str) -> dict[str, int]:
    """Deployment -> the highest checkpoint of it this sink committed to `table` in this job
    and `lineage`, from the summaries of the current snapshot's ancestors."""
    from pyiceberg.table.snapshots import ancestors_of

    floors: dict[str, int] = {}
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if (
            props.get(JOB) == context.job_name
            and props.get(SINK) == context.operator_uid
            and props.get(LINEAGE) == lineage
        ):
            deployment, checkpoint = props.get(DEPLOYMENT, ""), int(props.get(CHECKPOINT, -1))
            floors[deployment] = max(floors.get(deployment, -1), checkpoint)
    return floors


def _children(table: Any, folder: str) -> list[str]:
    from pyarrow import fs as pafs

    filesystem, path = folder_of(table, folder)
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except FileNotFoundError:
        return []
    return sorted(info.base_name for info in infos if info.type == pafs.FileType.Directory)


def list_deployments(table: Any, root: str) -> list[str]:
    """The deployments that handed files over under `root`."""
    return _children(table, root)


def list_checkpoints(table: Any, root: str, deployment: str) -> list[tuple[int, str]]:
    """(checkpoint, folder) of every hand-off folder of `deployment`, oldest first."""
    found = []
    for name in _children(table, f"{root}/{deployment}"):
        match = _CK.fullmatch(name)
        if match:
            found.append((int(match[1]), f"{root}/{deployment}/{name}"))
    return sorted(found)


def files_in(table: Any, folder: str) -> list[str]:
    """The file names in `folder`, sorted."""
    from pyarrow import fs as pafs

    filesystem, path = folder_of(table, folder)
    infos = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(info.base_name for info in infos if info.type == pafs.FileType.File)


def delete_tree(table: Any, folder: str) -> None:
    """Delete `folder` and everything in it (missing: nothing to do)."""
    filesystem, path = folder_of(table, folder)
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_dir(path)


def write_manifest(table: Any, path: str, data_files: list[Any]) -> None:
    """An Iceberg manifest at `path` listing `data_files` as added (the hand-off)."""
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus
    from pyiceberg.manifest import write_manifest as writer_of

    with writer_of(
        table.metadata.format_version,
        table.spec(),
        table.schema(),
        table.io.new_output(path),
        snapshot_id=-1,
        avro_compression="deflate",
    ) as writer:
        for data_file in data_files:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED,
                    snapshot_id=None,
                    sequence_number=None,
                    file_sequence_number=None,
                    data_file=data_file,
                )
            )


def read_manifest(table: Any, path: str) -> list[Any]:
    """The data files a hand-off manifest lists."""
    from pyiceberg.manifest import ManifestContent, ManifestFile

    manifest = ManifestFile.from_args(
        manifest_path=path,
        manifest_length=len(table.io.new_input(path)),
        partition_spec_id=table.spec().spec_id,
        content=ManifestContent.DATA,
        sequence_number=0,
        min_sequence_number=0,
        added_snapshot_id=-1,
    )
    return [entry.data_file for entry in manifest.fetch_manifest_entry(table.io, False)]
