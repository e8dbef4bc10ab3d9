"""The `barrierflow` command: run a job file, show a job's checkpoints and their statistics."""

from __future__ import annotations

import json
import runpy
import sys
from datetime import datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from barrierflow.api.environment import command_line_defaults
from barrierflow.errors import BarrierflowError

console = Console(stderr=True)


@click.group()
def main() -> None:
    """barrierflow: exactly-once stream processing on Spark."""


@main.command()
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--parallelism", "-p", type=click.IntRange(min=1), help="Default parallelism.")
@click.option("--master", help="Spark master URL (default: the embedded local[*]).")
@click.option("--checkpoint-dir", help="Checkpoint storage folder or URI.")
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def run(
    job_file: Path,
    parallelism: int | None,
    master: str | None,
    checkpoint_dir: str | None,
    job_args: tuple[str, ...],
) -> None:
    """Run JOB_FILE, a Python file that builds a job and calls env.execute()."""
    if not job_file.is_file():
        raise click.BadParameter(
            f"{job_file} does not exist or is not a file", param_hint="JOB_FILE"
        )
    source = job_file.read_text(encoding="utf-8")
    try:
        compile(source, str(job_file), "exec")
    except SyntaxError as error:
        console.print(
            f"[red]error:[/red] {job_file} is not a valid Python job file: {error.msg} "
            f"(line {error.lineno}, column {error.offset})"
        )
        sys.exit(2)
    command_line_defaults.parallelism = parallelism
    command_line_defaults.master = master
    command_line_defaults.checkpoint_dir = checkpoint_dir
    sys.argv = [str(job_file), *job_args]
    sys.path.insert(0, str(job_file.resolve().parent))
    try:
        runpy.run_path(str(job_file), run_name="__main__")
    except BarrierflowError as error:
        console.print(f"[red]error:[/red] {error}")
        sys.exit(1)


@main.command()
@click.argument("checkpoint_dir")
@click.argument("job_name")
@click.option(
    "--details", "details_id", type=int, metavar="ID", help="Show every subtask of checkpoint ID."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--last",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="How many history entries to show (0: all the file keeps).",
)
def checkpoints(
    checkpoint_dir: str, job_name: str, details_id: int | None, as_json: bool, last: int
) -> None:
    """Show the checkpoints of JOB_NAME in CHECKPOINT_DIR.

    First the completed checkpoints still on disk, then the history of finished
    checkpoints (completed and failed, newest last) with their durations, sizes,
    synchronous/asynchronous/alignment maxima and failure reasons.
    """
    from barrierflow.checkpoint.history import CheckpointHistoryFile
    from barrierflow.checkpoint.storage import FileSystemCheckpointStorage

    try:
        storage = FileSystemCheckpointStorage(checkpoint_dir, job_name)
        _require_job_folder(storage, checkpoint_dir, job_name)
        history = CheckpointHistoryFile(storage.job_dir)
        records = history.read_records()
        if details_id is not None:
            _show_details(records, details_id, job_name, history, as_json)
            return
        retained = []
        for checkpoint_id in storage.completed_checkpoint_ids():
            metadata = storage.load_metadata(checkpoint_id)
            retained.append(
                {
                    "id": checkpoint_id,
                    "is_final": bool(metadata["is_final"]),
                    "operators": len(metadata["operators"]),
                    "path": str(storage.checkpoint_dir(checkpoint_id)),
                }
            )
    except BarrierflowError as error:
        console.print(f"[red]error:[/red] {error}")
        sys.exit(1)
    shown = records[-last:] if last else records
    if as_json:
        for record in shown:
            record.pop("tasks", None)
        click.echo(
            json.dumps(
                {
                    "job": job_name,
                    "folder": str(storage.job_dir),
                    "retained": retained,
                    "history": shown[::-1],
                },
                indent=2,
            )
        )
        return
    if not retained and not records:
        console.print(f"no checkpoints of '{job_name}' in {storage.job_dir}")
        return
    out = Console()
    if retained:
        table = Table("id", "final", "operators", "path", title="Completed checkpoints on disk")
        for entry in retained:
            table.add_row(
                str(entry["id"]),
                "yes" if entry["is_final"] else "",
                str(entry["operators"]),
                entry["path"],
            )
        out.print(table)
    else:
        out.print(f"no completed checkpoints of '{job_name}' on disk in {storage.job_dir}")
    if records:
        out.print(_history_table(shown, len(records)))


