"""q3, q4, q9, q15-q20 on Spark, checked exactly against the same queries in DuckDB SQL, once
as they run and once with a task of their stateful operator killed mid-run.

One events file for the module: 60,000 events at flink-nexmark's 10,000 a second,
starting 3 s before midnight (UTC), so the day changes halfway (q15-q17 get two days),
events share milliseconds (bids fall on an auction's first and last instant, ties in
time), auctions expire while bids still come (q4 and q9 drop their state), and events
are shuffled within groups of 1,000 (0.1 s), below the 4 s watermark bound: no event is
late, so the queries' watermark-driven emission and state cleanup keep results exact.

The SQL is flink-nexmark's, with the ties its ROW_NUMBERs leave open broken the way the
queries break them (see their docstrings). An updating query's changelog must add up to
the SQL result (and never take back a row it did not add); an append-only one's rows
must be the SQL result as a multiset, with a kill too.
"""

from __future__ import annotations

import duckdb
import pytest

from barrierflow.nexmark.queries import query

from .nexmark_harness import (
    as_multiset,
    changelog,
    duckdb_views,
    events_file,
    run_query,
    sql_rows,
)

pytestmark = pytest.mark.spark

MIDNIGHT = 1_767_225_600_000  # 2026-01-01T00:00:00Z
EVENTS = 60_000
RATE = 10_000

_DAY = "strftime(epoch_ms(dateTime), '%Y-%m-%d')"
_COUNTS = """
    count(*) AS total_bids,
    count(*) FILTER (WHERE price < 10000) AS rank1_bids,
    count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
    count(*) FILTER (WHERE price >= 1000000) AS rank3_bids"""
_DISTINCT = """
    count(DISTINCT bidder) AS total_bidders,
    count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
    count(DISTINCT auction) AS total_auctions,
    count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions"""
_LIFETIME_JOIN = """
    auction A JOIN bid B
    ON A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires"""

SQL = {
    "q3": """
        SELECT P.name, P.city, P.state, A.id
        FROM auction A JOIN person P ON A.seller = P.id
        WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    # AVG of a BIGINT is a BIGINT in Flink, the quotient truncated: positive prices, so //.
    "q4": f"""
        SELECT category AS id, CAST(sum(final) // count(*) AS BIGINT) AS final
        FROM (SELECT A.id, A.category, max(B.price) AS final FROM {_LIFETIME_JOIN}
              GROUP BY A.id, A.category)
        GROUP BY category""",
    "q9": f"""
        SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller,
               category, extra, auction, bidder, price, bid_dateTime, bid_extra
        FROM (SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime,
                     B.extra AS bid_extra,
                     row_number() OVER (PARTITION BY A.id ORDER BY B.price DESC,
                         B.dateTime ASC, B.bidder ASC, B.extra ASC) AS rownum
              FROM {_LIFETIME_JOIN})
        WHERE rownum = 1""",
    "q15": f"SELECT {_DAY} AS day, {_COUNTS}, {_DISTINCT} FROM bid GROUP BY day",
    "q16": f"""
        SELECT channel, {_DAY} AS day, max(strftime(epoch_ms(dateTime), '%H:%M')) AS minute,
               {_COUNTS}, {_DISTINCT}
        FROM bid GROUP BY channel, day""",
    "q17": f"""
        SELECT auction, {_DAY} AS day, {_COUNTS}, min(price) AS min_price,
               max(price) AS max_price, CAST(sum(price) // count(*) AS BIGINT) AS avg_price,
               sum(price) AS sum_price
        FROM bid GROUP BY auction, day""",
    "q18": """
        SELECT auction, bidder, price, channel, url, dateTime, extra
        FROM (SELECT *, row_number() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC,
                  price DESC, channel DESC, url DESC, extra DESC) AS rank_number FROM bid)
        WHERE rank_number = 1""",
    "q19": """
        SELECT * FROM (
            SELECT *, row_number() OVER (PARTITION BY auction ORDER BY price DESC,
                dateTime ASC, bidder ASC, channel ASC, url ASC, extra ASC) AS rank_number
            FROM bid)
        WHERE rank_number <= 10""",
    "q20": """
        SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.dateTime AS bid_dateTime,
               B.extra AS bid_extra, A.itemName, A.description, A.initialBid, A.reserve,
               A.dateTime AS auction_dateTime, A.expires, A.seller, A.category,
               A.extra AS auction_extra
        FROM bid B JOIN auction A ON B.auction = A.id
        WHERE A.category = 10""",
}
"""Each query in DuckDB SQL over the views person, auction and bid."""

KILLED = {
    "q3": "q3-join",
    "q4": "q4-max",
    "q9": "q9-winning-bid",
    "q15": "q15-statistics",
    "q16": "q16-statistics",
    "q17": "q17-statistics",
    "q18": "q18-latest",
    "q19": "q19-top-bids",
    "q20": "q20-join",
}
"""The operator whose task is killed in each query's second run."""

LEAST_ROWS = {
    "q3": 50, "q4": 5, "q9": 500, "q15": 2, "q16": 5_000, "q17": 1_000, "q18": 5_000,
    "q19": 5_000, "q20": 5_000,
}  # fmt: skip
"""Fewer result rows than this would make the check too thin to mean much."""


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nexmark-b")
    return events_file(
        folder,
        EVENTS,
        seed=11,
        out_of_order_group_size=1_000,
        first_event_rate=RATE,
        base_time=MIDNIGHT - EVENTS * 1_000 // RATE // 2,
    )


@pytest.fixture(scope="module")
def expected(events):
    con = duckdb.connect()
    duckdb_views(con, events)
    return {name: as_multiset(sql_rows(con, sql)) for name, sql in SQL.items()}


def result_of(name: str, rows: list[dict]):
    """The query's result: the net changelog of an updating query, else the rows."""
    if query(name).updating:
        return changelog(rows)
    assert all("op" not in row for row in rows), f"{name} is append-only: rows have no op"
    return as_multiset(rows)


def test_the_sql_results_have_real_content(expected):
    for name, least in LEAST_ROWS.items():
        assert sum(expected[name].values()) >= least, name
    assert len(expected["q15"]) == 2  # two days


@pytest.mark.parametrize("name", sorted(SQL, key=lambda n: int(n[1:])))
def test_query_equals_duckdb(spark, tmp_path, events, expected, name):
    rows = run_query(tmp_path, name, events)
    assert result_of(name, rows) == expected[name]


@pytest.mark.chaos  # CI runs it; `-m "not chaos"` skips it locally
@pytest.mark.parametrize("name", sorted(SQL, key=lambda n: int(n[1:])))
def test_query_equals_duckdb_with_a_task_killed(spark, tmp_path, events, expected, name):
    rows = run_query(tmp_path, name, events, kill=KILLED[name])
    assert result_of(name, rows) == expected[name]


@pytest.mark.chaos
@pytest.mark.parametrize("name", ["q4", "q9", "q16", "q19"])
def test_with_changelog_checkpoints_and_a_task_killed_equals_duckdb(
    spark, tmp_path, events, expected, name
):
    # q19's top-10 lists per auction, q16's distinct bidders and auctions in map state
    # (deltas of map entries), q4's and q9's timers per open auction (timer deltas):
    # `benchmarks/nexmark.py --changelog` runs them this way
    rows = run_query(tmp_path, name, events, kill=KILLED[name], changelog=True)
    assert result_of(name, rows) == expected[name]
