"""The pure parts of `barrierflow chaos`: the failure plan from a seed, the multiset
comparison and its report, and the redirection of a run's outputs."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow._fs import Location
from barrierflow.chaos.check import MARKER, ChaosCheck, _prepare_workdir
from barrierflow.chaos.comparison import FailureRecord, compare_outputs, verdict_lines
from barrierflow.chaos.plan import driver_shares, plan_failures
from barrierflow.chaos.processes import kill_process_tree
from barrierflow.chaos.run_placement import check_run
from barrierflow.checkpoint.chaos_faults import TransientFaults
from barrierflow.connectors.base import Sink
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.errors import ChaosError, ConfigurationError

KINDS = ["exception", "kill", "executor"]


def test_the_same_seed_plans_the_same_failures_and_another_seed_others():
    plan = plan_failures(30, KINDS, seed=11, max_gap_s=0.5)
    assert plan == plan_failures(30, KINDS, seed=11, max_gap_s=0.5)
    assert plan != plan_failures(30, KINDS, seed=12, max_gap_s=0.5)


def test_every_kind_gets_an_equal_share_of_the_failures_in_a_random_order():
    plan = plan_failures(31, KINDS, seed=3, max_gap_s=1.0)
    assert Counter(p.kind for p in plan) == {"exception": 11, "kill": 10, "executor": 10}
    assert [p.kind for p in plan] != [KINDS[i % 3] for i in range(31)]


def test_gaps_stay_within_the_bound_and_targets_vary():
    plan = plan_failures(200, ["exception"], seed=5, max_gap_s=0.25)
    assert all(0 <= p.gap_s <= 0.25 for p in plan)
    assert len({p.target % 4 for p in plan}) == 4


def test_an_unknown_kind_is_refused_with_the_known_ones():
    with pytest.raises(ConfigurationError, match="exception, kill, executor"):
        plan_failures(3, ["exception", "reboot"], seed=1, max_gap_s=1.0)


def test_equal_multisets_are_exactly_once_whatever_the_order():
    comparison = compare_outputs("out", [["a", 1], ["b", 2], ["a", 1]], [("a", 1)] * 2 + [("b", 2)])
    assert comparison.exactly_once
    assert verdict_lines([comparison])[-1] == "exactly-once: OK"


def test_a_record_committed_once_more_is_duplicated_and_one_missing_is_lost():
    reference = [1, 2, 3, 3]
    comparison = compare_outputs("out", reference, [1, 1, 3])
    assert comparison.lost == Counter({2: 1, 3: 1})
    assert comparison.duplicated == Counter({1: 1})
    lines = verdict_lines([comparison])
    assert lines[0] == "sink out: 4 records without failures, 3 with; 2 lost, 1 duplicated"
    assert lines[-1] == "exactly-once: FAILED (2 records lost, 1 duplicated)"


def test_the_report_names_only_the_first_few_records_but_counts_all():
    comparison = compare_outputs("out", [], list(range(100)))
    lines = verdict_lines([comparison])
    assert lines[1].startswith("  duplicated (first 5): 0 (1 more), 1 (1 more)")
    assert lines[1].count("more") == 5
    assert lines[-1] == "exactly-once: FAILED (0 records lost, 100 duplicated)"


def test_a_failure_line_gives_time_kind_task_attempt_and_recovery():
    record = FailureRecord(3, 4.214, "kill", "'Map' (1/2)", 2, 1532.4)
    assert record.describe(10) == (
        "failure 3/10 at 4.21 s: kill of 'Map' (1/2) in attempt 2, recovered in 1532 ms"
    )
    ended = FailureRecord(1, 1.0, "exception", "'Map' (2/2)", 0, None)
    assert ended.describe(1).endswith("the job ended before it recovered")


def test_inside_a_check_run_a_file_sink_and_checkpoints_land_in_the_runs_folder(tmp_path):
    with check_run(tmp_path / "chaos") as run:
        sink = FileSink.for_rows("/data/out")
        assert run.checkpoints == str(tmp_path / "chaos" / "checkpoints")
    assert sink.output.path == str(tmp_path / "chaos" / "outputs" / "data" / "out")
    assert FileSink.for_rows("/data/out").output.path == "/data/out"


def test_only_a_full_speed_run_ignores_a_generator_sources_rate(tmp_path):
    with check_run(tmp_path, full_speed=True):
        assert DataGeneratorSource(str, 10, records_per_second=5).records_per_second is None
    with check_run(tmp_path):
        assert DataGeneratorSource(str, 10, records_per_second=5).records_per_second == 5


def test_a_file_sink_reports_its_committed_records_only(tmp_path):
    from barrierflow.connectors.base import SinkContext

    sink = FileSink.for_rows(str(tmp_path / "out"))
    sink.prepare()
    writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run-0"))
    writer.restore([])
    writer.write_batch([["a", 1], {"b": 2}])
    writer.pre_commit(1)
    writer.commit(1)
    writer.write_batch(["pending"])
    writer.pre_commit(2)
    assert sink.committed_output() == [["a", 1], {"b": 2}]


def test_a_sink_that_cannot_tell_what_it_committed_says_none():
    class Blind(Sink):
        def create_writer(self, context):
            raise NotImplementedError

    assert Blind().committed_output() is None


def test_a_work_folder_with_other_files_is_refused_and_an_earlier_checks_is_reused(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(ChaosError, match="not made by barrierflow chaos"):
        _prepare_workdir(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep"

    workdir = tmp_path / "work"
    _prepare_workdir(workdir)
    (workdir / "chaos").mkdir()
    (workdir / "chaos" / "old").write_text("")
    _prepare_workdir(workdir)
    assert not (workdir / "chaos").exists() and (workdir / MARKER).exists()


def _graph_placement(graph):
    """(the sink's output path, the generator's rate) of a one-source, one-sink job graph."""
    operators = [op.transformation for vertex in graph.vertices for op in vertex.operators]
    sink = next(t.sink for t in operators if t.kind == "sink")
    source = next(t.source for t in operators if t.kind == "source")
    return sink.output.path, source.records_per_second


def _build_job(name: str, ready: threading.Barrier) -> object:
    """A job built in two halves around `ready`, so two builders interleave."""
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_source(
        DataGeneratorSource(str, 10, records_per_second=5),
        WatermarkStrategy.no_watermarks(),
        "gen",
    )
    ready.wait(timeout=30)
    stream.sink_to(FileSink.for_rows(f"/data/{name}"))
    ready.wait(timeout=30)
    return env.get_job_graph(name)


def test_two_jobs_built_at_once_in_one_process_keep_their_own_placement(tmp_path):
    """The placement is the building run's, not the process's: three jobs built at the same
    time on three threads (two check runs and one without) each carry their own paths and
    rates, and a run's end leaves the others' in force."""
    ready = threading.Barrier(3)
    graphs: dict[str, object] = {}

    def build(name: str, root: Path | None, full_speed: bool) -> None:
        try:
            if root is None:
                graphs[name] = _build_job(name, ready)
                return
            with check_run(root, full_speed=full_speed):
                graphs[name] = _build_job(name, ready)
        except BaseException as error:  # the assertion below names it
            graphs[name] = error
            ready.abort()

    threads = [
        threading.Thread(target=build, args=("a", tmp_path / "a", True)),
        threading.Thread(target=build, args=("b", tmp_path / "b", False)),
        threading.Thread(target=build, args=("plain", None, False)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not [g for g in graphs.values() if isinstance(g, BaseException)], graphs
    assert _graph_placement(graphs["a"]) == (str(tmp_path / "a" / "outputs" / "data" / "a"), None)
    assert _graph_placement(graphs["b"]) == (str(tmp_path / "b" / "outputs" / "data" / "b"), 5)
    assert _graph_placement(graphs["plain"]) == ("/data/plain", 5)


def test_check_runs_do_not_nest(tmp_path):
    nested = check_run(Path(tmp_path / "other"))
    with check_run(tmp_path), pytest.raises(RuntimeError, match="already in force"):
        nested.__enter__()


def test_the_jvm_kind_is_refused_before_any_run_on_a_master_without_executor_jvms(tmp_path):
    check = ChaosCheck(Path("job.py"), (), 1, ("jvm",), 1, tmp_path / "work", master="local[4]")
    with pytest.raises(ChaosError, match=r"local\[4\] runs every task inside the driver's JVM"):
        check.run(print)
    assert not (tmp_path / "work").exists()


def test_the_lifecycle_kinds_get_their_share_and_the_driver_kind_cuts_the_plan_per_driver():
    kinds = ["restore", "storage", "driver"]
    plan = plan_failures(7, kinds, seed=5, max_gap_s=0.5)
    assert sorted(Counter(p.kind for p in plan).values()) == [2, 2, 3]

    shares = driver_shares(plan)

    assert [p for share in shares for p in share] == plan  # nothing lost, order kept
    assert len(shares) == 1 + sum(p.kind == "driver" for p in plan)
    assert all(p.kind == "driver" for share in shares[:-1] for p in share[-1:])
    assert all(p.kind != "driver" for share in shares for p in share[:-1])
    assert all(p.kind != "driver" for p in shares[-1])  # the last driver runs to the end


def test_transient_faults_fail_only_matching_operations_as_often_as_armed():
    faults = TransientFaults(lambda kind, loc: loc.name.endswith(".state"))
    state, metadata = Location("file:///c/chk-1/1-0-a.state"), Location("file:///c/chk-1/_metadata")
    faults.arm("read", 2)

    faults("read", metadata)
    faults("write", state)
    for _ in range(2):
        with pytest.raises(OSError, match="transient storage fault injected by barrierflow chaos"):
            faults("read", state)
    faults("read", state)

    assert faults.left("read") == 0


def test_a_process_tree_killed_as_a_driver_leaves_no_process_of_it(tmp_path):
    """As pyspark's daemon does, the grandchild makes a process group of its own."""
    import subprocess
    import sys
    import time

    marker = tmp_path / "grandchild.pid"
    grandchild_code = (
        f"import os, time; os.setpgid(0, 0); open({str(marker)!r}, 'w').write(str(os.getpid()))"
        "; time.sleep(60)"
    )
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {grandchild_code!r}])\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, str(driver)], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(marker.read_text())

    kill_process_tree(child.pid)

    assert child.wait(timeout=10) == -9
    assert _dead(grandchild, within_s=10)


def _dead(pid: int, within_s: float) -> bool:
    """Whether process `pid` is gone or a zombie (killed, waiting for init) within the time."""
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_runs_checkpoint_storage_wins_over_the_jobs_own(tmp_path):
    """`barrierflow chaos` hands each run's folder to the environment explicitly
    (`command_line_defaults.checkpoint_storage`): a job file that names its own storage
    still checkpoints into the run's folder, and outside the run into its own."""
    from barrierflow import StreamExecutionEnvironment
    from barrierflow.api.environment import JobDefined
    from barrierflow.api.job_file import command_line_settings

    def storage_of_the_defined_job(**settings) -> str:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.enable_checkpointing(100)
        env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "own"))
        env.from_collection([1, 2]).print()
        defined = []
        capture = command_line_settings(define_only=lambda g, s: defined.append(s), **settings)
        with capture, pytest.raises(JobDefined):
            env.execute("storage")
        return defined[0].checkpoint_storage

    run = str(tmp_path / "chaos" / "checkpoints")
    assert storage_of_the_defined_job(checkpoint_storage=run) == run
    assert storage_of_the_defined_job() == str(tmp_path / "own")