def _require_job_folder(storage, checkpoint_dir: str, job_name: str) -> None:
    """A clear error when CHECKPOINT_DIR holds no folder for JOB_NAME (naming those it holds)."""
    from barrierflow import _fs
    from barrierflow.checkpoint.history import HISTORY_FILE

    try:
        found = _fs.is_dir(storage.job_dir)
        if found:
            return
        if not _fs.is_dir(storage.root):
            raise BarrierflowError(f"checkpoint folder {storage.root} does not exist")
        jobs = [
            name
            for name in _fs.list_dir(storage.root)
            if any(
                n == HISTORY_FILE or n.startswith("chk-")
                for n in _fs.list_dir(storage.root.child(name))
            )
        ]
    except OSError as error:
        raise BarrierflowError(f"cannot read {checkpoint_dir}: {error}") from error
    known = f"; it holds the jobs: {', '.join(jobs)}" if jobs else "; it holds no jobs"
    raise BarrierflowError(f"no job '{job_name}' in {storage.root}{known}")


def _history_table(records: list[dict], total: int) -> Table:
    from barrierflow.checkpoint.stats import format_bytes

    title = "Checkpoint history" + (
        f" (last {len(records)} of {total})" if len(records) < total else ""
    )
    table = Table(
        "id",
        "status",
        "type",
        "trigger time",
        "duration",
        "state",
        "sync max",
        "async max",
        "align max",
        "failure",
        title=title,
    )
    for record in records:
        failed = record["status"] == "FAILED"
        table.add_row(
            str(record["id"]),
            _status_markup(record["status"]),
            "savepoint" if record["is_savepoint"] else ("final" if record["is_final"] else ""),
            _time(record["trigger_timestamp"]),
            f"{record['duration']} ms",
            "" if failed else format_bytes(record["state_size"]),
            "" if failed else _ms(record["sync_duration_max"]),
            "" if failed else _ms(record["async_duration_max"]),
            "" if failed else _ms(record["alignment_duration_max"]),
            record["failure_message"] or "",
        )
    return table


def _show_details(records, checkpoint_id: int, job_name: str, history, as_json: bool) -> None:
    from barrierflow.checkpoint.stats import format_bytes

    matching = [r for r in records if r["id"] == checkpoint_id]
    if not matching:
        raise BarrierflowError(
            f"checkpoint {checkpoint_id} of '{job_name}' is not in its history "
            f"({history.location} keeps the last {history.limit} checkpoints)"
        )
    record = matching[-1]
    if as_json:
        click.echo(json.dumps(record, indent=2))
        return
    out = Console()
    out.print(
        f"{'savepoint' if record['is_savepoint'] else 'checkpoint'} {checkpoint_id}: "
        f"{_status_markup(record['status'])}, triggered {_time(record['trigger_timestamp'])}, "
        f"{record['duration']} ms"
        + (f", {record['failure_message']}" if record["failure_message"] else "")
    )
    table = Table(
        "vertex",
        "subtask",
        "status",
        "after",
        "state",
        "sync",
        "async",
        "alignment",
        "start delay",
        "persisted",
        "unaligned",
        title=f"Subtasks of checkpoint {checkpoint_id}",
    )
    for task in record["tasks"].values():
        for sub in task["subtasks"]:
            row = [task["name"], f"{sub['index'] + 1}/{task['parallelism']}"]
            if sub["status"] == "completed":
                row += [
                    "acknowledged",
                    f"{sub['end_to_end_duration']} ms",
                    format_bytes(sub["state_size"]),
                    _ms(sub["checkpoint"]["sync"]),
                    _ms(sub["checkpoint"]["async"]),
                    _ms(sub["alignment"]["duration"]),
                    _ms(sub["start_delay"]),
                    format_bytes(sub["alignment"]["persisted"]),
                    "yes" if sub["unaligned_checkpoint"] else "",
                ]
            elif sub["status"] == "declined":
                said = sub["reason"] + (f": {sub['message']}" if sub["message"] else "")
                after = sub["decline_timestamp"] - record["trigger_timestamp"]
                row += [f"[red]declined[/red] ({said})", f"{after} ms", *[""] * 7]
            else:
                waiting = "pending" if record["status"] == "IN_PROGRESS" else "no answer"
                row += [waiting, *[""] * 8]
            table.add_row(*row)
    out.print(table)


def _status_markup(status: str) -> str:
    colour = {"COMPLETED": "green", "FAILED": "red"}.get(status, "yellow")
    return f"[{colour}]{status}[/{colour}]"


def _time(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


if __name__ == "__main__":
    main()
