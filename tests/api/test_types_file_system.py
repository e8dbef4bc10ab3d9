"""barrierflow.connectors.file_system: PyFlink's file connector builders over
barrierflow.connectors.files (issue 24 item 5), driven directly (no Spark): the source's
reader, the sink's two-phase-commit writer, what PyFlink 2.3 wrote for the same records
(recorded by running PyFlink here: `+I[a, 1]`, `(a,1)`, `1.0`), and bad configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from barrierflow import Encoder, StreamExecutionEnvironment, Types, WatermarkStrategy
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from barrierflow.connectors.files._sink import committed_checkpoint
from barrierflow.errors import ConfigurationError


def _sink(out: Path, **policy) -> FileSink:
    config = OutputFileConfig.builder().with_part_prefix("pre").with_part_suffix(".txt").build()
    rolling = RollingPolicy.default_rolling_policy(**policy)
    return (
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        .with_output_file_config(config)
        .with_rolling_policy(rolling)
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )


def _write(sink: FileSink, batches: list[list], checkpoint_id: int = 1) -> None:
    sink.prepare()
    writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run1-0", lineage="00ff"))
    writer.restore([])
    for batch in batches:
        writer.write_batch(batch)
    writer.pre_commit(checkpoint_id)
    writer.commit(checkpoint_id)


def _parts(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(out.glob("*")) if p.is_file()}


def test_the_source_reads_every_line_of_a_folder(tmp_path):
    (tmp_path / "a.txt").write_text("first\nsecond\n")
    (tmp_path / "b.txt").write_text("third")
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(tmp_path)
    ).build()
    reader = source.create_reader(source.create_splits())
    reader.restore({})
    assert [reader.poll_batch(10), reader.poll_batch(10), reader.poll_batch(10)] == [
        ["first", "second"],
        ["third"],
        None,
    ]
    assert source.bounded


def test_a_monitored_source_is_unbounded_and_lists_at_its_interval(tmp_path):
    from barrierflow import Time

    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
        .monitor_continuously(Time.seconds(2))
        .build()
    )
    assert (source.bounded, source.monitor_interval_ms) == (False, 2_000)


def test_from_source_takes_it_as_pyflink_does(tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(tmp_path)
    ).build()
    env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").print()
    assert [v.name for v in env.get_job_graph().vertices] == ["lines -> Print"]


def test_the_sink_commits_prefixed_suffixed_part_files_with_a_line_per_record(tmp_path):
    out = tmp_path / "out"
    _write(_sink(out), [["x", "y"], ["z"]])
    ((name, text),) = _parts(out).items()
    assert name.startswith("pre-sink-0-run1-0-") and name.endswith(".txt")
    assert text == "x\ny\nz\n"
    assert committed_checkpoint(name) is not None  # a fallback finds its checkpoint


def test_nothing_is_visible_before_the_commit(tmp_path):
    out = tmp_path / "out"
    sink = _sink(out)
    sink.prepare()
    writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run1-0", lineage="00ff"))
    writer.restore([])
    writer.write_batch(["x"])
    writer.pre_commit(1)
    assert _parts(out) == {}
    writer.commit(1)
    assert list(_parts(out).values()) == ["x\n"]


def test_the_rolling_policy_rolls_by_size(tmp_path):
    out = tmp_path / "out"
    _write(_sink(out, part_size=4), [["aaaa"], ["bbbb"], ["cc"]])
    assert sorted(_parts(out).values()) == ["aaaa\n", "bbbb\n", "cc\n"]


RECORDED = [
    # (declared type of the sink's input, record, line PyFlink 2.3's FileSink wrote)
    (Types.ROW([Types.STRING(), Types.INT()]), ("a", 1), "+I[a, 1]"),
    (Types.TUPLE([Types.STRING(), Types.INT()]), ("a", 1), "(a,1)"),
    (Types.STRING(), "x", "x"),
    (Types.DOUBLE(), 1.0, "1.0"),
]


@pytest.mark.parametrize(("type_info", "record", "line"), RECORDED)
def test_the_sink_writes_records_as_flink_writes_their_declared_type(
    tmp_path, type_info, record, line
):
    env = StreamExecutionEnvironment.get_execution_environment()
    out = tmp_path / "out"
    env.from_collection([record]).map(lambda r: r, output_type=type_info).sink_to(_sink(out))
    (sink,) = [t.sink for t in env._transformations if t.sink is not None]
    _write(sink, [[record]])
    assert list(_parts(out).values()) == [line + "\n"]


def test_a_sink_without_suffix_names_its_files_as_flink_does(tmp_path):
    out = tmp_path / "out"
    sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    _write(sink, [["x"]], checkpoint_id=7)
    ((name, _),) = _parts(out).items()
    assert name.startswith("part-") and "." not in name
    assert committed_checkpoint(name)[1] == 7
    assert sink.committed_output() == ["x"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda p: FileSource.for_record_stream_format(StreamFormat.text_line_format(), p, p),
            "reads one path",
        ),
        (lambda p: StreamFormat.text_line_format("latin-1"), "UTF-8 only"),
        (lambda p: FileSource.for_bulk_file_format(None, p), "for_bulk_file_format"),
        (lambda p: FileSink.for_row_format(p, "utf-8"), "needs an Encoder"),
        (lambda p: FileSink.for_bulk_format(p, None), "for_bulk_format is not supported"),
        (lambda p: BucketAssigner.date_time_bucket_assigner(), "date_time_bucket_assigner"),
        (lambda p: OutputFileConfig.builder().with_part_prefix(".hidden").build(), "visible"),
        (lambda p: OutputFileConfig.builder().with_part_suffix("/x").build(), "part suffix"),
        (
            lambda p: (
                FileSink.for_row_format(p, Encoder.simple_string_encoder())
                .with_rolling_policy("often")
                .build()
            ),
            "needs a RollingPolicy",
        ),
    ],
)
def test_bad_configuration_is_refused_with_one_line(tmp_path, build, message):
    with pytest.raises(ConfigurationError, match=message):
        build(str(tmp_path))
