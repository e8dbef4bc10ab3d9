"""The driver-side cleanup of sinks (cluster/jobmaster/sink_cleanup.py) with the real FileSink on
real files: what a checkpoint lists as pending is committed, every other staged file goes."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from barrierflow import StreamExecutionEnvironment, _fs, state_processor
from barrierflow.checkpoint.storage import load_metadata
from barrierflow.cluster.jobmaster.restore_point import Candidate, RestorePoint
from barrierflow.cluster.jobmaster.sink_cleanup import clean_up_sinks
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink
from barrierflow.graph.job_graph import JobGraph

LINEAGE = "00c0ffee00c0ffee"
JOB = "cleanup-unit"


def _graph(*sinks: Any) -> JobGraph:
    env = StreamExecutionEnvironment()
    env.set_parallelism(2)
    words = env.from_collection(["x"])
    for number, sink in enumerate(sinks):
        words.sink_to(sink).uid(f"sink-{number}")
    return env.get_job_graph(JOB)


def _killed_run(sink: FileSink, subtask: int) -> Any:
    """What a subtask of a run killed between PREPARE and COMMIT left: checkpoint 1
    pre-committed (and complete, its notification lost), checkpoint 2 pre-committed (never
    complete), an open transaction with rows. Returns its state at checkpoint 1."""
    context = SinkContext("sink-0", subtask, 2, 0, "run1-0", job_name=JOB, lineage=LINEAGE)
    writer = sink.create_writer(context)
    writer.restore([])
    writer.write_batch([f"a{subtask}"])
    writer.pre_commit(1)
    state = writer.snapshot_state()
    writer.write_batch([f"b{subtask}"])
    writer.pre_commit(2)
    writer.write_batch([f"c{subtask}"])
    return state


def _checkpoint(folder: Path, states: list[Any]) -> RestorePoint:
    """A savepoint folder holding `states` as sink-0's operator state, as checkpoint 1."""
    location = str(folder)
    state_processor.SavepointWriter(max_parallelism=128).with_operator_state(
        "sink-0", states
    ).write(location)
    metadata = load_metadata(_fs.location(location))
    return RestorePoint(Candidate(_fs.location(location), checkpoint_id=1), metadata)


def _files_under(folder: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(root, name), folder)
        for root, _, names in os.walk(folder)
        for name in names
    )


def _committed(sink: FileSink) -> list[str]:
    return sorted(sink.committed_output())


def test_commits_what_the_checkpoint_lists_and_deletes_every_staged_file(tmp_path: Path) -> None:
    sink = FileSink.for_rows(str(tmp_path / "out"))
    graph = _graph(sink)
    states = [_killed_run(sink, subtask) for subtask in (0, 1)]
    point = _checkpoint(tmp_path / "chk-1", states)
    assert len(_files_under(tmp_path / "out" / ".staging")) == 6  # a, b, c of two subtasks
    assert _committed(sink) == []

    result = clean_up_sinks(
        graph, point, 1, lineage=LINEAGE, deployment_id="run2-cleanup", attempt=1
    )

    assert (result.cleaned, result.failures) == (("sink-0",), ())
    assert _committed(sink) == ["a0", "a1"]
    assert _files_under(tmp_path / "out" / ".staging") == []
    again = clean_up_sinks(graph, point, 1, lineage=LINEAGE, deployment_id="run3", attempt=1)
    assert again.failures == () and _committed(sink) == ["a0", "a1"]


def test_without_a_completed_checkpoint_everything_staged_goes(tmp_path: Path) -> None:
    sink = FileSink.for_rows(str(tmp_path / "out"))
    graph = _graph(sink)
    for subtask in (0, 1):
        _killed_run(sink, subtask)

    result = clean_up_sinks(graph, None, None, lineage=LINEAGE, deployment_id="c", attempt=0)

    assert result.failures == () and "nothing" in result.restored
    assert _committed(sink) == []
    assert _files_under(tmp_path / "out" / ".staging") == []


