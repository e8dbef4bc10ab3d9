"""The `barrierflow` command: run a job file, check it is exactly once under failures, show a
job's checkpoints and their statistics."""

from __future__ import annotations

import json
import random
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from barrierflow.api.environment import DEFAULT_FAILURE_KINDS, FAILURE_KINDS
from barrierflow.api.job_file import (
    DEFAULT_RESTORE_MODE,
    RESTORE_MODES,
    clean_up_job_file,
    command_line_settings,
    run_job_file,
    savepoint_restore,
    spark_options,
)
from barrierflow.chaos import ChaosCheck, ChaosError
from barrierflow.cli.jobs import add_job_commands
from barrierflow.cli.nexmark import nexmark
from barrierflow.cli.port import port
from barrierflow.cli.progress import ProgressWatcher
from barrierflow.cli.state import state
from barrierflow.errors import BarrierflowError, ConfigurationError
from barrierflow.jobs import (
    CheckpointStats,
    CheckpointStatsStatus,
    HistoryRecord,
    JobCheckpoints,
    SubtaskCheckpointStats,
    SubtaskDecline,
    checkpoint_summary,
    format_bytes,
    read_checkpoints,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from barrierflow.api.job_file import SparkOptions

console = Console(stderr=True)


@click.group()
def main() -> None:
    """barrierflow: exactly-once stream processing on Spark."""


main.add_command(state)
main.add_command(nexmark)
main.add_command(port)  # barrierflow port: cli/port.py


def spark_settings(command: Callable) -> Callable:
    """The Spark options `run` and `chaos` share (as `spark-submit` spells them); the command
    gets them as one SparkOptions, `spark`."""
    options = [
        click.option(
            "--conf",
            "conf",
            multiple=True,
            metavar="KEY=VALUE",
            help="A Spark setting for the job's session (repeatable), e.g. "
            "spark.executor.memory=2g or spark.barrierflow.slots.waitTimeout=2min.",
        ),
        click.option("--executor-memory", metavar="MEM", help="spark.executor.memory, e.g. 2g."),
        click.option(
            "--num-executors",
            type=click.IntRange(min=1),
            help="spark.executor.instances (YARN, Kubernetes; standalone with dynamic "
            "allocation off uses the workers' cores).",
        ),
        click.option("--executor-cores", type=click.IntRange(min=1), help="spark.executor.cores."),
        click.option(
            "--py-files",
            multiple=True,
            metavar="PATHS",
            help="Comma-separated .py, .zip or .egg files (or folders) the executors need on "
            "their Python path.",
        ),
        click.option(
            "--archives",
            multiple=True,
            metavar="PATHS",
            help="Comma-separated archives unpacked on each executor (spark.archives), e.g. a "
            "packed virtualenv env.tar.gz#environment with --conf "
            "spark.pyspark.python=./environment/bin/python.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _spark_options(context: dict) -> SparkOptions:
    """Pops the Spark options out of a command's parameters; a bad one is a usage error."""
    try:
        return spark_options(
            conf=context.pop("conf"),
            executor_memory=context.pop("executor_memory"),
            num_executors=context.pop("num_executors"),
            executor_cores=context.pop("executor_cores"),
            py_files=context.pop("py_files"),
            archives=context.pop("archives"),
        )
    except ConfigurationError as error:
        raise click.UsageError(str(error)) from None


@main.command()
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--parallelism",
    "-p",
    type=click.IntRange(min=1),
    help="Default parallelism of operators and environments that set none.",
)
@click.option("--master", help="Spark master URL (default: the embedded local[*]).")
@click.option("--checkpoint-dir", help="Checkpoint storage folder or URI.")
@click.option(
    "--from-savepoint",
    "-s",
    "savepoint",
    metavar="PATH",
    help="Start from this savepoint or retained checkpoint (its folder or its _metadata).",
)
@click.option(
    "--allow-non-restored-state",
    is_flag=True,
    help="Skip state of operators the job no longer has instead of refusing to start.",
)
@click.option(
    "--restore-mode",
    type=click.Choice(RESTORE_MODES),
    default=DEFAULT_RESTORE_MODE,
    show_default=True,
    help="claim: the job owns the restored folder and deletes it once newer checkpoints "
    "subsume it; no-claim: never touches it.",
)
@click.option(
    "--allow-fallback-duplicates",
    is_flag=True,
    help="If the newest checkpoint is damaged, fall back to an older one even though a "
    "sink cannot take back what the abandoned checkpoints committed (it is committed again).",
)
@click.option(
    "--progress",
    type=click.Choice(["auto", "live", "plain", "off"]),
    default="auto",
    show_default=True,
    help="How the job's progress shows: live (a panel refreshed twice a second), plain (a "
    "line every $BARRIERFLOW_PROGRESS_INTERVAL s, default 10), off; auto: live on a terminal, "
    "plain otherwise. Either way the REST/dashboard address comes first and a summary last.",
)
@spark_settings
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def run(
    job_file: Path,
    parallelism: int | None,
    master: str | None,
    checkpoint_dir: str | None,
    savepoint: str | None,
    allow_non_restored_state: bool,
    restore_mode: str,
    allow_fallback_duplicates: bool,
    progress: str,
    job_args: tuple[str, ...],
    **spark: object,
) -> None:
    """Run JOB_FILE, a Python file that builds a job and calls env.execute().

    Prints where to look as the job starts (its REST endpoint and dashboard, with the job's
    action token: keep it to yourself), its progress while it runs, and a summary at the
    end. Spark's own log, the JobMaster's and each task's are files in the job's log folder
    (printed; under $BARRIERFLOW_LOG_DIR, default ./.barrierflow/logs).
    """
    _check_job_file(job_file)
    options = _spark_options(spark)
    if savepoint is None and (allow_non_restored_state or restore_mode != "no-claim"):
        raise click.UsageError(
            "--allow-non-restored-state and --restore-mode need --from-savepoint"
        )
    restore = None
    if savepoint is not None:
        restore = savepoint_restore(savepoint, allow_non_restored_state, restore_mode)
    watch = None
    if progress != "off":
        terminal = {"live": True, "plain": False}.get(progress)
        watch = ProgressWatcher(sys.stdout, terminal=terminal)
    settings = command_line_settings(
        parallelism=parallelism,
        master=master,
        checkpoint_dir=checkpoint_dir,
        savepoint_restore=restore,
        allow_fallback_duplicates=allow_fallback_duplicates,
        spark_options=options,
        watch=watch,
    )
    try:
        with settings:
            run_job_file(job_file, job_args)
    except BarrierflowError as error:
        _fail(error)
    except KeyboardInterrupt:  # before env.execute() took over SIGINT: nothing ran yet
        console.print("barrierflow: stopped by SIGINT before the job started", highlight=False)
        sys.exit(130)


@main.command()
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--parallelism", "-p", type=click.IntRange(min=1), help="As for `run` (the killed run's)."
)
@click.option("--checkpoint-dir", help="As for `run`: the job's checkpoint storage.")
@click.option(
    "--from-savepoint",
    "-s",
    "savepoint",
    metavar="PATH",
    help="As for `run`: resolve as a rerun from this savepoint would.",
)
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def cleanup(
    job_file: Path,
    parallelism: int | None,
    checkpoint_dir: str | None,
    savepoint: str | None,
    job_args: tuple[str, ...],
) -> None:
    """Resolve what a killed run of JOB_FILE left in its sinks, without running it.

    A driver killed with SIGKILL (or a machine lost) cannot clean up: prepared transactions
    stay in PostgreSQL (holding row locks, blocking VACUUM), staged files in a FileSink's
    folder. This does what the next run's restore would do and nothing after it: commits
    what the newest completed checkpoint (or savepoint) covers and rolls back or deletes
    everything newer. JOB_FILE is run as `run` runs it only up to its first env.execute(),
    which defines the job (its sinks) without starting Spark; give the same options and
    arguments as the run. Refused while a run of the job holds its checkpoint folder.
    Exit status: 0 cleaned up, 1 a sink could not be (named) or the job is running.
    """
    _check_job_file(job_file)
    try:
        result = clean_up_job_file(
            job_file,
            job_args,
            parallelism=parallelism,
            checkpoint_dir=checkpoint_dir,
            savepoint=savepoint,
        )
    except BarrierflowError as error:
        _fail(error)
    for failure in result.failures:
        console.print(f"[red]error:[/red] could not clean up {escape(failure)}", highlight=False,
                      soft_wrap=True)  # fmt: skip
    if result.cleaned:
        click.echo(
            f"cleaned up sink(s) {', '.join(result.cleaned)} as a restore of {result.restored} "
            "would: committed what it covers, rolled back and deleted the rest"
        )
    if result.failures:
        sys.exit(1)


def _check_job_file(job_file: Path) -> None:
    """A usage error for a missing file, exit status 2 for one that is not Python."""
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


def _kinds(context: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(k.strip() for k in value.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in FAILURE_KINDS]
    if unknown or not kinds:
        raise click.BadParameter(
            f"unknown kind(s) {', '.join(unknown) or '(none)'}; "
            f"choose from {','.join(FAILURE_KINDS)}"
        )
    return kinds


@main.command(context_settings={"max_content_width": 100})
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--failures",
    "-n",
    type=click.IntRange(min=0),
    required=True,
    help="How many failures to inject into the second run.",
)
@click.option(
    "--kinds",
    default=",".join(DEFAULT_FAILURE_KINDS),
    show_default=True,
    callback=_kinds,
    help="Failure kinds, comma-separated: exception (a task raises, as user code would), "
    "kill (SIGKILL of a stream task's process), executor (SIGKILL of a Spark task's worker), "
    "restore (a task fails again while it restores), storage (transient storage errors on "
    "the next restore's checkpoint reads and the next _metadata write), "
    "jvm (SIGKILL of the executor JVM running a task; not on local[N], which has none), "
    "driver (SIGKILL of the whole driver, then a rerun that restores the newest checkpoint; "
    "the chaos run then runs in driver processes of its own, a Spark start-up per failure).",
)
@click.option("--seed", type=int, help="Seed of the failure plan (default: a random one, printed).")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of both runs' outputs and checkpoints (default: a new temporary folder).",
)
@click.option(
    "--max-gap",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Longest wait (s) before a failure once the job may take one.",
)
@click.option("--parallelism", "-p", type=click.IntRange(min=1), help="As for `run`.")
@click.option("--master", help="As for `run`.")
@spark_settings
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def chaos(
    job_file: Path,
    failures: int,
    kinds: tuple[str, ...],
    seed: int | None,
    workdir: Path | None,
    max_gap: float,
    parallelism: int | None,
    master: str | None,
    job_args: tuple[str, ...],
    **spark: object,
) -> None:
    """Check that JOB_FILE commits exactly once under failures.

    Runs JOB_FILE (as `barrierflow run` does) once without failures, then once with
    --failures failures injected at random moments, and compares what the sinks committed
    in the two runs as multisets. Prints a line per failure (its time, kind, task, and
    recovery time: from the failure to the job RUNNING again, every task restored and
    connected), then `exactly-once: OK`, or the records lost and duplicated.

    \b
    The job file is used as written. Each run gets its own folder under --workdir:
    every FileSink and DeltaSink path is rebased under <workdir>/<run>/outputs/, a
    PostgresSink writes the run's own empty copy of its table (<table>__reference,
    <table>__chaos), and the checkpoints go to <workdir>/<run>/checkpoints. A failure is
    injected only while the job runs and after a checkpoint completed since the previous
    recovery, so each one tests a restore. Both runs restart at once and without limit,
    whatever the job's restart strategy. The job needs checkpointing and enough input to
    take every failure (with a generator source: a rate, DataGeneratorSource(...,
    records_per_second=...); the failure-free run ignores the rate, which only paces the
    run: a job whose output depends on its pace cannot be checked by comparing two runs).

    \b
    A sink takes part if it can say what it committed (Sink.committed_output; FileSink,
    DeltaSink and PostgresSink can) and writes each run to its own place
    (Sink.output_location(path), or Sink.output_table(name) for a database table).

    \b
    Exit status: 0 exactly once; 1 records lost or duplicated, or the job failed;
    2 the check could not run as asked (bad job file, fewer failures than asked).
    """
    _check_job_file(job_file)
    options = _spark_options(spark)
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="barrierflow-chaos-"))
    check = ChaosCheck(
        job_file, job_args, failures, kinds, seed, workdir, max_gap, parallelism, master
    )
    try:
        with command_line_settings(spark_options=options):  # chaos keeps them for both runs
            result = check.run(click.echo)
    except (ChaosError, ConfigurationError) as error:
        console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except BarrierflowError as error:
        _fail(error)
    for line in result.lines:
        click.echo(line)
    if not result.exactly_once:
        sys.exit(1)
    if len(result.failures) < failures:
        sys.exit(2)


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
    try:
        found = read_checkpoints(checkpoint_dir, job_name)
        if details_id is not None:
            _show_details(found, details_id, as_json)
            return
    except (BarrierflowError, OSError) as error:
        _fail(error)
    entries = found.history
    shown = entries[-last:] if last else entries
    if as_json:
        click.echo(
            json.dumps(
                {
                    "job": job_name,
                    "folder": found.folder,
                    "retained": [
                        {
                            "id": c.checkpoint_id,
                            "is_final": c.is_final,
                            "operators": c.operators,
                            "path": c.path,
                        }
                        for c in found.retained
                    ],
                    "history": [checkpoint_summary(e) for e in reversed(shown)],
                },
                indent=2,
            )
        )
        return
    if not found.retained and not entries:
        console.print(f"no checkpoints of '{job_name}' in {found.folder}")
        return
    out = Console()
    if found.retained:
        table = Table("id", "final", "operators", "path", title="Completed checkpoints on disk")
        for checkpoint in found.retained:
            table.add_row(
                str(checkpoint.checkpoint_id),
                "yes" if checkpoint.is_final else "",
                str(checkpoint.operators),
                checkpoint.path,
            )
        out.print(table)
    else:
        out.print(f"no completed checkpoints of '{job_name}' on disk in {found.folder}")
    if entries:
        out.print(_history_table([e.stats for e in shown], len(entries)))


