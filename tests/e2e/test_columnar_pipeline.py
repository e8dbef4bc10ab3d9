"""Arrow batches through a whole job on Spark: read as Arrow, vectorized steps, routed by a
hashed column over channels as Arrow frames, written as Arrow; exactly once across a kill."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from barrierflow import Duration, RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink, ParquetSource
from barrierflow.functions import KeyedProcessFunction

pytestmark = pytest.mark.spark


def every_seventh(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.filter(pc.equal(pc.remainder(batch["auction"], 7), 0))


class StampOf(KeyedProcessFunction):
    """(auction, price, event time) of each bid: what the Python side sees of a row."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield [ctx.get_current_key(), value["price"], ctx.timestamp()]


def test_arrow_rows_keep_their_keys_and_event_time_across_channels(spark, tmp_path):
    rows = 20_000
    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "auction": rng.integers(0, 500, rows),
            "price": rng.integers(1, 1000, rows),
            "date_time": 1_700_000_000_000 + np.arange(rows, dtype=np.int64) * 3,
        }
    )
    pq.write_table(table, tmp_path / "bids.parquet", row_group_size=3000)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(500)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_seconds(1)
    ).with_timestamp_column("date_time")
    (
        env.from_source(ParquetSource(str(tmp_path / "bids.parquet")), strategy, "bids")
        .map_batches(every_seventh)
        .key_by("auction")
        .process(StampOf())
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
    )
    env.execute("columnar-keys-and-time")

    kept = every_seventh(table.combine_chunks().to_batches()[0])
    columns = [kept[name].to_pylist() for name in ("auction", "price", "date_time")]
    expected = Counter(zip(*columns, strict=True))
    committed: Counter = Counter()
    for part in (tmp_path / "out").glob("part-*"):
        for line in part.read_text().splitlines():
            committed[tuple(json.loads(line))] += 1
    assert committed == expected


def bid_of(index: int) -> dict[str, int]:
    return {"auction": (index * 7919) % 101, "price": index % 1000, "n": index}


def times_ten(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.append_column("ten_prices", pc.multiply(batch["price"], 10))


@pytest.mark.parametrize("unaligned", [False, True], ids=["aligned", "unaligned"])
def test_killing_the_task_after_a_column_key_keeps_the_columnar_output_exactly_once(
    spark, tmp_path, unaligned
):
    """Unaligned: in-flight Arrow frames are channel state, replayed after the restore."""
    records = 24_000
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().enable_unaligned_checkpoints(unaligned)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    (
        env.from_source(
            DataGeneratorSource(bid_of, records, records_per_second=6000),
            WatermarkStrategy.no_watermarks(),
            "bids",
        )
        .map_batches(lambda batch: batch)  # dict rows -> Arrow
        .uid("to-arrow")
        .key_by("auction")
        .map_batches(times_ten)
        .uid("times-ten")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")).with_format("parquet"))
        .uid("sink")
    )
    job = env.execute_async("columnar-kill")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    vertex = next(v.vertex_id for v in job.job_graph.vertices if v.name.startswith("MapBatches"))
    job.kill_task_process(vertex, 1)
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    written = pq.read_table(tmp_path / "out").to_pylist()
    expected = [{**bid_of(i), "ten_prices": bid_of(i)["price"] * 10} for i in range(records)]
    assert Counter(tuple(sorted(r.items())) for r in written) == Counter(
        tuple(sorted(r.items())) for r in expected
    )
