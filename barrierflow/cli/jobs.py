"""The commands that reach a running job: `barrierflow list`, `savepoint`, `stop`, `cancel`.

A job on this machine is found in the user's job registry (cluster/registry.py) by its id,
a unique prefix of it, or its name; `--rest URL --token T` reaches a job elsewhere
through its REST endpoint (then JOB is its id, a prefix, or its name as the endpoint lists
it). Every failure is one line on stderr and exit status 1; a usage error is status 2.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape

from barrierflow.cli.remote import RemoteJob, request_json
from barrierflow.errors import (
    BarrierflowError,
    JobLookupError,
    RemoteJobError,
    TokenRefusedError,
    UnreachableError,
)
from barrierflow.jobs import JobRegistry

__all__ = ["JOB_COMMANDS", "add_job_commands"]

_console = Console(stderr=True)


@dataclass(frozen=True)
class FoundJob:
    """A running job and how to reach it."""

    job_id: str
    name: str
    rest_url: str
    token: str | None
    start_ms: int | None
    status: str | None = None
    """As the endpoint listed it (remote jobs), else None: ask the job."""

    def remote(self, timeout_s: float = 10.0) -> RemoteJob:
        return RemoteJob(self.rest_url, self.job_id, self.token, timeout_s)

    def __str__(self) -> str:
        return f"{self.job_id} ({self.name})"


def resolve(query: str, jobs: list[FoundJob], where: str) -> FoundJob:
    """The one job `query` names: its id, a unique id prefix, or its name.

    >>> jobs = [FoundJob("4f1c", "count", "u", None, 0), FoundJob("4fa0", "join", "u", None, 0)]
    >>> resolve("4fa", jobs, "here").name, resolve("count", jobs, "here").job_id
    ('join', '4f1c')
    >>> resolve("4f", jobs, "here")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    barrierflow.errors.JobLookupError: '4f' matches 2 running jobs here: 4f1c (count), ...
    """
    exact = [j for j in jobs if j.job_id == query]
    if exact:
        return exact[0]
    matches = [j for j in jobs if j.job_id.startswith(query) or j.name == query]
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = ", ".join(str(j) for j in matches)
        raise JobLookupError(
            f"'{query}' matches {len(matches)} running jobs {where}: {listed}; give more of the id"
        )
    running = ", ".join(str(j) for j in jobs) if jobs else "none"
    raise JobLookupError(
        f"no running job '{query}' {where} (a job that ended leaves the list); "
        f"running jobs: {running}"
    )


def local_jobs(registry: JobRegistry | None = None) -> list[FoundJob]:
    registry = registry if registry is not None else JobRegistry.default()
    return [FoundJob(e.job_id, e.name, e.rest_url, e.token, e.start_ms) for e in registry.entries()]


def remote_jobs(rest_url: str, token: str | None) -> list[FoundJob]:
    """The jobs an endpoint serves (`GET /jobs/overview`)."""
    overview = request_json("GET", rest_url.rstrip("/") + "/jobs/overview")[1]
    return [
        FoundJob(j["jid"], j.get("name", ""), rest_url, token, j.get("start-time"), j.get("state"))
        for j in overview.get("jobs", [])
    ]


def _find(job: str, rest_url: str | None, token: str | None) -> FoundJob:
    if rest_url is None:
        return resolve(job, local_jobs(), "on this machine")
    return resolve(job, remote_jobs(rest_url, token), f"at {rest_url}")


def _fail(message: str) -> NoReturn:
    _console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(1)


def _reporting_errors(command: Callable[..., None]) -> Callable[..., None]:
    """Turn every barrierflow and OS error of a command into one line and exit status 1."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except TokenRefusedError as error:
            hint = "" if error.status == 403 else "; pass the job's token with --token"
            _fail(f"{error}{hint}")
        except (BarrierflowError, OSError) as error:
            _fail(str(error))

    return run


_rest_option = click.option(
    "--rest",
    "rest_url",
    metavar="URL",
    help="The REST endpoint of a job elsewhere (http://host:port); default: this machine's "
    "job registry.",
)
_token_option = click.option(
    "--token",
    metavar="T",
    envvar="BARRIERFLOW_JOB_TOKEN",
    help="The job's action token, with --rest (`barrierflow list --json` on the job's "
    "machine shows it; env BARRIERFLOW_JOB_TOKEN).",
)
_timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="Longest wait (s) for the job to answer.",
)


# ---- list --------------------------------------------------------------------------------------


