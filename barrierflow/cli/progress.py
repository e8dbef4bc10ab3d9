"""What `barrierflow run` shows while a job runs: where to look, its progress, and a summary.

A pure core turns the JobMaster's published views (JobStatus, JobView, MetricsSnapshot) into
`ProgressFigures`, and figures into lines; `ProgressWatcher` reads the views from the main
thread while the job runs on its own and prints them: a live panel (rich, refreshed twice a
second) on a terminal, a plain line every few seconds otherwise (CI, pipes), and a summary
when the job ends.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from barrierflow.jobs import JobStatus

if TYPE_CHECKING:
    from barrierflow.api.environment import JobClient
    from barrierflow.jobs import JobGraph, JobView, MetricsSnapshot

__all__ = [
    "JobShape",
    "JobSummary",
    "ProgressFigures",
    "ProgressWatcher",
    "endpoint_lines",
    "figures_of",
    "job_shape",
    "progress_line",
    "summary_lines",
]

REFRESH_PER_SECOND = 2
PLAIN_INTERVAL_ENV = "BARRIERFLOW_PROGRESS_INTERVAL"
"""Seconds between two plain progress lines (not on a terminal); default 10."""
PLAIN_INTERVAL_S = 10.0


@dataclass(frozen=True)
class ProgressFigures:
    """The job at one moment, as the console shows it."""

    elapsed_s: float
    state: str
    restarts: int
    records_in_per_s: float | None = None
    """What the sources read per second (None until two metrics reports)."""
    records_out_per_s: float | None = None
    """What the sink operators took per second (what the job writes)."""
    records_in: int = 0
    """What the sources read in the current attempt."""
    records_out: int = 0
    """What the sink operators took in the current attempt."""
    last_checkpoint: int | None = None
    last_checkpoint_ms: int | None = None
    checkpoints_completed: int = 0
    checkpoints_failed: int = 0
    watermark_lag_ms: float | None = None
    """The largest over the vertices (None without event time)."""


@dataclass(frozen=True)
class JobSummary:
    """What the console says when the job ended."""

    job_name: str
    figures: ProgressFigures
    log_dir: Path | None
    error: str | None = None


RATE_STATES = (JobStatus.RUNNING, JobStatus.FINISHING)
"""States in which the current attempt's tasks run, so its rates are the job's rates; in
the others (DEPLOYING, RESTARTING, ...) no attempt runs and the rates show as unknown."""


@dataclass(frozen=True)
class JobShape:
    """Where the progress reads its figures: the source vertices (their head operator's
    output is what the job reads) and the sink operators (what they take in is what the job
    writes, wherever they sit in their chain), each with its parallelism, so a rate is
    only shown once every subtask of them has one."""

    sources: dict[int, int]
    """Vertex id -> parallelism, for the vertices whose head is a source."""
    sinks: dict[str, int]
    """Operator uid -> parallelism, for every sink operator."""


def job_shape(graph: JobGraph) -> JobShape:
    """The source vertices and the sink operators of `graph`."""
    sources = {v.vertex_id: v.parallelism for v in graph.vertices if v.is_source}
    sinks = {
        op.uid: v.parallelism
        for v in graph.vertices
        for op in v.operators
        if op.transformation.kind == "sink"
    }
    return JobShape(sources, sinks)


def figures_of(
    elapsed_s: float,
    state: str,
    attempt: int,
    view: JobView | None,
    metrics: MetricsSnapshot | None,
    shape: JobShape,
) -> ProgressFigures:
    """The figures the published views give: the sources' output and the sink operators'
    input, the newest completed checkpoint, the worst watermark lag.

    Only the current attempt's reports count. A rate shows only while that attempt runs
    (`RATE_STATES`: the last rates of an attempt that failed are no figure of the job while
    it restarts) and once every source subtask (every sink operator's subtask) has one: a
    sum over the subtasks that happen to have reported twice would show a fraction of the
    job's rate."""
    rates_in: list[float] = []
    rates_out: list[float] = []
    total_in = total_out = 0
    lag = None
    if metrics is not None:
        for subtask in metrics.subtasks:
            if not subtask.operators or subtask.attempt != attempt:
                continue
            if subtask.vertex_id in shape.sources:
                head = subtask.operators[0]
                total_in += head.records_out
                if head.records_out_per_second is not None:
                    rates_in.append(head.records_out_per_second)
            for op in subtask.operators:
                if op.uid in shape.sinks:
                    total_out += op.records_in
                    if op.records_in_per_second is not None:
                        rates_out.append(op.records_in_per_second)
        lags = [v.watermark_lag_ms for v in metrics.vertices if v.watermark_lag_ms is not None]
        lag = max(lags) if lags else None
    running = state in RATE_STATES
    rate_in = _whole(rates_in, sum(shape.sources.values())) if running else None
    rate_out = _whole(rates_out, sum(shape.sinks.values())) if running else None
    latest = completed = failed = None
    if view is not None:
        counts = view.checkpoints.counts
        completed, failed = counts.completed, counts.failed
        latest = view.checkpoints.latest_completed
    return ProgressFigures(
        elapsed_s=elapsed_s,
        state=state,
        restarts=attempt,
        records_in_per_s=rate_in,
        records_out_per_s=rate_out,
        records_in=total_in,
        records_out=total_out,
        last_checkpoint=latest.checkpoint_id if latest is not None else None,
        last_checkpoint_ms=latest.duration_ms if latest is not None else None,
        checkpoints_completed=completed or 0,
        checkpoints_failed=failed or 0,
        watermark_lag_ms=lag,
    )


def _whole(rates: list[float], expected: int) -> float | None:
    """The sum of the rates if every one of the `expected` subtasks gave one, else None.

    >>> _whole([200.0, 100.0], 2), _whole([200.0], 2), _whole([], 0)
    (300.0, None, None)
    """
    if not expected or len(rates) < expected:
        return None
    return sum(rates)


# ---- figures -> words ----------------------------------------------------------------------------


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}/s"


