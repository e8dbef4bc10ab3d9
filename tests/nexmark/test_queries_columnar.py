"""The vectorized (`map_batches`) steps of q5, q7, q8, q11, q14, q21 and q22, checked event by
event on small Arrow batches against what the events say one at a time, without Spark.

Each batch is table-shaped (`record_batch_of`) with its event time in `_timestamp`, as
`map_batches` hands the Nexmark events over; persons and auctions are mixed in so that a
step that keeps bids must drop them.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow.nexmark.events_file import record_batch_of
from barrierflow.nexmark.model import Auction, Bid, Person
from barrierflow.nexmark.queries import q5, q7, q8, q11, q14, q21, q22
from barrierflow.nexmark.queries._columns import with_event_times
from barrierflow.window import TimeWindow

times = st.integers(-30_000, 60_000)


def a_bid(date_time: int, auction: int = 1, bidder: int = 1, price: int = 1) -> Bid:
    return Bid(auction, bidder, price, "channel-1", "https://www.nexmark.com/a/b/c", date_time, "")


def a_person(date_time: int, id_: int = 1, name: str = "Ann") -> Person:
    return Person(id_, name, "a@b.c", "1234", "Boise", "ID", date_time, "")


def an_auction(date_time: int, seller: int = 1) -> Auction:
    return Auction(1, "item", "", 1, 2, date_time, date_time + 1, seller, 10, "")


bids = st.builds(a_bid, times, auction=st.integers(1, 4), bidder=st.integers(1, 4))
others = st.builds(a_person, times, id_=st.integers(1, 4)) | st.builds(
    an_auction, times, seller=st.integers(1, 4)
)
events_lists = st.lists(bids | others, min_size=1, max_size=40)


def batch_of(events: list[Any]) -> Any:
    return with_event_times(record_batch_of(events))


def start_of(time: int, size: int) -> int:
    return TimeWindow.get_window_start_with_offset(time, 0, size)


# ---- q5: bid counts per (auction, 2 s slice) -----------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(events_lists)
def test_q5_slice_counts_count_each_auctions_bids_per_slice(events):
    in_batch = [event for event in events if type(event) is Bid]
    rows = q5.slice_counts(batch_of(events)).to_pylist()
    assert len({row["slice"] for row in rows}) == len(rows)  # one row per slice
    counted: Counter = Counter()
    for row in rows:
        assert len(set(row["auctions"])) == len(row["auctions"])
        for auction, num in zip(row["auctions"], row["nums"], strict=True):
            counted[(row["slice"], auction)] += num
        # stamped with the time of the slice's earliest bid, so it falls in that slice
        assert row["_timestamp"] == min(
            one.date_time for one in in_batch if start_of(one.date_time, 2_000) == row["slice"]
        )
    assert counted == Counter((start_of(one.date_time, 2_000), one.auction) for one in in_batch)


def test_q5_slice_counts_of_a_batch_without_bids_is_empty():
    assert q5.slice_counts(batch_of([a_person(5), an_auction(7)])).num_rows == 0


# ---- q8: distinct persons and sellers per 10 s window --------------------------------------------


@settings(max_examples=200, deadline=None)
@given(events_lists)
def test_q8_rows_are_the_distinct_persons_and_sellers_per_window(events):
    rows = q8.persons_and_sellers(batch_of(events)).to_pylist()
    as_found = [
        (row["id"], row["name"], row["sells"], start_of(row["_timestamp"], 10_000)) for row in rows
    ]
    assert len(set(as_found)) == len(as_found)
    stood_for: dict[tuple, list[int]] = {}
    for event in events:
        if type(event) is Person:
            group = (event.id, event.name, False, start_of(event.date_time, 10_000))
        elif type(event) is Auction:
            group = (event.seller, None, True, start_of(event.date_time, 10_000))
        else:
            continue
        stood_for.setdefault(group, []).append(event.date_time)
    assert set(as_found) == set(stood_for)
    for group, row in zip(as_found, rows, strict=True):
        assert row["_timestamp"] == min(stood_for[group])


def test_q8_keeps_nothing_of_the_bids():
    assert q8.persons_and_sellers(batch_of([a_bid(5), a_bid(7, bidder=2)])).num_rows == 0


# ---- q11: a batch's bids per bidder --------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(events_lists)
def test_q11_rows_are_one_per_bidder_or_its_bids_as_they_came(events):
    rows = q11.BidsPerBidder()(batch_of(events)).to_pylist()
    latest = max(event.date_time for event in events)
    for bidder in {event.bidder for event in events if type(event) is Bid}:
        times = [e.date_time for e in events if type(e) is Bid and e.bidder == bidder]
        mine = [row for row in rows if row["bidder"] == bidder]
        if min(times) <= latest - (q11.GAP_MS - 1):  # a window that may be late: as they came
            assert [(row["bids"], row["first"], row["last"]) for row in mine] == [
                (1, time, time) for time in times
            ]
        else:
            assert [(row["bids"], row["first"], row["last"]) for row in mine] == [
                (len(times), min(times), max(times))
            ]
        assert all(row["_timestamp"] == row["first"] for row in mine)
    assert sum(row["bids"] for row in rows) == sum(type(event) is Bid for event in events)


# ---- q7: bids that may be at their window's highest price ----------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.builds(
                a_bid,
                st.integers(0, 30_000) | st.sampled_from([0, 10_000, 20_000]),
                price=st.integers(1, 5),
            )
            | others,
            max_size=12,
        ),
        max_size=5,
    )
)
def test_q7_passes_a_bid_unless_a_higher_one_of_its_window_passed(batches):
    may_be_highest = q7.MayBeHighest()
    may_be_highest.WINDOWS_REMEMBERED = 100  # remembers every window of this test
    passed_highest: dict[int, int] = {}
    for events in batches:
        if not events:
            continue
        rows = may_be_highest(batch_of(events)).to_pylist()
        bids = [event for event in events if type(event) is Bid]
        for one in bids:
            if one.date_time % q7.SIZE:
                start = start_of(one.date_time, q7.SIZE)
                passed_highest[start] = max(passed_highest.get(start, 0), one.price)
        expected = [
            {
                "auction": one.auction,
                "bidder": one.bidder,
                "price": one.price,
                "dateTime": one.date_time,
                "extra": one.extra,
                "_timestamp": one.date_time,
            }
            for one in bids
            if one.date_time % q7.SIZE == 0
            or one.price >= passed_highest[start_of(one.date_time, q7.SIZE)]
        ]
        assert rows == expected


# ---- q14, q21, q22: one row per bid, as plain Python computes it --------------------------------

urls = st.sampled_from(
    [
        "https://www.nexmark.com/a/b/c/item.htm?query=1&channel_id=7",
        "https://www.nexmark.com/a/b/c/item.htm?query=1",
        "channel_id=&x",
        "a/b",
        "",
    ]
)
stateless_bids = st.builds(
    Bid,
    auction=st.integers(1, 5),
    bidder=st.integers(1, 5),
    price=st.integers(0, 60_000_000) | st.sampled_from([1_101_321, 1_101_322, 55_066_080]),
    channel=st.sampled_from(["Google", "baidu", "channel-3", "APPLE"]),
    url=urls,
    date_time=st.integers(-(10**13), 10**13),
    extra=st.text(alphabet="abcç", max_size=6),
)
stateless_events = st.lists(stateless_bids | others, max_size=20)


def hour_kind(date_time: int) -> str:
    hour = date_time % 86_400_000 // 3_600_000
    if 8 <= hour <= 18:
        return "dayTime"
    return "nightTime" if hour <= 6 or hour >= 20 else "otherTime"


@settings(max_examples=100, deadline=None)
@given(stateless_events)
def test_q14_rows_are_the_bids_in_range_computed_one_by_one(events):
    expected = [
        {
            "auction": one.auction,
            "bidder": one.bidder,
            "price": one.price * 908 / 1000,
            "bidTimeType": hour_kind(one.date_time),
            "dateTime": one.date_time,
            "extra": one.extra,
            "c_counts": one.extra.count("c"),
            "_timestamp": one.date_time,
        }
        for one in events
        if type(one) is Bid and 1_000_000_000 < one.price * 908 < 50_000_000_000
    ]
    assert q14.calculated_bids(batch_of(events)).to_pylist() == expected


@settings(max_examples=100, deadline=None)
@given(stateless_events)
def test_q21_rows_are_the_bids_with_a_channel_id_one_by_one(events):
    hot = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
    expected = []
    for one in events:
        if type(one) is not Bid:
            continue
        match = re.search(r"(&|^)channel_id=([^&]*)", one.url)
        found = hot.get(one.channel.lower(), None if match is None else match.group(2))
        if found is not None:
            expected.append(
                {
                    "auction": one.auction,
                    "bidder": one.bidder,
                    "price": one.price,
                    "channel": one.channel,
                    "channel_id": found,
                    "_timestamp": one.date_time,
                }
            )
    assert q21.with_channel_ids(batch_of(events)).to_pylist() == expected


@settings(max_examples=100, deadline=None)
@given(stateless_events)
def test_q22_rows_are_every_bid_with_its_directories_one_by_one(events):
    def piece(url: str, n: int) -> str | None:
        pieces = url.split("/") if url else []
        return pieces[n] if n < len(pieces) else None

    expected = [
        {
            "auction": one.auction,
            "bidder": one.bidder,
            "price": one.price,
            "channel": one.channel,
            "dir1": piece(one.url, 3),
            "dir2": piece(one.url, 4),
            "dir3": piece(one.url, 5),
            "_timestamp": one.date_time,
        }
        for one in events
        if type(one) is Bid
    ]
    assert q22.with_directories(batch_of(events)).to_pylist() == expected
