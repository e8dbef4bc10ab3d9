"""The state processor against real jobs: the count state a word count built reads back equal
to the counts of its input, and a savepoint written from a DataFrame is restored by a rerun
whose counts continue from the written values."""

from __future__ import annotations

from collections import Counter

import pytest
from click.testing import CliRunner

from barrierflow import StreamExecutionEnvironment, state_processor
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.cli import main
from barrierflow.connectors.files import FileSink

from .conftest import read_rows
from .jobs import word_of

pytestmark = pytest.mark.spark

JOB = "state-processor-count"


def word_count(tmp_path, words: list[str], out: str, parallelism: int, savepoint=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    if savepoint is not None:
        env.set_savepoint_restore_settings(str(savepoint))  # `barrierflow run --from-savepoint`
    env.set_parallelism(parallelism)
    env.enable_checkpointing(500)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    (
        env.from_collection(words)
        .map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(tmp_path / out)))
        .uid("sink")
    )
    client = env.execute_async(JOB)
    client.wait(timeout=240)
    return client


def test_count_state_reads_back_and_a_written_savepoint_changes_the_rerun(spark, tmp_path):
    from pyspark.sql import functions as F

    first_words = [word_of(i) for i in range(3000)]
    word_count(tmp_path, first_words, "out1", parallelism=2)
    storage = FileSystemCheckpointStorage(str(tmp_path / "checkpoints"), JOB)
    final_id, metadata = storage.latest_completed()
    assert metadata["is_final"]
    final = storage.checkpoint_dir(final_id).uri

    # Read: the count state equals the counts of the input.
    snapshot = state_processor.load(final)
    assert [s.kind for s in snapshot.operator("count").states] == ["value"]
    counts = snapshot.keyed_state(spark, "count", "reduce")
    assert counts.columns == ["key", "namespace", "value"]
    assert {row.key: row.value._2 for row in counts.collect()} == Counter(first_words)
    assert all(row.value._1 == row.key for row in counts.collect())
    same = state_processor.read(spark).option("uid", "count").option("state", "reduce")
    assert same.load(final).count() == len(set(first_words))

    shown = CliRunner().invoke(main, ["state", "show", final, "--uid", "count"])
    assert shown.exit_code == 0, shown.output
    assert f"  keyed state 'reduce' (value): {len(set(first_words))} key(s)" in shown.output

    # Write: counts preset to 1000 for two words, the others kept; the rerun restores it.
    preset = ["ant", "cat"]
    bootstrap = counts.withColumn(
        "value",
        F.when(
            F.col("key").isin(preset),
            F.struct(F.col("key").alias("_1"), F.lit(1000).cast("long").alias("_2")),
        ).otherwise(F.col("value")),
    )
    written_to = tmp_path / "bootstrap"
    written = (
        state_processor.SavepointWriter(max_parallelism=snapshot.max_parallelism)
        .with_keyed_state("count", "reduce", bootstrap)
        .write(written_to)
    )
    assert {e.key: e.value[1] for e in written.keyed_entries("count", "reduce")} == {
        **Counter(first_words),
        **dict.fromkeys(preset, 1000),
    }
    second_words = [word_of(i) for i in range(500, 1200)]
    rerun = word_count(tmp_path, second_words, "out2", parallelism=3, savepoint=written_to)

    assert rerun.restored_from == written.checkpoint_id
    base = {**Counter(first_words), **dict.fromkeys(preset, 1000)}
    expected = Counter(
        (w, base[w] + n) for w, total in Counter(second_words).items() for n in range(1, total + 1)
    )
    assert read_rows(tmp_path / "out2") == expected


def test_windows_and_untypable_values_round_trip_through_dataframes(spark, tmp_path):
    from barrierflow.window import TimeWindow

    contents = [
        ("a", TimeWindow(0, 10), 3),
        ("a", TimeWindow(10, 20), 8),
        ("b", TimeWindow(0, 10), 4),
    ]
    original = (
        state_processor.SavepointWriter()
        .with_keyed_state("windows", "window-contents", contents, kind="map")
        .with_keyed_state("odd", "tags", {1: {"x", "y"}, 2: {"z"}})
        .write(tmp_path / "original")
    )

    windows = original.keyed_state(spark, "windows", "window-contents")
    assert windows.columns == ["key", "namespace", "value"]
    assert windows.schema["namespace"].dataType.simpleString() == "struct<start:bigint,end:bigint>"
    tags = original.keyed_state(spark, "odd", "tags")
    assert tags.schema["value"].dataType.simpleString() == "binary"  # sets: pickled

    copy = (
        state_processor.SavepointWriter()
        .with_keyed_state("windows", "window-contents", windows, kind="map")
        .with_keyed_state("odd", "tags", tags)
        .write(tmp_path / "copy")
    )
    for uid, name in [("windows", "window-contents"), ("odd", "tags")]:
        assert entries(copy, uid, name) == entries(original, uid, name)


def entries(snapshot, uid: str, name: str) -> dict:
    return {(e.key, e.user_key): e.value for e in snapshot.keyed_entries(uid, name)}