def _duration_ms(value: float) -> str:
    """
    >>> _duration_ms(312), _duration_ms(1540), _duration_ms(125_000)
    ('312 ms', '1.5 s', '2 min 5 s')
    """
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    minutes, seconds = divmod(int(value / 1000), 60)
    return f"{minutes} min {seconds} s"


def _checkpoint(figures: ProgressFigures) -> str:
    if figures.last_checkpoint is None:
        return "none yet"
    duration = _duration_ms(figures.last_checkpoint_ms or 0)
    return f"{figures.last_checkpoint} in {duration}"


def progress_line(figures: ProgressFigures) -> str:
    """One plain line (for logs, CI, pipes).

    >>> print(progress_line(ProgressFigures(12.0, "RUNNING", 1, 2000.0, 1990.5, 24000, 23800,
    ...                                     7, 312, 7, 0, 1200.0)))
    [12 s] RUNNING: in 2,000/s, out 1,990/s, checkpoint 7 in 312 ms (7 completed, 0 failed), \
watermark lag 1.2 s, 1 restart
    """
    parts = [
        f"in {_rate(figures.records_in_per_s)}",
        f"out {_rate(figures.records_out_per_s)}",
        f"checkpoint {_checkpoint(figures)} "
        f"({figures.checkpoints_completed} completed, {figures.checkpoints_failed} failed)",
    ]
    if figures.watermark_lag_ms is not None:
        parts.append(f"watermark lag {_duration_ms(figures.watermark_lag_ms)}")
    parts.append(_restarts(figures.restarts))
    return f"[{figures.elapsed_s:.0f} s] {figures.state}: " + ", ".join(parts)


def _restarts(count: int) -> str:
    return f"{count} restart" + ("" if count == 1 else "s")


