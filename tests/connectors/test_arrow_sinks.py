"""Sinks given Arrow data: FileSink writes it as it is (Parquet) or column by column (JSON
Lines) with the same result as the rows; DiscardingSink drops it; the sink operator hands a
columnar batch over as Arrow only when its rows would be to_pylist() dicts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow.connectors.base import Sink, SinkContext, SinkWriter
from barrierflow.connectors.discarding import DiscardingSink
from barrierflow.connectors.files import FileSink
from barrierflow.errors import SinkError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.runtime.operators.source_sink import SinkOperator

DATA = pa.record_batch(
    {
        "auction": pa.array([1, None, -3], pa.int64()),
        "name": ["plain", 'quote " and \\ and % and é\n', None],
        "price": [1.5, 1e-05, 2.0],
        "ok": [True, False, True],
        "day": pa.array([0, 1, 2], pa.date32()),
    }
)


def write_and_commit(sink: FileSink, write: Any) -> None:
    writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run1-0"))
    writer.restore([])
    write(writer)
    writer.pre_commit(1)
    writer.commit(1)


def part_bytes(out: Path) -> bytes:
    (path,) = [p for p in out.glob("part-*")]
    return path.read_bytes()


def test_json_lines_from_arrow_are_byte_for_byte_the_rows(tmp_path: Path) -> None:
    data = DATA.select(["auction", "name", "price", "ok"])
    by_arrow, by_rows = tmp_path / "arrow", tmp_path / "rows"
    write_and_commit(FileSink.for_rows(str(by_arrow)), lambda w: w.write_arrow(data))
    write_and_commit(FileSink.for_rows(str(by_rows)), lambda w: w.write_batch(data.to_pylist()))
    assert part_bytes(by_arrow) == part_bytes(by_rows)
    lines = part_bytes(by_arrow).decode().splitlines()
    assert json.loads(lines[1])["name"] == 'quote " and \\ and % and é\n'
    with pytest.raises(SinkError, match="date is not JSON serializable"):  # as for rows
        write_and_commit(FileSink.for_rows(str(tmp_path / "dates")), lambda w: w.write_arrow(DATA))


def test_json_lines_of_special_floats_match_too(tmp_path: Path) -> None:
    data = pa.record_batch({"x": [math.nan, math.inf, 0.1]})
    by_arrow, by_rows = tmp_path / "arrow", tmp_path / "rows"
    write_and_commit(FileSink.for_rows(str(by_arrow)), lambda w: w.write_arrow(data))
    write_and_commit(FileSink.for_rows(str(by_rows)), lambda w: w.write_batch(data.to_pylist()))
    assert part_bytes(by_arrow) == part_bytes(by_rows)


def test_parquet_from_arrow_is_the_batch_itself(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = FileSink.for_rows(str(out)).with_format("parquet")
    write_and_commit(sink, lambda w: (w.write_arrow(DATA), w.write_batch(DATA.to_pylist())))
    table = pq.read_table(next(out.glob("part-*")))
    assert table.schema == DATA.schema
    assert table.to_pylist() == DATA.to_pylist() * 2


def test_parquet_with_a_schema_casts_fills_missing_columns_and_names_misfits(tmp_path):
    schema = pa.schema([("auction", pa.int32()), ("name", pa.string()), ("extra", pa.int8())])
    sink = FileSink.for_rows(str(tmp_path / "out")).with_format("parquet", schema=schema)
    with pytest.raises(SinkError, match=r"column\(s\) \['day', 'ok', 'price'\].*lacks"):
        write_and_commit(sink, lambda w: w.write_arrow(DATA))
    with pytest.raises(SinkError, match=r"does not fit the parquet schema"):
        write_and_commit(sink, lambda w: w.write_arrow(pa.record_batch({"auction": ["x"]})))
    sink = FileSink.for_rows(str(tmp_path / "ok")).with_format("parquet", schema=schema)
    write_and_commit(sink, lambda w: w.write_arrow(DATA.select(["name", "auction"])))
    table = pq.read_table(next((tmp_path / "ok").glob("part-*")))
    assert table.schema == schema
    assert table.column("extra").to_pylist() == [None, None, None]
    assert table.column("auction").to_pylist() == [1, None, -3]


def test_a_partitioned_file_sink_takes_arrow_as_rows(tmp_path: Path) -> None:
    sink = FileSink.for_rows(str(tmp_path)).partition_by("ok")
    write_and_commit(sink, lambda w: w.write_arrow(DATA.select(["auction", "ok"])))
    assert sorted(sink.committed_output(), key=str) == sorted(
        DATA.select(["auction", "ok"]).to_pylist(), key=str
    )


class Recording(Sink):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def create_writer(self, context: SinkContext) -> SinkWriter:
        calls = self.calls

        class Writer(SinkWriter):
            def write_batch(self, records: list[Any]) -> None:
                calls.append(("rows", records))

            def write_arrow(self, data: Any) -> None:
                calls.append(("arrow", data))

            def pre_commit(self, checkpoint_id: int) -> None: ...
            def snapshot_state(self) -> Any: ...
            def commit(self, checkpoint_id: int) -> None: ...
            def restore(self, states: list[Any]) -> None: ...

        return Writer()


def test_the_sink_operator_hands_over_arrow_only_for_dict_rows() -> None:
    sink = Recording()
    operator, _ = started(SinkOperator("s", "Sink", sink), ManualClock())
    operator.process_batch(ColumnarBatch(DATA))
    operator.process_batch(ColumnarBatch(DATA, None, lambda data: data["auction"].to_pylist()))
    operator.process_batch(RecordBatch(["x"]))
    assert [kind for kind, _ in sink.calls] == ["arrow", "rows", "rows"]
    assert sink.calls[0][1] is DATA
    assert sink.calls[1][1] == [1, None, -3]


def test_the_discarding_sink_counts_and_keeps_nothing() -> None:
    writer = DiscardingSink().create_writer(SinkContext("d", 0, 1, 0, "run-0"))
    writer.restore([])
    writer.write_arrow(DATA)
    writer.write_batch([1, 2])
    writer.pre_commit(1)
    writer.commit(1)
    assert writer.records == 5
