"""Nexmark in Flink SQL (PyFlink 2.3.0, the JVM only) over a JSON Lines events file.

    $PEERS_ROOT/flink/venv/bin/python benchmarks/peers/flink_nexmark.py \\
        --query q5 --input events.json --par 2 [--ckpt 1000] [--events N] [--out DIR]

The events file is `barrierflow nexmark generate`'s: one event a line in flink-nexmark's
table shape, `{"event_type", "person", "auction", "bid"}`, times in epoch milliseconds.
Flink's filesystem connector reads it with the json format into nested ROWs; computed
columns turn the epoch milliseconds into TIMESTAMP(3) (`TO_TIMESTAMP_LTZ(ms, 3)` cast to
TIMESTAMP(3) in UTC), so the views `person`, `auction`, `bid` and the queries are typed as
in flink-nexmark, whose query texts (Apache-2.0) define what each query computes. The
watermark trails `dateTime` by 4 s. The results go to the 'blackhole' sink (or, with
`--out DIR`, to JSON files in DIR, to look at them). Table settings follow flink-nexmark's
configuration: mini-batch (2 s, 50,000 rows) and split distinct aggregates; state in memory
(hashmap), checkpoints (`--ckpt MS`) exactly-once to a local folder.

q14's `count_char(extra, 'c')` is flink-nexmark's Java UDF, not in PyPI's PyFlink; the SQL
expression `CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', ''))` counts the same.
q12 windows on processing time, as flink-nexmark's q12 does.

One bounded run, one query; it prints one `RESULT {json}` line (see `_flink_common`):
`events_per_second` is the file's events (all three kinds) over `seconds`, from all subtasks
running to the job's end; `events_per_second_net` counts from the job's initialisation
(task deployment included), `events_per_second_wall` the whole process (JVM, planning).
A single file is one split, read by one source subtask whatever the parallelism.
"""

from __future__ import annotations

import argparse
import os

import _flink_common as common  # notes when the process started; PyFlink comes later

EVENTS_DDL = """
CREATE TABLE events (
    event_type INT,
    person ROW<id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR,
               city VARCHAR, state VARCHAR, `dateTime` BIGINT, extra VARCHAR>,
    auction ROW<id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT,
                reserve BIGINT, `dateTime` BIGINT, expires BIGINT, seller BIGINT,
                category BIGINT, extra VARCHAR>,
    bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
            `dateTime` BIGINT, extra VARCHAR>,
    `dateTime` AS CAST(TO_TIMESTAMP_LTZ(CASE
        WHEN event_type = 0 THEN person.`dateTime`
        WHEN event_type = 1 THEN auction.`dateTime`
        ELSE bid.`dateTime` END, 3) AS TIMESTAMP(3)),
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json')
"""

VIEWS = [
    """CREATE VIEW person AS SELECT person.id, person.name, person.emailAddress,
        person.creditCard, person.city, person.state, `dateTime`, person.extra
        FROM events WHERE event_type = 0""",
    """CREATE VIEW auction AS SELECT auction.id, auction.itemName, auction.description,
        auction.initialBid, auction.reserve, `dateTime`,
        CAST(TO_TIMESTAMP_LTZ(auction.expires, 3) AS TIMESTAMP(3)) AS expires,
        auction.seller, auction.category, auction.extra
        FROM events WHERE event_type = 1""",
    """CREATE VIEW bid AS SELECT bid.auction, bid.bidder, bid.price, bid.channel, bid.url,
        `dateTime`, bid.extra FROM events WHERE event_type = 2""",
]