def progress_table(job_name: str, figures: ProgressFigures) -> Table:
    """The terminal's live panel."""
    table = Table(title=f"{job_name}: {figures.state}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("running for", _duration_ms(figures.elapsed_s * 1000))
    table.add_row("records in", f"{_rate(figures.records_in_per_s)} ({figures.records_in:,})")
    table.add_row("records out", f"{_rate(figures.records_out_per_s)} ({figures.records_out:,})")
    table.add_row(
        "last checkpoint",
        f"{_checkpoint(figures)} ({figures.checkpoints_completed} completed, "
        f"{figures.checkpoints_failed} failed)",
    )
    lag = figures.watermark_lag_ms
    table.add_row("watermark lag", "-" if lag is None else _duration_ms(lag))
    table.add_row("restarts", str(figures.restarts))
    return table


def endpoint_lines(
    job_name: str, job_id: str, rest_url: str | None, token: str | None
) -> list[str]:
    """Where to look as the job starts (the dashboard reads the token from the fragment,
    which browsers never send to the server).

    >>> for line in endpoint_lines("wc", "ab12", "http://127.0.0.1:8081", "t0k"):
    ...     print(line)
    job 'wc' (ab12): REST endpoint at http://127.0.0.1:8081/jobs/ab12
    dashboard: http://127.0.0.1:8081/#token=t0k
    >>> endpoint_lines("wc", "ab12", None, None)
    ["job 'wc' (ab12): no REST endpoint (BARRIERFLOW_REST_PORT=off, or its port was taken)"]
    """
    if rest_url is None:
        return [
            f"job '{job_name}' ({job_id}): no REST endpoint "
            f"(BARRIERFLOW_REST_PORT=off, or its port was taken)"
        ]
    dashboard = f"{rest_url}/" + (f"#token={token}" if token else "")
    return [
        f"job '{job_name}' ({job_id}): REST endpoint at {rest_url}/jobs/{job_id}",
        f"dashboard: {dashboard}",
    ]


def summary_lines(summary: JobSummary) -> list[str]:
    """The lines printed when the job ended.

    >>> figures = ProgressFigures(31.4, "FINISHED", 2, None, None, 5000, 4990, 9, 120, 9, 1)
    >>> for line in summary_lines(JobSummary("wc", figures, Path("/logs/wc-1"))):
    ...     print(line)
    job 'wc' FINISHED after 31.4 s
    records: 5,000 read by the sources, 4,990 taken by the sinks (since the last restart)
    checkpoints: 9 completed, 1 failed (last: 9 in 120 ms); 2 restarts
    logs: /logs/wc-1
    """
    figures = summary.figures
    since = " (since the last restart)" if figures.restarts else ""
    lines = [
        f"job '{summary.job_name}' {figures.state} after {_duration_ms(figures.elapsed_s * 1000)}"
        + (f": {summary.error}" if summary.error else ""),
        f"records: {figures.records_in:,} read by the sources, "
        f"{figures.records_out:,} taken by the sinks{since}",
        f"checkpoints: {figures.checkpoints_completed} completed, "
        f"{figures.checkpoints_failed} failed"
        + (f" (last: {_checkpoint(figures)})" if figures.last_checkpoint is not None else "")
        + f"; {_restarts(figures.restarts)}",
    ]
    if summary.log_dir is not None:
        lines.append(f"logs: {summary.log_dir}")
    return lines


# ---- the console ---------------------------------------------------------------------------------


class ProgressWatcher:
    """Shows a running job on the console until it ends (`barrierflow run`: the main thread,
    through `command_line_defaults.watch`). Reads only the JobClient's published views.

    `terminal`: a live panel (True) or plain lines (False); None: whether `out` is one."""

    def __init__(
        self,
        out: TextIO,
        terminal: bool | None = None,
        plain_interval_s: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._out = out
        self._terminal = out.isatty() if terminal is None else terminal
        if plain_interval_s is None:
            plain_interval_s = float(os.environ.get(PLAIN_INTERVAL_ENV) or PLAIN_INTERVAL_S)
        self._plain_interval_s = plain_interval_s
        self._monotonic = monotonic

    def __call__(self, client: JobClient) -> None:
        started = self._monotonic()
        shape = job_shape(client.job_graph)
        name = client.job_graph.job_name

        def figures() -> ProgressFigures:
            return figures_of(
                self._monotonic() - started,
                client.get_job_status(),
                client.attempt,
                client.view,
                client.metrics,
                shape,
            )

        self._announce(client)
        if self._terminal:
            console = Console(file=self._out)
            with Live(
                progress_table(name, figures()),
                console=console,
                refresh_per_second=REFRESH_PER_SECOND,
                transient=True,
            ) as live:
                while not client.join(1 / REFRESH_PER_SECOND):
                    live.update(progress_table(name, figures()))
        else:
            while not client.join(self._plain_interval_s):
                self._print([progress_line(figures())])
        error = None
        try:
            client.wait()
        except BaseException as failure:  # execute raises it again after the summary
            error = str(failure).splitlines()[0] if str(failure) else type(failure).__name__
        self._print(summary_lines(JobSummary(name, figures(), client.log_dir, error)))

    def _announce(self, client: JobClient) -> None:
        """Print where to look once the REST endpoint started (or the job got past it); nothing
        if the job ended first (it could not start: the summary says why)."""
        while client.rest_url is None and client.get_job_status() == JobStatus.CREATED:
            if client.join(0.05):
                return
        url = client.rest_url
        name, token = client.job_graph.job_name, client.action_token if url else None
        self._print(endpoint_lines(name, client.get_job_id(), url, token))
        self._print([f"logs: {client.log_dir}"])

    def _print(self, lines: Iterable[str]) -> None:
        for line in lines:
            print(line, file=self._out, flush=True)
