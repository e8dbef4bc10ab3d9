"""Nexmark in Spark Structured Streaming (pyspark 4.3, DataFrame API, no Python UDFs).

    python benchmarks/peers/spark_nexmark.py --query q5 --input events.json --par 2
    python benchmarks/peers/spark_nexmark.py --latency --query q5 --input events.json \\
        --rate 50000 --seconds 60 --par 2

Run it with barrierflow's Python (`/work/main/.venv/bin/python`), whose pyspark is the one
barrierflow's tasks run on. `local[P]` with `P` shuffle partitions; session time zone UTC.

Throughput (default): `readStream.json` with the events' nested schema reads the events
file, `dateTime` is `timestamp_millis` of the event's own `dateTime`, then
`withWatermark("dateTime", "4 seconds")`; `person`, `auction` and `bid` are filtered
projections as in flink-nexmark's views. The query writes to the `noop` sink with
`trigger(availableNow=True)`: the whole file is one micro-batch (Spark's JSON reader cuts
the file into input partitions of at most 128 MB, at least one per core, so reading and
parsing use every core), plus the no-data batches that move the watermark. Spark
checkpoints offsets and state at every micro-batch. Spark has no end-of-input watermark:
windows not yet closed by the last watermark (the final 4 s of event time) are never
emitted, where Flink and barrierflow flush them at the end of a bounded input.

Queries, and those Structured Streaming cannot express (they are refused with a reason):

- q0, q1, q2, q14 (count_char as a length difference), q21, q22: row-wise expressions;
- q3, q20: stream-stream inner joins (unbounded state, append);
- q5: hop counts per auction, then per window the max count and the auctions that reach
  it, as a chained window aggregation (`window_time`) with `collect_list` (an aggregation
  followed by a join is not supported), append;
- q7: the highest bids of each 10 s window: one window aggregation keeping `max(price)` and
  the window's bids, exploded (bids exactly at a window's end, which flink-nexmark's
  `BETWEEN` also matches with the next window, are not matched twice), append;
- q8: persons and sellers of auctions per 10 s tumbling window, as one window aggregation
  over the union of both (a join of two aggregations is not supported), append;
- q11: `session_window` counts per bidder, append;
- q12: 10 s processing-time windows over `current_timestamp()` (a batch's start), update;
- q17: per auction and day, update; q18: the latest bid per bidder and auction
  (`max_by`), update;
- not expressible: q4 and q9 (a join followed by an aggregation or a ranking in update
  mode), q15 and q16 (distinct aggregates are not supported on streams), q19 (no
  `ROW_NUMBER` on streams).

RESULT line, the events/s figures: `events_per_second` = the file's events (all kinds) over
`seconds`, from `start()` returning to the query's end, which includes planning each
micro-batch, listing the file and writing Spark's checkpoint (offsets, commits, state);
`batch_seconds` sums the micro-batches' `triggerExecution`; `wall_seconds` is the whole
process (JVM and SparkSession start included). `--check` counts the result rows instead.

Latency (`--latency`, q0 or q5): a feeder thread writes a file into a watched folder every
200 ms holding `rate / 5` lines of the events file (cycled) whose `dateTime` is set to the
wall clock at writing. The query runs with the default trigger (each micro-batch starts
as soon as the last one ended) into `foreachBatch`, which counts the batch's rows per 10 ms
of event time (q0: each bid's `dateTime`; q5: each result's window end) and collects that
to the driver; latency = the driver's clock after that collect minus that time (so for
q5 at least the 4 s watermark delay). The first `--warmup` seconds are left out; p50, p95,
p99 and max are over rows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

PROCESS_START = time.time()

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

NOT_EXPRESSIBLE = {
    "q4": "a join followed by two aggregations (update mode) is not supported",
    "q9": "a join followed by a per-auction ranking (update mode) is not supported",
    "q15": "distinct aggregates are not supported on streaming DataFrames",
    "q16": "distinct aggregates are not supported on streaming DataFrames",
    "q19": "ROW_NUMBER / top-N per key is not supported on streaming DataFrames",
}
QUERIES = (
    "q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11", "q12",
    "q14", "q17", "q18", "q20", "q21", "q22",
)  # fmt: skip
UPDATE_MODE = {"q12", "q17", "q18"}


def events_schema():
    """flink-nexmark's table shape, times as epoch-millisecond longs."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    def struct(*fields: tuple[str, Any]) -> StructType:
        return StructType([StructField(name, kind) for name, kind in fields])

    long, text = LongType(), StringType()
    return struct(
        ("event_type", IntegerType()),
        (
            "person",
            struct(
                ("id", long), ("name", text), ("emailAddress", text), ("creditCard", text),
                ("city", text), ("state", text), ("dateTime", long), ("extra", text),
            ),
        ),
        (
            "auction",
            struct(
                ("id", long), ("itemName", text), ("description", text), ("initialBid", long),
                ("reserve", long), ("dateTime", long), ("expires", long), ("seller", long),
                ("category", long), ("extra", text),
            ),
        ),
        (
            "bid",
            struct(
                ("auction", long), ("bidder", long), ("price", long), ("channel", text),
                ("url", text), ("dateTime", long), ("extra", text),
            ),
        ),
    )  # fmt: skip


