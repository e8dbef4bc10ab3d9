"""Events files: flink-nexmark's table shape in JSON Lines and Parquet, read back by DuckDB too."""

from __future__ import annotations

import json
import time

import duckdb
import pyarrow.parquet as pq
import pytest

from barrierflow.errors import ConfigurationError
from barrierflow.nexmark.events_file import (
    EVENTS_SCHEMA,
    events_from_record_batch,
    record_batch_of,
    write_events,
)
from barrierflow.nexmark.generator import GeneratorConfig, generate_events, generate_numbers
from barrierflow.nexmark.model import to_table_row

CONFIG = GeneratorConfig(seed=3)
EVENTS = generate_events(CONFIG, 1_000)


def test_a_json_lines_file_holds_one_table_shaped_event_per_line_in_order(tmp_path):
    path = tmp_path / "events.jsonl"
    assert write_events(path, CONFIG, 1_000) == 1_000
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [to_table_row(e) for e in EVENTS]
    first_bid = json.loads(lines[4])
    assert list(first_bid) == ["event_type", "person", "auction", "bid"]
    assert list(first_bid["bid"]) == [
        "auction", "bidder", "price", "channel", "url", "dateTime", "extra",
    ]  # fmt: skip
    assert first_bid["person"] is None and first_bid["auction"] is None
    assert list(json.loads(lines[0])["person"]) == [
        "id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra",
    ]  # fmt: skip
    assert list(json.loads(lines[1])["auction"]) == [
        "id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires",
        "seller", "category", "extra",
    ]  # fmt: skip


def test_chunks_do_not_change_what_is_written(tmp_path):
    write_events(tmp_path / "one.jsonl", CONFIG, 1_000)
    write_events(tmp_path / "many.jsonl", CONFIG, 1_000, chunk_events=7)
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "many.jsonl").read_bytes()


def test_a_parquet_file_has_struct_columns_with_null_structs_and_a_row_group_per_chunk(tmp_path):
    path = tmp_path / "events.parquet"
    assert write_events(path, CONFIG, 1_000, chunk_events=300) == 1_000
    parquet = pq.ParquetFile(path)
    assert parquet.metadata.num_row_groups == 4
    table = parquet.read()
    assert table.schema == EVENTS_SCHEMA
    assert table.to_pylist() == [to_table_row(e) for e in EVENTS]
    assert events_from_record_batch(table) == EVENTS
    assert table.column("bid").null_count == 80  # 20 persons + 60 auctions


def test_duckdb_reads_the_json_lines_file(tmp_path):
    path = tmp_path / "events.jsonl"
    write_events(path, CONFIG, 1_000)
    rows = duckdb.sql(
        f"SELECT event_type, count(*) FROM read_json('{path}') GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert rows == [(0, 20), (1, 60), (2, 920)]
    bids = duckdb.sql(
        f"SELECT bid.auction, bid.bidder, bid.price, bid.channel, bid.url, bid.dateTime, "
        f"bid.extra FROM read_json('{path}') WHERE event_type = 2"
    ).fetchall()
    assert bids == [tuple(e) for e in EVENTS if type(e).__name__ == "Bid"]
    names = duckdb.sql(
        f"SELECT person.emailAddress, person.creditCard FROM read_json('{path}') "
        "WHERE event_type = 0 LIMIT 1"
    ).fetchall()
    assert names == [(EVENTS[0].email_address, EVENTS[0].credit_card)]


def test_duckdb_reads_the_parquet_file(tmp_path):
    path = tmp_path / "events.parquet"
    write_events(path, CONFIG, 1_000, chunk_events=250)
    auctions = duckdb.sql(
        f"SELECT auction.id, auction.itemName, auction.description, auction.initialBid, "
        f"auction.reserve, auction.dateTime, auction.expires, auction.seller, auction.category, "
        f"auction.extra FROM read_parquet('{path}') WHERE event_type = 1"
    ).fetchall()
    assert auctions == [tuple(e) for e in EVENTS if type(e).__name__ == "Auction"]
    assert duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{path}') WHERE person IS NULL AND bid IS NULL"
    ).fetchall() == [(60,)]


def test_record_batches_of_generated_events_and_of_model_events_agree():
    generated = generate_numbers(CONFIG, range(3, 400, 3))
    events = generated.events()
    assert record_batch_of(generated).to_pylist() == [to_table_row(e) for e in events]
    assert record_batch_of(events).equals(record_batch_of(generated))
    assert events_from_record_batch(record_batch_of(events)) == events
    only_bids = [e for e in events if type(e).__name__ == "Bid"]
    assert events_from_record_batch(record_batch_of(only_bids)) == only_bids


def test_no_events_make_an_empty_but_readable_file(tmp_path):
    assert write_events(tmp_path / "none.jsonl", CONFIG, 0) == 0
    assert (tmp_path / "none.jsonl").read_bytes() == b""
    write_events(tmp_path / "none.parquet", CONFIG, 0)
    assert pq.read_table(tmp_path / "none.parquet").num_rows == 0


def test_a_wall_clock_base_time_becomes_now(tmp_path):
    before = time.time_ns() // 1_000_000
    write_events(tmp_path / "now.jsonl", GeneratorConfig(base_time=None), 1)
    person = json.loads((tmp_path / "now.jsonl").read_text())["person"]
    assert before <= person["dateTime"] <= time.time_ns() // 1_000_000


@pytest.mark.parametrize(
    ("count", "chunk", "message"),
    [(-1, 10, "count must be an int >= 0, got -1"), (5, 0, "chunk_events must be an int >= 1")],
)
def test_bad_arguments_are_refused(tmp_path, count, chunk, message):
    with pytest.raises(ConfigurationError, match=message):
        write_events(tmp_path / "x.jsonl", CONFIG, count, chunk_events=chunk)


def test_every_string_the_generator_can_make_needs_no_json_escaping():
    from barrierflow.nexmark.generator import _tables

    tables = _tables()
    texts = [tables.words, tables.letters, *tables.channel_names, *tables.channel_urls]
    texts += [*tables.first_names, *tables.last_names, *tables.cities, *tables.states]
    for text in texts:
        assert json.dumps(text) == f'"{text}"', text
