"""What `barrierflow run` prints: figures from the published views, event by event, and the
lines a terminal and a pipe get."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from barrierflow import StreamExecutionEnvironment
from barrierflow._clock import ManualClock
from barrierflow.cli.progress import (
    JobShape,
    JobSummary,
    ProgressFigures,
    ProgressWatcher,
    endpoint_lines,
    figures_of,
    job_shape,
    progress_line,
    summary_lines,
)
from barrierflow.cluster.metrics.store import MetricsStore
from barrierflow.cluster.metrics.view import (
    MetricsSnapshot,
    OperatorMetricsView,
    SubtaskMetricsView,
    VertexMetricsView,
)
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime.task_messages import TaskMetricsReport

SHAPE = JobShape(sources={0: 2}, sinks={"sink": 1})


def operator(uid, records_in, records_out, rate_in=None, rate_out=None, lag=None):
    return OperatorMetricsView(uid, uid, records_in, records_out, rate_in, rate_out, None, lag)


def subtask(vertex, index, *operators):
    return SubtaskMetricsView(
        vertex, index, 0, 0, 0, 0, 0, 0, None, None, None, None, None, None, None, operators
    )


def view(completed=0, failed=0, latest=None):
    counts = SimpleNamespace(completed=completed, failed=failed)
    return SimpleNamespace(checkpoints=SimpleNamespace(counts=counts, latest_completed=latest))


def test_before_any_report_the_figures_are_empty_not_zero():
    figures = figures_of(0.4, "DEPLOYING", 0, None, None, SHAPE)
    assert figures == ProgressFigures(0.4, "DEPLOYING", 0)
    assert progress_line(figures) == (
        "[0 s] DEPLOYING: in -, out -, checkpoint none yet (0 completed, 0 failed), 0 restarts"
    )


def test_sources_output_and_sinks_input_sum_over_subtasks_once_rates_exist():
    metrics = MetricsSnapshot(
        1000,
        0,
        0,
        subtasks=(
            subtask(0, 0, operator("src", 0, 100), operator("map", 100, 100)),
            subtask(0, 1, operator("src", 0, 50), operator("map", 50, 50)),
            subtask(1, 0, operator("count", 140, 140), operator("sink", 140, 0)),
        ),
    )
    figures = figures_of(1.0, "RUNNING", 0, view(), metrics, SHAPE)
    assert (figures.records_in, figures.records_out) == (150, 140)
    assert (figures.records_in_per_s, figures.records_out_per_s) == (None, None)

    metrics = MetricsSnapshot(
        2000,
        0,
        0,
        subtasks=(
            subtask(0, 0, operator("src", 0, 300, rate_out=200.0), operator("map", 300, 300)),
            subtask(0, 1, operator("src", 0, 150, rate_out=100.0), operator("map", 150, 150)),
            subtask(1, 0, operator("count", 400, 400), operator("sink", 400, 0, rate_in=260.0)),
        ),
    )
    figures = figures_of(2.0, "RUNNING", 0, view(), metrics, SHAPE)
    assert (figures.records_in_per_s, figures.records_out_per_s) == (300.0, 260.0)
    assert "in 300/s, out 260/s" in progress_line(figures)


def test_the_last_completed_checkpoint_and_the_worst_watermark_lag_show():
    latest = SimpleNamespace(checkpoint_id=4, duration_ms=1540)
    metrics = MetricsSnapshot(
        3000,
        1,
        1,
        vertices=(
            VertexMetricsView(0, "src", 2, 2, watermark_lag_ms=200.0),
            VertexMetricsView(1, "sink", 1, 1, watermark_lag_ms=2500.0),
        ),
    )
    figures = figures_of(9.0, "RUNNING", 1, view(4, 1, latest), metrics, SHAPE)
    assert (figures.last_checkpoint, figures.last_checkpoint_ms) == (4, 1540)
    assert figures.watermark_lag_ms == 2500.0
    line = progress_line(figures)
    assert "checkpoint 4 in 1.5 s (4 completed, 1 failed)" in line
    assert line.endswith("watermark lag 2.5 s, 1 restart")


def test_the_summary_says_how_it_ended_and_where_the_logs_are():
    figures = ProgressFigures(75.0, "FAILED", 3, None, None, 10, 8, 2, 90, 2, 0)
    lines = summary_lines(JobSummary("wc", figures, Path("/l/wc-1"), error="ValueError: x"))
    assert lines[0] == "job 'wc' FAILED after 1 min 15 s: ValueError: x"
    assert lines[-1] == "logs: /l/wc-1"
    assert "3 restarts" in lines[2]


def test_the_dashboard_line_carries_the_token_in_the_fragment_only():
    lines = endpoint_lines("wc", "id1", "http://127.0.0.1:5000", "secret-token")
    assert lines[0].endswith("REST endpoint at http://127.0.0.1:5000/jobs/id1")
    assert lines[1] == "dashboard: http://127.0.0.1:5000/#token=secret-token"


class FakeClient:
    """A job that runs for `polls` polls of `join`, then ends FINISHED."""

    def __init__(self, polls: int) -> None:
        env = StreamExecutionEnvironment()
        env.from_collection([1, 2]).map(lambda x: x).print()
        self.job_graph = env.get_job_graph("fake-job")
        self._polls = polls
        self.joins: list[float | None] = []
        self.rest_url = "http://127.0.0.1:9"
        self.action_token = "tok"
        self.log_dir = Path("/tmp/logs/fake-job-1")
        self.view = view()
        self.metrics = None
        self.attempt = 0

    def join(self, timeout=None) -> bool:
        self.joins.append(timeout)
        self._polls -= 1
        return self._polls < 0

    def get_job_status(self) -> str:
        return "FINISHED" if self._polls < 0 else "RUNNING"

    def get_job_id(self) -> str:
        return "id1"

    def wait(self):
        return None


def test_plain_mode_prints_a_line_per_interval_then_the_summary():
    out = io.StringIO()
    client = FakeClient(polls=2)
    ProgressWatcher(out, terminal=False, plain_interval_s=5.0)(client)
    lines = out.getvalue().splitlines()
    assert lines[0] == "job 'fake-job' (id1): REST endpoint at http://127.0.0.1:9/jobs/id1"
    assert lines[1] == "dashboard: http://127.0.0.1:9/#token=tok"
    assert lines[2] == "logs: /tmp/logs/fake-job-1"
    progress = [line for line in lines if "] RUNNING: in " in line]
    assert len(progress) == 2
    assert client.joins == [5.0, 5.0, 5.0]
    assert lines[-4].startswith("job 'fake-job' FINISHED after")


def test_terminal_mode_refreshes_twice_a_second_and_keeps_only_the_summary():
    out = io.StringIO()
    client = FakeClient(polls=3)
    ProgressWatcher(out, terminal=True)(client)
    assert client.joins == [0.5, 0.5, 0.5, 0.5]
    text = out.getvalue()
    assert "RUNNING: in" not in text  # no plain lines on a terminal
    assert "job 'fake-job' FINISHED after" in text


def test_sources_and_sink_operators_are_found_in_the_graph():
    env = StreamExecutionEnvironment()
    env.set_parallelism(2)
    counts = env.from_collection([1]).key_by(lambda x: x).reduce(lambda a, b: a)
    counts.print().uid("printed")
    counts.map(lambda x: x).uid("mapped").print().uid("printed-too").set_parallelism(1)
    assert job_shape(env.get_job_graph("j")) == JobShape(
        sources={0: 2}, sinks={"printed": 2, "printed-too": 1}
    )


# ---- rates through a restart, event by event (issue 21: the progress's rates lagged a state
# behind: "RUNNING: in -, out -" while an attempt ran, its rates only once it was RESTARTING,
# so tests/e2e/test_quiet_logs.py depended on when the ticks fell) ---------------------------

CHAIN = JobShape(sources={0: 2}, sinks={"sink": 2})


def chain_report(time_ms, attempt, partition, records):
    """A source -> sink task's report: `records` read and written so far in `attempt`."""
    ops = [
        {"uid": uid, "name": uid, "records_in": n_in, "records_out": n_out,
         "watermark": None, "user": []}
        for uid, n_in, n_out in (("src", 0, records), ("sink", records, 0))
    ]  # fmt: skip
    values = {"records_in": 0, "records_out": 0, "bytes_in": 0, "bytes_out": 0,
              "busy_ms": 0, "idle_ms": 0, "backpressured_ms": 0, "operators": ops}  # fmt: skip
    return TaskMetricsReport(attempt, partition, time_ms, values)