def views(raw):
    """`(person, auction, bid)` from the raw events, with event time and a 4 s watermark."""
    from pyspark.sql import functions as F

    millis = F.expr(
        "CASE WHEN event_type = 0 THEN person.dateTime WHEN event_type = 1 "
        "THEN auction.dateTime ELSE bid.dateTime END"
    )
    events = raw.withColumn("dateTime", F.timestamp_millis(millis)).withWatermark(
        "dateTime", "4 seconds"
    )
    person = events.where("event_type = 0").select(
        *(f"person.{c}" for c in ("id", "name", "emailAddress", "creditCard", "city", "state")),
        "dateTime",
        "person.extra",
    )
    auction = events.where("event_type = 1").select(
        *(f"auction.{c}" for c in ("id", "itemName", "description", "initialBid", "reserve")),
        "dateTime",
        F.timestamp_millis("auction.expires").alias("expires"),
        "auction.seller",
        "auction.category",
        "auction.extra",
    )
    bid = events.where("event_type = 2").select(
        *(f"bid.{c}" for c in ("auction", "bidder", "price", "channel", "url")),
        "dateTime",
        "bid.extra",
    )
    return person, auction, bid


def _ranks():
    from pyspark.sql import functions as F

    price = F.col("price")
    return [
        F.count_if(price < 10000).alias("rank1_bids"),
        F.count_if((price >= 10000) & (price < 1000000)).alias("rank2_bids"),
        F.count_if(price >= 1000000).alias("rank3_bids"),
    ]


