"""Sinks that take output back after a fallback past damaged checkpoints (issue 21, item 6),
on real files and real Delta tables: FileSink moves the part files of the lineage's abandoned
checkpoints into a hidden `.abandoned/` folder, DeltaSink removes their files in one Delta
commit; both leave other lineages and older checkpoints alone, do it once (subtask 0, for
every old subtask), and say so in `survives_fallback`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.files._sink import committed_checkpoint
from barrierflow.connectors.postgres import PostgresSink

LINEAGE, OTHER = "0123456789abcdef", "fedcba9876543210"


def context(subtask=0, parallelism=2, lineage=LINEAGE, restored=None, abandoned_above=None):
    deployment = f"dep-{lineage[:4]}-{restored}-{subtask}"
    return SinkContext(
        "out", subtask, parallelism, 0, deployment, "job", restored,
        lineage=lineage, abandoned_above=abandoned_above, max_parallelism=8,
    )  # fmt: skip


def run_checkpoints(sink, checkpoints, subtask=0, parallelism=2, lineage=LINEAGE):
    """A writer committing one row per checkpoint: (subtask, checkpoint)."""
    writer = sink.create_writer(context(subtask, parallelism, lineage))
    writer.restore([])
    for n in checkpoints:
        writer.write_batch([{"subtask": subtask, "checkpoint": n}])
        writer.pre_commit(n)
        writer.commit(n)
    writer.close()


def restore(sink, subtask, abandoned_above, parallelism=1, lineage=LINEAGE):
    writer = sink.create_writer(
        context(subtask, parallelism, lineage, abandoned_above, abandoned_above)
    )
    writer.restore([])
    return writer


def rows(sink) -> Counter:
    return Counter((row["subtask"], row["checkpoint"]) for row in sink.committed_output())


def test_the_sinks_say_whether_they_survive_a_fallback():
    postgres = PostgresSink.builder().set_dsn("postgresql://h/db").set_table("t")
    assert FileSink.for_rows("/tmp/x").survives_fallback()
    assert not postgres.build().survives_fallback()  # inserts cannot be taken back
    assert postgres.set_key_columns(["k"]).build().survives_fallback()  # upserts converge


def test_committed_part_files_name_their_checkpoint_and_lineage(tmp_path):
    sink = FileSink.for_rows(str(tmp_path / "out")).partition_by("subtask")
    run_checkpoints(sink, [3, 4])
    found = sorted(committed_checkpoint(p.name) for p in (tmp_path / "out").rglob("part-*"))
    assert found == [(LINEAGE, 3), (LINEAGE, 4)]


def test_a_file_sink_fallback_moves_the_abandoned_checkpoints_files_aside_once(tmp_path):
    out = tmp_path / "out"
    sink = FileSink.for_rows(str(out)).with_format("parquet").partition_by("subtask")
    for subtask in (0, 1):
        run_checkpoints(sink, [1, 2, 3], subtask)
    run_checkpoints(sink, [2, 3], 0, lineage=OTHER)  # another lineage's commits stay
    before = rows(sink)

    # Restored checkpoint 1 (at parallelism 1): 2 and 3 of this lineage are abandoned.
    restore(sink, 0, abandoned_above=1).close()
    expected = Counter({(0, 1): 1, (1, 1): 1, (0, 2): 1, (0, 3): 1})  # OTHER's 2 and 3
    assert rows(sink) == expected
    aside = sorted(p.relative_to(out) for p in out.rglob(".abandoned/part-*"))
    assert [str(p.parent) for p in aside] == ["subtask=0/.abandoned"] * 2 + [
        "subtask=1/.abandoned"
    ] * 2
    assert sum(before.values()) == sum(expected.values()) + len(aside)  # moved, not deleted

    restore(sink, 0, abandoned_above=1).close()  # a repeated restore: nothing more
    assert rows(sink) == expected
    restore(sink, 1, abandoned_above=0, parallelism=2).close()  # not subtask 0: not its job
    assert rows(sink) == expected


deltalake = pytest.importorskip("deltalake")


def test_a_delta_fallback_removes_the_abandoned_commits_files_in_one_commit(tmp_path):
    from barrierflow.connectors.delta import DeltaSink

    table = tmp_path / "table"
    sink = DeltaSink.for_path(str(table))
    for subtask in (0, 1):
        run_checkpoints(sink, [1, 2, 3], subtask)
    run_checkpoints(sink, [2, 3], 0, lineage=OTHER)
    version = deltalake.DeltaTable(str(table)).version()

    restore(sink, 0, abandoned_above=1).close()
    expected = Counter({(0, 1): 1, (1, 1): 1, (0, 2): 1, (0, 3): 1})
    assert rows(sink) == expected
    delta = deltalake.DeltaTable(str(table))
    assert delta.version() == version + 1  # one commit took back both old subtasks' files
    assert delta.history(1)[0]["barrierflow"] == {"take_back": LINEAGE, "above_checkpoint": 1}

    restore(sink, 0, abandoned_above=1).close()  # a repeated restore: no second commit
    assert deltalake.DeltaTable(str(table)).version() == version + 1
    restore(sink, 0, abandoned_above=3).close()  # nothing above 3: the cheap check
    assert deltalake.DeltaTable(str(table)).version() == version + 1
    assert rows(sink) == expected


def test_delta_app_ids_carry_the_lineage(tmp_path):
    from barrierflow.connectors.delta import DeltaSink

    table = tmp_path / "table"
    run_checkpoints(DeltaSink.for_path(str(table)), [5], 1)
    delta = deltalake.DeltaTable(str(table))
    assert delta.transaction_version(f"job/out/{LINEAGE}/1") == 5
    assert delta.transaction_version("job/out/1") is None


def test_part_files_without_a_lineage_keep_their_old_names(tmp_path):
    sink = FileSink.for_rows(str(tmp_path / "out"))
    writer = sink.create_writer(SinkContext("out", 0, 1, 0, "run1-0"))
    writer.restore([])
    writer.write_batch([1])
    writer.pre_commit(1)
    writer.commit(1)
    assert [p.name for p in Path(tmp_path / "out").glob("part-*")] == [
        "part-out-0-run1-0-00000000.jsonl"
    ]
