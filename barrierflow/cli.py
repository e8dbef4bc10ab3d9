"""The `barrierflow` command: run a job file, list a job's checkpoints."""

from __future__ import annotations

import runpy
import sys
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
def checkpoints(checkpoint_dir: str, job_name: str) -> None:
    """List the completed checkpoints of JOB_NAME in CHECKPOINT_DIR."""
    from barrierflow.checkpoint.storage import FileSystemCheckpointStorage

    storage = FileSystemCheckpointStorage(checkpoint_dir, job_name)
    table = Table("id", "final", "operators", "path")
    ids = storage.completed_checkpoint_ids()
    for checkpoint_id in ids:
        metadata = storage.load_metadata(checkpoint_id)
        table.add_row(
            str(checkpoint_id),
            "yes" if metadata["is_final"] else "",
            str(len(metadata["operators"])),
            str(storage.checkpoint_dir(checkpoint_id)),
        )
    if not ids:
        console.print(f"no completed checkpoints of '{job_name}' in {storage.job_dir}")
        return
    Console().print(table)


if __name__ == "__main__":
    main()