def query_frame(name: str, raw):
    """The streaming DataFrame of query `name` over the raw events."""
    from pyspark.sql import functions as F

    if name in NOT_EXPRESSIBLE:
        raise ValueError(
            f"{name} cannot be written in Structured Streaming: {NOT_EXPRESSIBLE[name]}"
        )
    person, auction, bid = views(raw)
    if name == "q0":
        return bid.select("auction", "bidder", "price", "dateTime", "extra")
    if name == "q1":
        return bid.select(
            "auction",
            "bidder",
            (F.col("price").cast("decimal(20,0)") * F.lit(0.908).cast("decimal(3,3)")).alias(
                "price"
            ),
            "dateTime",
            "extra",
        )
    if name == "q2":
        return bid.where(F.col("auction") % 123 == 0).select("auction", "price")
    if name == "q3":
        sellers = auction.where("category = 10").select("id", "seller")
        people = person.where("state IN ('OR', 'ID', 'CA')").select(
            F.col("id").alias("pid"), "name", "city", "state"
        )
        return sellers.join(people, F.col("seller") == F.col("pid")).select(
            "name", "city", "state", "id"
        )
    if name == "q5":
        counts = bid.groupBy(
            F.window("dateTime", "10 seconds", "2 seconds").alias("hop"), "auction"
        ).agg(F.count("*").alias("num"))
        per_window = counts.groupBy(F.window(F.window_time("hop"), "2 seconds")).agg(
            F.max("num").alias("maxn"), F.collect_list(F.struct("auction", "num")).alias("all")
        )
        return (
            per_window.select(F.explode("all").alias("a"), "maxn")
            .where("a.num >= maxn")
            .select("a.auction", "a.num")
        )
    if name == "q7":
        per_window = bid.groupBy(F.window("dateTime", "10 seconds")).agg(
            F.max("price").alias("maxprice"),
            F.collect_list(F.struct("auction", "price", "bidder", "dateTime", "extra")).alias(
                "bids"
            ),
        )
        return (
            per_window.select(F.explode("bids").alias("b"), "maxprice")
            .where("b.price = maxprice")
            .select("b.auction", "b.price", "b.bidder", "b.dateTime", "b.extra")
        )
    if name == "q8":
        people = person.select(
            F.col("id").alias("key"), "name", "dateTime", F.lit(True).alias("is_person")
        )
        sellers = auction.select(
            F.col("seller").alias("key"),
            F.lit(None).cast("string").alias("name"),
            "dateTime",
            F.lit(False).alias("is_person"),
        )
        per_window = (
            people.unionByName(sellers)
            .groupBy(F.window("dateTime", "10 seconds"), "key")
            .agg(
                F.collect_set(F.when(F.col("is_person"), F.col("name"))).alias("names"),
                F.max(~F.col("is_person")).alias("sold"),
            )
        )
        return per_window.where("sold").select(
            F.col("key").alias("id"), F.explode("names").alias("name"), F.col("window.start")
        )
    if name == "q11":
        return bid.groupBy(F.session_window("dateTime", "10 seconds"), "bidder").agg(
            F.count("*").alias("bid_count")
        )
    if name == "q12":
        return bid.groupBy(F.window(F.current_timestamp(), "10 seconds"), "bidder").agg(
            F.count("*").alias("bid_count")
        )
    if name == "q14":
        euros = F.col("price") * F.lit(0.908)
        hour = F.hour("dateTime")
        return bid.where((euros > 1000000) & (euros < 50000000)).select(
            "auction",
            "bidder",
            euros.alias("price"),
            F.when((hour >= 8) & (hour <= 18), "dayTime")
            .when((hour <= 6) | (hour >= 20), "nightTime")
            .otherwise("otherTime")
            .alias("bidTimeType"),
            "dateTime",
            "extra",
            (F.length("extra") - F.length(F.regexp_replace("extra", "c", ""))).alias("c_counts"),
        )
    if name == "q17":
        return bid.groupBy("auction", F.date_format("dateTime", "yyyy-MM-dd").alias("day")).agg(
            F.count("*").alias("total_bids"),
            *_ranks(),
            F.min("price").alias("min_price"),
            F.max("price").alias("max_price"),
            F.avg("price").cast("long").alias("avg_price"),
            F.sum("price").alias("sum_price"),
        )
    if name == "q18":
        latest = F.max_by(F.struct("price", "channel", "url", "dateTime", "extra"), "dateTime")
        return (
            bid.groupBy("bidder", "auction")
            .agg(latest.alias("b"))
            .select("auction", "bidder", "b.price", "b.channel", "b.url", "b.dateTime", "b.extra")
        )
    if name == "q20":
        items = auction.where("category = 10").select(
            F.col("id").alias("aid"),
            "itemName",
            "description",
            "initialBid",
            "reserve",
            F.col("dateTime").alias("auction_dateTime"),
            "expires",
            "seller",
            "category",
            F.col("extra").alias("auction_extra"),
        )
        bids = bid.select(
            "auction",
            "bidder",
            "price",
            "channel",
            "url",
            F.col("dateTime").alias("bid_dateTime"),
            F.col("extra").alias("bid_extra"),
        )
        return bids.join(items, F.col("auction") == F.col("aid")).drop("aid")
    if name == "q21":
        channel_id = F.regexp_extract("url", "(&|^)channel_id=([^&]*)", 2)
        lower = F.lower("channel")
        known = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
        mapped = F.when(lower == "apple", known["apple"])
        for channel in ("google", "facebook", "baidu"):
            mapped = mapped.when(lower == channel, known[channel])
        # Spark's regexp_extract gives '' where Flink's REGEXP_EXTRACT gives NULL
        return bid.where((channel_id != "") | lower.isin(*known)).select(
            "auction",
            "bidder",
            "price",
            "channel",
            mapped.otherwise(channel_id).alias("channel_id"),
        )
    if name == "q22":
        parts = F.split("url", "/")
        return bid.select(
            "auction",
            "bidder",
            "price",
            "channel",
            *(F.get(parts, i).alias(f"dir{i - 2}") for i in (3, 4, 5)),
        )
    raise ValueError(f"unknown query {name!r}; known: {', '.join(QUERIES)}")