def rates(store, state, attempt):
    figures = figures_of(1.0, state, attempt, None, store.publish(), CHAIN)
    return figures.records_in_per_s, figures.records_out_per_s


def test_rates_show_while_an_attempt_runs_and_never_a_state_behind():
    clock = ManualClock(1_000)
    store = MetricsStore([(0, "numbers -> Sink", 2)], clock)
    first, second = SubtaskId(0, 0), SubtaskId(0, 1)
    store.attempt_started(0)
    assert rates(store, "DEPLOYING", 0) == (None, None)
    # RUNNING: each subtask's first report has no rate yet
    store.report(first, chain_report(1_000, 0, 0, 0))
    store.report(second, chain_report(1_000, 0, 1, 0))
    assert rates(store, "RUNNING", 0) == (None, None)
    # one subtask's second report: its rate alone would show half the job's
    store.report(first, chain_report(1_200, 0, 0, 60))
    assert rates(store, "RUNNING", 0) == (None, None)
    store.report(second, chain_report(1_200, 0, 1, 60))
    assert rates(store, "RUNNING", 0) == (600.0, 600.0)
    # attempt 0 failed: its last rates are no figure of the restarting job
    assert rates(store, "RESTARTING", 0) == (None, None)
    store.attempt_started(1)
    assert rates(store, "DEPLOYING", 1) == (None, None)
    store.report(first, chain_report(2_000, 1, 0, 0))
    store.report(second, chain_report(2_000, 1, 1, 0))
    assert rates(store, "RUNNING", 1) == (None, None)
    store.report(first, chain_report(2_200, 1, 0, 30))
    store.report(second, chain_report(2_200, 1, 1, 30))
    assert rates(store, "RUNNING", 1) == (300.0, 300.0)
    assert rates(store, "FINISHING", 1) == (300.0, 300.0)
    assert rates(store, "FINISHED", 1) == (None, None)