class _Unreachable(TwoPhaseCommitSink[int]):
    """A sink whose system cannot be reached: `open` fails."""

    def open(self, context: SinkContext) -> None:
        raise ConnectionError(f"no server for subtask {context.subtask_index}")

    def begin_transaction(self) -> int:
        return 0

    def write(self, transaction: int, records: list[Any]) -> None:
        pass

    def pre_commit(self, transaction: int, checkpoint_id: int) -> None:
        pass

    def commit(self, transaction: int) -> None:
        pass

    def abort(self, transaction: int) -> None:
        pass


def test_a_failing_sink_is_one_line_and_the_others_are_cleaned_up(tmp_path: Path) -> None:
    files = FileSink.for_rows(str(tmp_path / "out"))
    graph = _graph(files, _Unreachable())
    for subtask in (0, 1):
        _killed_run(files, subtask)

    result = clean_up_sinks(graph, None, None, lineage=LINEAGE, deployment_id="c", attempt=0)

    assert result.cleaned == ("sink-0",)
    [failure] = result.failures
    assert "uid sink-1" in failure and "subtask 1 of 2" in failure
    assert "ConnectionError: no server for subtask 0" in failure and "\n" not in failure
    assert _files_under(tmp_path / "out" / ".staging") == []


def test_a_delta_table_gets_the_checkpoints_commits_once(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    from barrierflow.connectors.delta import DeltaSink

    sink = DeltaSink.for_path(str(tmp_path / "table"))
    graph = _graph(sink)
    states = []
    for subtask in (0, 1):  # checkpoint 1 pre-committed (complete), 2 pre-committed (not)
        context = SinkContext("sink-0", subtask, 2, 0, "run1-0", job_name=JOB, lineage=LINEAGE)
        writer = sink.create_writer(context)
        writer.restore([])
        writer.write_batch([{"n": subtask}])
        writer.pre_commit(1)
        states.append(writer.snapshot_state())
        writer.write_batch([{"n": subtask + 10}])
        writer.pre_commit(2)
    point = _checkpoint(tmp_path / "chk-1", states)

    for deployment in ("cleanup-1", "cleanup-2"):  # a second cleanup commits nothing again
        result = clean_up_sinks(graph, point, 1, lineage=LINEAGE, deployment_id=deployment,
                                attempt=1)  # fmt: skip
        assert (result.cleaned, result.failures) == (("sink-0",), ())
        assert sorted(row["n"] for row in sink.committed_output()) == [0, 1]


def test_a_delta_tables_files_of_intervals_that_never_committed_are_deleted(
    tmp_path: Path,
) -> None:
    pytest.importorskip("deltalake")
    import deltalake

    from barrierflow.connectors.delta import DeltaSink

    table = tmp_path / "table"
    sink = DeltaSink(str(table), target_file_size=1)  # rows are written to files at once
    graph = _graph(sink)
    states = []
    for subtask in (0, 1):  # 1 committed, 2 pre-committed (never complete), 3 open
        context = SinkContext("sink-0", subtask, 2, 0, "run1-0", job_name=JOB, lineage=LINEAGE)
        writer = sink.create_writer(context)
        writer.restore([])
        writer.write_batch([{"n": subtask}])
        writer.pre_commit(1)
        states.append(copy.deepcopy(writer.snapshot_state()))  # as checkpoint 1 holds it
        writer.commit(1)
        writer.write_batch([{"n": subtask + 10}])
        writer.pre_commit(2)
        writer.write_batch([{"n": subtask + 20}])
    point = _checkpoint(tmp_path / "chk-1", states)
    assert len(list(table.rglob("*.parquet"))) == 6

    result = clean_up_sinks(graph, point, None, lineage=LINEAGE, deployment_id="c", attempt=1)

    assert (result.cleaned, result.failures) == (("sink-0",), ())
    listed = {Path(uri) for uri in deltalake.DeltaTable(str(table)).file_uris()}
    assert set(table.rglob("*.parquet")) == listed and len(listed) == 2
    assert sorted(row["n"] for row in sink.committed_output()) == [0, 1]