def spark_session(parallelism: int):
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(f"local[{parallelism}]")
        .appName("nexmark-sss")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(parallelism))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def watched_folder(path: str, workdir: str) -> str:
    """A folder holding (a link to) the events file: a file stream source reads folders."""
    folder = os.path.join(workdir, "input")
    os.makedirs(folder)
    target = os.path.join(folder, os.path.basename(path))
    try:
        os.link(os.path.abspath(path), target)
    except OSError:
        os.symlink(os.path.abspath(path), target)
    return folder


def count_lines(path: str) -> int:
    count = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            count += chunk.count(b"\n")
    return count


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    events = args.events or count_lines(args.input)
    workdir = tempfile.mkdtemp(prefix="spark-nexmark-")
    try:
        spark = spark_session(args.par)
        raw = spark.readStream.schema(events_schema()).json(watched_folder(args.input, workdir))
        frame = query_frame(args.query, raw)
        writer = (
            frame.writeStream.outputMode("update" if args.query in UPDATE_MODE else "append")
            .option("checkpointLocation", os.path.join(workdir, "checkpoint"))
            .trigger(availableNow=True)
        )
        if args.check:
            writer = writer.format("memory").queryName("results")
        else:
            writer = writer.format("noop")
        started = time.monotonic()
        running = writer.start()
        running.awaitTermination()
        seconds = time.monotonic() - started
        progress = running.recentProgress
        figures: dict[str, Any] = {
            "system": "spark-ss",
            "query": args.query,
            "events": events,
            "parallelism": args.par,
            "checkpoint_interval_ms": None,
            "seconds": round(seconds, 3),
            "seconds_from": "start() returned",
            "events_per_second": round(events / seconds),
            "batches": len(progress),
            "batch_seconds": round(
                sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000, 3
            ),
            "input_rows": sum(p["numInputRows"] for p in progress),
        }
        if args.check:
            figures["rows"] = spark.sql("SELECT count(*) AS n FROM results").first()["n"]
        spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    wall = time.time() - PROCESS_START
    figures.update(wall_seconds=round(wall, 3), events_per_second_wall=round(events / wall))
    return figures


_DATE_TIME = re.compile(rb'"dateTime":\d+')