_RANKS = """
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
_RANK_COLUMNS = (
    "total_bids BIGINT, rank1_bids BIGINT, rank2_bids BIGINT, rank3_bids BIGINT, "
    "total_bidders BIGINT, rank1_bidders BIGINT, rank2_bidders BIGINT, rank3_bidders BIGINT, "
    "total_auctions BIGINT, rank1_auctions BIGINT, rank2_auctions BIGINT, rank3_auctions BIGINT"
)
_BID_COLUMNS = (
    "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, "
    "`dateTime` TIMESTAMP(3), extra VARCHAR"
)
_AUCTION_COLUMNS = (
    "itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT, "
    "auction_dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, "
    "auction_extra VARCHAR"
)


def _hop_counts(window: str) -> str:
    return f"""SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
        FROM TABLE({window}) GROUP BY auction, window_start, window_end"""


_HOP = "HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND)"

QUERIES: dict[str, tuple[str, str]] = {
    # name: (sink columns, query); the sink is `nexmark_<name>`
    "q0": (
        "auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra VARCHAR",
        "SELECT auction, bidder, price, `dateTime`, extra FROM bid",
    ),
    "q1": (
        "auction BIGINT, bidder BIGINT, price DECIMAL(23, 3), `dateTime` TIMESTAMP(3), "
        "extra VARCHAR",
        "SELECT auction, bidder, 0.908 * price AS price, `dateTime`, extra FROM bid",
    ),
    "q2": (
        "auction BIGINT, price BIGINT",
        "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0",
    ),
    "q3": (
        "name VARCHAR, city VARCHAR, state VARCHAR, id BIGINT",
        """SELECT P.name, P.city, P.state, A.id
        FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
        WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')""",
    ),
    "q4": (
        "id BIGINT, final BIGINT",
        """SELECT Q.category, AVG(Q.final) FROM (
            SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
            WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
            GROUP BY A.id, A.category) Q
        GROUP BY Q.category""",
    ),
    "q5": (
        "auction BIGINT, num BIGINT",
        f"""SELECT AuctionBids.auction, AuctionBids.num
        FROM ({_hop_counts(_HOP)}) AS AuctionBids
        JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
              FROM ({_hop_counts(_HOP)}) AS CountBids
              GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
        ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
           AND AuctionBids.num >= MaxBids.maxn""",
    ),
    "q7": (
        "auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra VARCHAR",
        """SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra FROM bid B
        JOIN (SELECT MAX(price) AS maxprice, window_end AS `dateTime`
              FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
              GROUP BY window_start, window_end) B1
        ON B.price = B1.maxprice
        WHERE B.`dateTime` BETWEEN B1.`dateTime` - INTERVAL '10' SECOND AND B1.`dateTime`""",
    ),
    "q8": (
        "id BIGINT, name VARCHAR, stime TIMESTAMP(3)",
        """SELECT P.id, P.name, P.starttime FROM (
            SELECT id, name, window_start AS starttime, window_end AS endtime
            FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
            GROUP BY id, name, window_start, window_end) P
        JOIN (
            SELECT seller, window_start AS starttime, window_end AS endtime
            FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
            GROUP BY seller, window_start, window_end) A
        ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime""",
    ),
    "q9": (
        "id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT, "
        "`dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, "
        "extra VARCHAR, auction BIGINT, bidder BIGINT, price BIGINT, "
        "bid_dateTime TIMESTAMP(3), bid_extra VARCHAR",
        """SELECT id, itemName, description, initialBid, reserve, `dateTime`, expires, seller,
            category, extra, auction, bidder, price, bid_dateTime, bid_extra
        FROM (SELECT A.*, B.auction, B.bidder, B.price, B.`dateTime` AS bid_dateTime,
                B.extra AS bid_extra,
                ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`dateTime` ASC)
                    AS rownum
              FROM auction A, bid B
              WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires)
        WHERE rownum <= 1""",
    ),
    "q11": (
        "bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3)",
        """SELECT B.bidder, count(*) AS bid_count,
            SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) AS starttime,
            SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) AS endtime
        FROM bid B GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND)""",
    ),
    "q12": (
        "bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP_LTZ(3), endtime TIMESTAMP_LTZ(3)",
        """SELECT bidder, count(*) AS bid_count, window_start AS starttime,
            window_end AS endtime
        FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
        GROUP BY bidder, window_start, window_end""",
    ),
    "q14": (
        "auction BIGINT, bidder BIGINT, price DECIMAL(23, 3), bidTimeType VARCHAR, "
        "`dateTime` TIMESTAMP(3), extra VARCHAR, c_counts BIGINT",
        """SELECT auction, bidder, 0.908 * price AS price,
            CASE
                WHEN HOUR(`dateTime`) >= 8 AND HOUR(`dateTime`) <= 18 THEN 'dayTime'
                WHEN HOUR(`dateTime`) <= 6 OR HOUR(`dateTime`) >= 20 THEN 'nightTime'
                ELSE 'otherTime'
            END AS bidTimeType,
            `dateTime`, extra,
            CAST(CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) AS BIGINT)
                AS c_counts
        FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    ),
    "q15": (
        f"`day` VARCHAR, {_RANK_COLUMNS}",
        f"""SELECT DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') AS `day`, count(*) AS total_bids,
            {_RANKS}, {_DISTINCT}
        FROM bid GROUP BY DATE_FORMAT(`dateTime`, 'yyyy-MM-dd')""",
    ),
    "q16": (
        f"channel VARCHAR, `day` VARCHAR, `minute` VARCHAR, {_RANK_COLUMNS}",
        f"""SELECT channel, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') AS `day`,
            max(DATE_FORMAT(`dateTime`, 'HH:mm')) AS `minute`, count(*) AS total_bids,
            {_RANKS}, {_DISTINCT}
        FROM bid GROUP BY channel, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd')""",
    ),
    "q17": (
        "auction BIGINT, `day` VARCHAR, total_bids BIGINT, rank1_bids BIGINT, "
        "rank2_bids BIGINT, rank3_bids BIGINT, min_price BIGINT, max_price BIGINT, "
        "avg_price BIGINT, sum_price BIGINT",
        f"""SELECT auction, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') AS `day`,
            count(*) AS total_bids, {_RANKS},
            min(price) AS min_price, max(price) AS max_price, avg(price) AS avg_price,
            sum(price) AS sum_price
        FROM bid GROUP BY auction, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd')""",
    ),
    "q18": (
        _BID_COLUMNS,
        """SELECT auction, bidder, price, channel, url, `dateTime`, extra
        FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction
                                           ORDER BY `dateTime` DESC) AS rank_number
              FROM bid)
        WHERE rank_number <= 1""",
    ),
    "q19": (
        f"{_BID_COLUMNS}, rank_number BIGINT",
        """SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC)
                                AS rank_number FROM bid)
        WHERE rank_number <= 10""",
    ),
    "q20": (
        "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, "
        f"bid_dateTime TIMESTAMP(3), bid_extra VARCHAR, {_AUCTION_COLUMNS}",
        """SELECT auction, bidder, price, channel, url, B.`dateTime`, B.extra,
            itemName, description, initialBid, reserve, A.`dateTime`, expires, seller,
            category, A.extra
        FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
        WHERE A.category = 10""",
    ),
    "q21": (
        "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, channel_id VARCHAR",
        """SELECT auction, bidder, price, channel,
            CASE
                WHEN lower(channel) = 'apple' THEN '0'
                WHEN lower(channel) = 'google' THEN '1'
                WHEN lower(channel) = 'facebook' THEN '2'
                WHEN lower(channel) = 'baidu' THEN '3'
                ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
            END AS channel_id
        FROM bid
        WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL
           OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    ),
    "q22": (
        "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, dir1 VARCHAR, "
        "dir2 VARCHAR, dir3 VARCHAR",
        """SELECT auction, bidder, price, channel, SPLIT_INDEX(url, '/', 3) AS dir1,
            SPLIT_INDEX(url, '/', 4) AS dir2, SPLIT_INDEX(url, '/', 5) AS dir3
        FROM bid""",
    ),
}

EXTRA_VIEWS = {"q12": ["CREATE VIEW B AS SELECT *, PROCTIME() AS p_time FROM bid"]}

# flink-nexmark's table settings (its conf/config.yaml)
TABLE_SETTINGS = {
    "table.local-time-zone": "UTC",
    "table.exec.mini-batch.enabled": "true",
    "table.exec.mini-batch.allow-latency": "2 s",
    "table.exec.mini-batch.size": "50000",
    "table.optimizer.distinct-agg.split.enabled": "true",
}


def statements(query: str, path: str, out: str | None) -> list[str]:
    """The DDL and the INSERT that run `query` over the events file at `path`."""
    columns, select = QUERIES[query]
    if out:
        sink = f"'connector' = 'filesystem', 'path' = 'file://{out}', 'format' = 'json'"
    else:
        sink = "'connector' = 'blackhole'"
    return [
        EVENTS_DDL.replace("{path}", "file://" + os.path.abspath(path)),
        *VIEWS,
        *EXTRA_VIEWS.get(query, []),
        f"CREATE TABLE nexmark_{query} ({columns}) WITH ({sink})",
        f"INSERT INTO nexmark_{query} {select}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", required=True, choices=sorted(QUERIES, key=lambda q: int(q[1:])))
    parser.add_argument("--input", required=True, help="JSON Lines events file or folder")
    parser.add_argument("--par", type=int, default=1, help="parallelism")
    parser.add_argument("--ckpt", type=int, default=0, help="checkpoint interval ms (0: none)")
    parser.add_argument("--events", type=int, default=0, help="events in the file (0: count)")
    parser.add_argument("--out", default="", help="write the results as JSON here instead")
    parser.add_argument("--no-minibatch", action="store_true", help="no mini-batch settings")
    args = parser.parse_args()
    if not os.path.exists(args.input):
        parser.error(f"no events file or folder at {args.input}")
    events = args.events or common.count_lines(args.input)

    from pyflink.table import EnvironmentSettings, TableEnvironment

    port = common.free_port()
    folder = common.checkpoint_dir(bool(args.ckpt))
    settings = dict(TABLE_SETTINGS)
    if args.no_minibatch:
        del settings["table.exec.mini-batch.enabled"]
    conf = common.flink_configuration(args.par, port, args.ckpt, folder, extra=settings)
    env_settings = EnvironmentSettings.new_instance().in_streaming_mode()
    t_env = TableEnvironment.create(env_settings.with_configuration(conf).build())
    *ddl, insert = statements(args.query, args.input, args.out or None)
    for statement in ddl:
        t_env.execute_sql(statement)
    submitted = t_env.execute_sql(insert)
    # started after planning: a poller running while the planner works broke planning once
    # ("NullPointerException: metadataHandlerProvider", ../shared/peers)
    poller = common.JobPoller(port)
    poller.start()
    result = submitted.get_job_client().get_job_execution_result().result()
    poller.stop()
    common.cleanup(folder)
    print(
        common.result_line(
            "flink-sql",
            args.query,
            events,
            args.par,
            args.ckpt,
            result.get_net_runtime(),
            poller,
            minibatch=not args.no_minibatch,
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