def test_reports_of_another_attempt_count_for_neither_rates_nor_totals():
    clock = ManualClock(1_000)
    store = MetricsStore([(0, "numbers -> Sink", 1)], clock)
    shape = JobShape(sources={0: 1}, sinks={"sink": 1})
    store.report(SubtaskId(0, 0), chain_report(1_000, 0, 0, 0))
    store.report(SubtaskId(0, 0), chain_report(2_000, 0, 0, 500))
    figures = figures_of(3.0, "RUNNING", 1, None, store.publish(), shape)
    assert (figures.records_in, figures.records_in_per_s) == (0, None)


def test_out_counts_what_sink_operators_take_in_wherever_they_sit():
    # issue 21: `out` summed the last operator of vertices without outputs; a sink chained
    # before an operator feeding another vertex, or a dead-end tail, gave 0 or nothing.
    shape = JobShape(sources={0: 1}, sinks={"files": 1})
    metrics = MetricsSnapshot(
        1000,
        0,
        0,
        subtasks=(
            subtask(
                0,
                0,
                operator("src", 0, 20_000, rate_out=20_000.0),
                operator("count", 20_000, 20_000, 20_000.0, 20_000.0),
                operator("files", 160, 0, rate_in=160.0),
            ),
            subtask(1, 0, operator("tail", 20_000, 0, rate_in=20_000.0)),
        ),
    )
    figures = figures_of(1.0, "RUNNING", 0, None, metrics, shape)
    assert (figures.records_out, figures.records_out_per_s) == (160, 160.0)
    assert "out 160/s" in progress_line(figures)