def _fail(error: BaseException) -> NoReturn:
    """One readable line and exit status 1 (checkpoint read problems name their file)."""
    console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
    sys.exit(1)


def _history_table(history: list[CheckpointStats], total: int) -> Table:
    title = "Checkpoint history" + (
        f" (last {len(history)} of {total})" if len(history) < total else ""
    )
    table = Table(
        "id",
        "status",
        "type",
        "trigger time",
        "duration",
        "state",
        "checkpointed",
        "sync max",
        "async max",
        "align max",
        "failure",
        title=title,
    )
    for stats in history:
        failed = stats.status is CheckpointStatsStatus.FAILED
        table.add_row(
            str(stats.checkpoint_id),
            _status_markup(stats.status.name),
            "savepoint" if stats.is_savepoint else ("final" if stats.is_final else ""),
            _time(stats.trigger_ms),
            f"{stats.duration_ms} ms",
            "" if failed else format_bytes(stats.state_bytes),
            "" if failed else format_bytes(stats.checkpointed_bytes),
            "" if failed else _ms(stats.max_sync_ms),
            "" if failed else _ms(stats.max_async_ms),
            "" if failed else _ms(stats.max_alignment_ms),
            stats.failure_message or "",
        )
    return table


def _show_details(found: JobCheckpoints, checkpoint_id: int, as_json: bool) -> None:
    matching = [e for e in found.history if e.stats.checkpoint_id == checkpoint_id]
    if not matching:
        raise BarrierflowError(
            f"checkpoint {checkpoint_id} of '{found.job_name}' is not in its history "
            f"({found.history_location} keeps the last {found.history_limit} checkpoints)"
        )
    entry: HistoryRecord = matching[-1]
    stats = entry.stats
    if as_json:
        click.echo(json.dumps(checkpoint_summary(entry, details=True), indent=2))
        return
    out = Console()
    out.print(
        f"{'savepoint' if stats.is_savepoint else 'checkpoint'} {checkpoint_id}: "
        f"{_status_markup(stats.status.name)}, triggered {_time(stats.trigger_ms)}, "
        f"{stats.duration_ms} ms" + (f", {stats.failure_message}" if stats.failure_message else "")
    )
    table = Table(
        "vertex",
        "subtask",
        "status",
        "after",
        "state",
        "checkpointed",
        "sync",
        "async",
        "alignment",
        "start delay",
        "persisted",
        "unaligned",
        title=f"Subtasks of checkpoint {checkpoint_id}",
    )
    for vertex in stats.vertices:
        for index, result in enumerate(stats.subtask_results(vertex)):
            row = [vertex.name, f"{index + 1}/{vertex.parallelism}"]
            if isinstance(result, SubtaskCheckpointStats):
                row += [
                    "acknowledged",
                    f"{result.ack_timestamp_ms - stats.trigger_ms} ms",
                    format_bytes(result.state_bytes),
                    format_bytes(result.uploaded_bytes),
                    _ms(result.sync_ms),
                    _ms(result.async_ms),
                    _ms(result.alignment_ms),
                    _ms(result.start_delay_ms),
                    format_bytes(result.persisted_bytes),
                    "yes" if result.unaligned else "",
                ]
            elif isinstance(result, SubtaskDecline):
                said = result.reason.name + (f": {result.message}" if result.message else "")
                after = result.timestamp_ms - stats.trigger_ms
                row += [f"[red]declined[/red] ({said})", f"{after} ms", *[""] * 8]
            else:
                in_progress = stats.status is CheckpointStatsStatus.IN_PROGRESS
                row += ["pending" if in_progress else "no answer", *[""] * 9]
            table.add_row(*row)
    out.print(table)


def _status_markup(status: str) -> str:
    colour = {"COMPLETED": "green", "FAILED": "red"}.get(status, "yellow")
    return f"[{colour}]{status}[/{colour}]"


def _time(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


add_job_commands(main)