class Feeder(threading.Thread):
    """Writes `rate / 5` event lines every 200 ms into `folder`, their time set to now."""

    def __init__(self, path: str, folder: str, rate: int, lines: int) -> None:
        super().__init__(daemon=True)
        with open(path, "rb") as handle:
            self.lines = [line for _, line in zip(range(lines), handle, strict=False)]
        if not self.lines:
            raise ValueError(f"no events in {path}")
        self.folder, self.rate = folder, rate
        self.stopped = threading.Event()
        self.written = 0

    def run(self) -> None:
        per_tick, tick, position, number = max(1, self.rate // 5), 0.2, 0, 0
        next_tick = time.monotonic()
        while not self.stopped.is_set():
            now_ms = b'"dateTime":%d' % int(time.time() * 1000)
            chunk = [
                _DATE_TIME.sub(now_ms, self.lines[(position + i) % len(self.lines)])
                for i in range(per_tick)
            ]
            position += per_tick
            staged = os.path.join(self.folder, f".part-{number:06d}.json")
            with open(staged, "wb") as out:
                out.writelines(chunk)
            os.rename(staged, os.path.join(self.folder, f"part-{number:06d}.json"))
            number += 1
            self.written += per_tick
            next_tick += tick
            self.stopped.wait(max(0.0, next_tick - time.monotonic()))


def _percentiles(buckets: list[tuple[float, int]]) -> dict[str, float] | None:
    """p50/p95/p99/max of latencies given as (latency ms, rows) pairs."""
    if not buckets:
        return None
    ordered = sorted(buckets)
    total = sum(rows for _, rows in ordered)
    out: dict[str, float] = {}
    for label, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        seen, goal = 0, q * total
        for latency, rows in ordered:
            seen += rows
            if seen >= goal:
                out[label] = round(latency, 1)
                break
    out["max"] = round(ordered[-1][0], 1)
    return out


def latency(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F

    if args.query not in ("q0", "q5"):
        raise SystemExit("--latency measures q0 or q5")
    workdir = tempfile.mkdtemp(prefix="spark-nexmark-latency-")
    folder = os.path.join(workdir, "input")
    os.makedirs(folder)
    samples: list[tuple[float, float, int]] = []  # (seconds since start, latency ms, rows)
    batches: list[float] = []
    try:
        spark = spark_session(args.par)
        raw = spark.readStream.schema(events_schema()).json(folder)
        frame = _q5_with_window_end(raw) if args.query == "q5" else query_frame("q0", raw)
        started = time.time()

        def per_batch(batch, _batch_id: int) -> None:
            at = F.unix_millis("dateTime" if args.query == "q0" else "window_end")
            buckets = batch.groupBy((at / 10).cast("long").alias("b")).count().collect()
            now = time.time()
            batches.append(now)
            for row in buckets:
                samples.append((now - started, now * 1000 - row["b"] * 10, row["count"]))

        feeder = Feeder(args.input, folder, args.rate, lines=max(args.rate * 10, 1))
        feeder.start()
        running = (
            frame.writeStream.outputMode("append")
            .option("checkpointLocation", os.path.join(workdir, "checkpoint"))
            .foreachBatch(per_batch)
            .start()
        )
        deadline = time.time() + args.seconds
        while time.time() < deadline and running.isActive:
            running.awaitTermination(timeout=1)
        feeder.stopped.set()
        feeder.join()
        error = running.exception()
        if error is None:
            # stopping in the middle of a batch ends in a StackOverflowError in Spark's
            # stream thread: let it finish what was fed (left out of the figures) first
            running.processAllAvailable()
        running.stop()
        spark.stop()
        if error is not None:
            raise SystemExit(f"the query failed: {error}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    kept = [(lat, rows) for since, lat, rows in samples if args.warmup <= since <= args.seconds]
    gaps = [b - a for a, b in itertools.pairwise(batches)]
    return {
        "system": "spark-ss",
        "mode": "latency",
        "query": args.query,
        "parallelism": args.par,
        "rate": args.rate,
        "seconds": args.seconds,
        "warmup_seconds": args.warmup,
        "fed_events": feeder.written,
        "result_rows": sum(rows for _, rows in kept),
        "latency_ms": _percentiles(kept),
        "batches": len(batches),
        "batch_interval_s_p50": round(sorted(gaps)[len(gaps) // 2], 3) if gaps else None,
    }


def _q5_with_window_end(raw):
    """q5 keeping each result's window end, the time its latency is measured from."""
    from pyspark.sql import functions as F

    _, _, bid = views(raw)
    counts = bid.groupBy(
        F.window("dateTime", "10 seconds", "2 seconds").alias("hop"), "auction"
    ).agg(F.count("*").alias("num"))
    per_window = counts.groupBy(F.window(F.window_time("hop"), "2 seconds").alias("w")).agg(
        F.max("num").alias("maxn"), F.collect_list(F.struct("auction", "num")).alias("all")
    )
    return (
        per_window.select(F.col("w.end").alias("window_end"), F.explode("all").alias("a"), "maxn")
        .where("a.num >= maxn")
        .select("a.auction", "a.num", "window_end")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", required=True, choices=[*QUERIES, *NOT_EXPRESSIBLE])
    parser.add_argument("--input", required=True, help="JSON Lines events file")
    parser.add_argument("--par", type=int, default=2, help="local[P], P shuffle partitions")
    parser.add_argument("--events", type=int, default=0, help="events in the file (0: count)")
    parser.add_argument("--check", action="store_true", help="count the result rows")
    parser.add_argument("--latency", action="store_true", help="latency mode (q0 or q5)")
    parser.add_argument("--rate", type=int, default=50_000, help="latency: events/s fed")
    parser.add_argument("--seconds", type=float, default=60.0, help="latency: run time")
    parser.add_argument("--warmup", type=float, default=15.0, help="latency: seconds left out")
    args = parser.parse_args()
    if not os.path.isfile(args.input):
        parser.error(f"no events file at {args.input}")
    if args.query in NOT_EXPRESSIBLE:
        print(f"UNSUPPORTED {args.query}: {NOT_EXPRESSIBLE[args.query]}", flush=True)
        raise SystemExit(3)
    figures = latency(args) if args.latency else throughput(args)
    print("RESULT " + json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