@click.command("list")
@_rest_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with REST URLs and tokens).")
@_reporting_errors
def list_jobs(rest_url: str | None, as_json: bool) -> None:
    """List the running jobs on this machine: id, name, status, uptime, last checkpoint."""
    jobs = local_jobs() if rest_url is None else remote_jobs(rest_url, None)
    now_ms = time.time_ns() // 1_000_000
    rows = [_describe(job, now_ms) for job in jobs]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        where = f"at {rest_url}" if rest_url else "on this machine"
        click.echo(f"no running jobs {where}")
        return
    table = [("JOB ID", "NAME", "STATUS", "UPTIME", "LAST CHECKPOINT")] + [
        (r["id"], r["name"], r["status"], _duration(r["uptime_s"]), _last_checkpoint(r, now_ms))
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        padded = [v.ljust(w) for v, w in zip(row[:-1], widths, strict=True)]
        click.echo("  ".join([*padded, row[-1]]))


def _describe(job: FoundJob, now_ms: int) -> dict[str, Any]:
    """A job's row, its status and last checkpoint read from its REST view."""
    remote = job.remote(timeout_s=5.0)
    status, start_ms, latest = job.status, job.start_ms, None
    try:
        details = remote.details()
        status, start_ms = details.get("state", status), details.get("start-time", start_ms)
        latest = remote.checkpoints().get("latest", {}).get("completed")
    except RemoteJobError:
        status = status or "UNREACHABLE"
    row: dict[str, Any] = {
        "id": job.job_id,
        "name": job.name,
        "status": status or "UNKNOWN",
        "start_time": start_ms,
        "uptime_s": None if start_ms is None else max(0, now_ms - start_ms) / 1000,
        "last_checkpoint": None
        if latest is None
        else {"id": latest.get("id"), "completion_timestamp": latest.get("latest_ack_timestamp")},
        "rest": job.rest_url,
    }
    if job.token is not None:
        row["token"] = job.token
    return row


def _duration(seconds: float | None) -> str:
    """
    >>> _duration(5.4), _duration(125), _duration(3 * 3600 + 65), _duration(None)
    ('5s', '2m05s', '3h01m', '-')
    """
    if seconds is None:
        return "-"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _last_checkpoint(row: dict[str, Any], now_ms: int) -> str:
    latest = row["last_checkpoint"]
    if latest is None:
        return "-"
    at = latest.get("completion_timestamp")
    ago = "" if at is None else f" ({_duration(max(0, now_ms - at) / 1000)} ago)"
    return f"#{latest['id']}{ago}"


# ---- savepoint, stop, cancel -------------------------------------------------------------------


@click.command()
@click.argument("job")
@click.option("--dir", "target_dir", metavar="DIR", help="Target folder (default: the job's).")
@_timeout_option
@_rest_option
@_token_option
@_reporting_errors
def savepoint(
    job: str, target_dir: str | None, timeout: float, rest_url: str | None, token: str | None
) -> None:
    """Take a savepoint of JOB (an id, a unique id prefix, or a name); print its path."""
    found = _find(job, rest_url, token)
    remote = found.remote()
    trigger_id = remote.trigger_savepoint(target_dir)
    _console.print(f"savepoint of job {escape(str(found))} triggered ({trigger_id})")
    click.echo(_savepoint_location(remote, trigger_id, timeout))


@click.command()
@click.argument("job")
@click.option("--savepoint-dir", metavar="DIR", help="Target folder (default: the job's).")
@click.option("--drain", is_flag=True, help="Advance event time to the end first (windows fire).")
@_timeout_option
@_rest_option
@_token_option
@_reporting_errors
def stop(
    job: str,
    savepoint_dir: str | None,
    drain: bool,
    timeout: float,
    rest_url: str | None,
    token: str | None,
) -> None:
    """Stop JOB with a savepoint: print the savepoint's path, wait until the job ended."""
    found = _find(job, rest_url, token)
    remote = found.remote()
    trigger_id = remote.stop(savepoint_dir, drain)
    _console.print(f"stopping job {escape(str(found))} with a savepoint ({trigger_id})")
    click.echo(_savepoint_location(remote, trigger_id, timeout))
    state = remote.wait_until_ended(timeout)
    _console.print(f"job {escape(str(found))} ended" + (f": {state}" if state else ""))


@click.command()
@click.argument("job")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Longest wait (s) for the job to end.",
)
@_rest_option
@_token_option
@_reporting_errors
def cancel(job: str, timeout: float, rest_url: str | None, token: str | None) -> None:
    """Cancel JOB (an id, a unique id prefix, or a name) and wait until it ended."""
    found = _find(job, rest_url, token)
    remote = found.remote()
    remote.cancel()
    state = remote.wait_until_ended(timeout)
    click.echo(f"job {found} cancelled" + (f" ({state})" if state else ""))


def _savepoint_location(remote: RemoteJob, trigger_id: str, timeout: float) -> str:
    try:
        return remote.wait_for_savepoint(trigger_id, timeout)
    except UnreachableError as error:
        raise RemoteJobError(
            f"the job's endpoint went away before the savepoint completed: {error}"
        ) from None


JOB_COMMANDS = (list_jobs, savepoint, stop, cancel)


def add_job_commands(group: click.Group) -> None:
    """Add `list`, `savepoint`, `stop` and `cancel` to the `barrierflow` group."""
    for command in JOB_COMMANDS:
        group.add_command(command)
