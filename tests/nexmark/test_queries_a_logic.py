"""The pure parts of queries q1, q5, q7, q8, q11, q14, q21 and q22, checked against the SQL
they stand for (flink-nexmark's), or against plain Python, without Spark.

The windowed queries are driven by hand from their vectorized steps on Arrow batches of
any size: q5's, q7's and q8's steps (window assigners, aggregate and window functions, q7's
keyed process function with its state and timer) are compared with brute-force
evaluations of their SQL; q11's rows go through the real window logic with its timers
under watermarks that move between batches and compared with its bids one by one there.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow.nexmark.events_file import record_batch_of
from barrierflow.nexmark.model import Auction, Bid, Person
from barrierflow.nexmark.queries import q0, q1, q2, q5, q7, q8, q11, q12, q14, q21, q22
from barrierflow.nexmark.queries._columns import with_event_times
from barrierflow.nexmark.queries._window_rows import BidderWindowRow
from barrierflow.runtime.windowing import (
    AggregatingWindowContents,
    InMemoryWindowState,
    InMemoryWindowTimers,
    WindowLogic,
)
from barrierflow.window import EventTimeSessionWindows, TimeWindow


def bid(date_time: int, price: int = 1, auction: int = 1, bidder: int = 1, **fields: Any) -> Bid:
    values = {"channel": "channel-1", "url": "https://www.nexmark.com/a/b/c/item.htm"}
    values.update(fields)
    return Bid(auction, bidder, price, values["channel"], values["url"], date_time, "")


# ---- q1 and q14: euro prices ---------------------------------------------------------------------


@pytest.mark.parametrize("price", [1, 7, 999, 1_001, 123_456_789, 10**12 - 1, 2**53 // 908])
def test_the_euro_price_is_the_double_nearest_the_exact_decimal(price):
    exact = Decimal(price) * Decimal("0.908")
    (row,) = q1.euro_bids(record_batch_of([bid(0, price)])).to_pylist()
    assert row["price"] == float(exact)  # float(Decimal) rounds correctly
    if price < 10**12:  # at most 15 digits: the double gives the decimal back
        assert Decimal(row["price"]).quantize(Decimal("0.001")) == exact


def test_a_price_whose_euro_thousandths_a_double_cannot_hold_exactly_is_an_error():
    with pytest.raises(pa.ArrowInvalid, match="not in range"):
        q1.euro_bids(record_batch_of([bid(0, 2**53 // 908 + 1)]))


@pytest.mark.parametrize(
    ("price", "kept"),
    [
        (1_101_321, False),  # 999,999.468 euros
        (1_101_322, True),  # 1,000,000.376
        (55_066_079, True),  # 49,999,999.732
        (55_066_080, False),  # 50,000,000.64
    ],
)
def test_q14_keeps_prices_strictly_between_the_bounds_in_euros(price, kept):
    assert q14.in_price_range(pa.array([price])).to_pylist() == [kept]
    assert kept is (1_000_000 < Decimal(price) * Decimal("0.908") < 50_000_000)
    rows = q14.calculated_bids(record_batch_of([bid(0, price)])).to_pylist()
    assert len(rows) == kept


@given(st.integers(-(2**63), 2**63 - 1))
def test_q14_price_range_is_exact_for_every_int64_price(price):
    in_range = q14.MIN_THOUSANDTHS < price * 908 < q14.MAX_THOUSANDTHS  # Python ints: exact
    assert q14.in_price_range(pa.array([price], pa.int64())).to_pylist() == [in_range]


@pytest.mark.parametrize(
    ("hour", "kind"),
    [
        (0, "nightTime"),
        (6, "nightTime"),
        (7, "otherTime"),
        (8, "dayTime"),
        (18, "dayTime"),
        (19, "otherTime"),
        (20, "nightTime"),
        (23, "nightTime"),
    ],
)
def test_bid_time_type_follows_the_utc_hour(hour, kind):
    day = 20_454 * q14.DAY_MS  # 2026-01-01
    times = [day + hour * q14.HOUR_MS, day + (hour + 1) * q14.HOUR_MS - 1]
    assert q14.bid_time_types(pa.array(times)).to_pylist() == [kind, kind]


def utc_hour_kind(date_time: int) -> str:
    """The hour bucket in plain Python (floor arithmetic, any int)."""
    hour = date_time % q14.DAY_MS // q14.HOUR_MS
    if 8 <= hour <= 18:
        return "dayTime"
    return "nightTime" if hour <= 6 or hour >= 20 else "otherTime"


@given(st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-(10**9), 10**9), max_size=20))
def test_bid_time_types_are_the_utc_hour_buckets_of_any_int64_time(times):
    expected = [utc_hour_kind(time) for time in times]
    assert q14.bid_time_types(pa.array(times, pa.int64())).to_pylist() == expected


def test_count_char_counts_the_character_and_none_is_zero():
    texts = pa.array(["ccc-abc", "", None, "çc"])  # 'ç' is two UTF-8 bytes, neither of them 'c'
    assert q14.count_char(texts, "c").to_pylist() == [4, 0, 0, 1]


@given(st.lists(st.text() | st.none(), max_size=10))
def test_count_char_is_pythons_count(texts):
    expected = [0 if text is None else text.count("c") for text in texts]
    assert q14.count_char(pa.array(texts, pa.string()), "c").to_pylist() == expected


# ---- q21: REGEXP_EXTRACT -------------------------------------------------------------------------

PATTERN = r"(&|^)channel_id=([^&]*)"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://x/item.htm?query=1&channel_id=42", "42"),
        ("channel_id=7&a=1", "7"),  # at the very start: the ^ branch
        ("https://x/item.htm?query=1&channel_id=", ""),  # matched, empty: not None
        ("https://x/item.htm?query=1&channel_id=1&channel_id=2", "1"),  # the first match
        ("https://x/item.htm?query=1&xchannel_id=5", None),
        ("https://x/item.htm?channel_id=5", None),  # after '?', not '&' nor the start
        ("", None),
        (None, None),
    ],
)
def test_regexp_extract_is_the_first_matchs_group_or_none(url, expected):
    found = q21.regexp_extract(pa.array([url], pa.string()), q21.CHANNEL_ID_PARAMETER, "channel_id")
    assert found.to_pylist() == [expected]
    match = None if url is None else re.search(PATTERN, url)  # what the SQL's regex says
    assert (None if match is None else match.group(2)) == expected


def python_regexp_extract(text: str | None) -> str | None:
    match = None if text is None else re.search(PATTERN, text)
    return None if match is None else match.group(2)


@given(st.lists(st.text(alphabet="&=_^?/\nachnel_id1é") | st.none(), max_size=10))
def test_regexp_extract_is_pythons_re_search(texts):
    found = q21.regexp_extract(pa.array(texts, pa.string()), q21.CHANNEL_ID_PARAMETER, "channel_id")
    assert found.to_pylist() == [python_regexp_extract(text) for text in texts]


@pytest.mark.parametrize(
    ("channel", "url", "expected"),
    [
        ("Apple", "https://x/item.htm?query=1&channel_id=9", "0"),
        ("GOOGLE", "https://x", "1"),
        ("facebook", "https://x", "2"),
        ("Baidu", "https://x", "3"),
        ("FACEBOO\u212a", "https://x", "2"),  # the Kelvin sign's lower case is 'k'
        ("BA\u0130DU", "https://x", None),  # 'İ'.lower() is 'i' and a combining dot
        ("channel-3", "https://x/item.htm?query=1&channel_id=9", "9"),
        ("channel-3", "https://x/item.htm?query=1", None),
        (None, "https://x/item.htm?query=1&channel_id=9", "9"),  # no channel: not hot
    ],
)
def test_channel_id_is_fixed_for_hot_channels_else_from_the_url(channel, url, expected):
    found = q21.channel_ids(pa.array([channel], pa.string()), pa.array([url]))
    assert found.to_pylist() == [expected]
    rows = q21.with_channel_ids(record_batch_of([bid(0, channel=channel, url=url)])).to_pylist()
    assert [row["channel_id"] for row in rows] == ([] if expected is None else [expected])


@given(
    st.lists(st.text(alphabet="aAbBcCdDeEfFgGiIkKlLoOpPuU\u212a\u0130\u0131\u017f"), max_size=10)
)
def test_a_channel_is_hot_when_pythons_lower_case_is_a_hot_name(channels):
    hot = q21.hot_channel_ids(pa.array(channels, pa.string())).to_pylist()
    assert hot == [q21.HOT_CHANNEL_IDS.get(channel.lower()) for channel in channels]


@pytest.mark.parametrize("channel", ["apple", "Google", "FaceBook", "BAIDU", "FACEBOO\u212a"])
def test_every_hot_channel_spelling_is_found(channel):
    assert q21.hot_channel_ids(pa.array([channel])).to_pylist() == [
        q21.HOT_CHANNEL_IDS[channel.lower()]
    ]


# ---- q22: SPLIT_INDEX ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "index", "expected"),
    [
        ("https://www.nexmark.com/a/b/c/item.htm", 3, "a"),
        ("https://www.nexmark.com/a/b/c/item.htm", 1, ""),  # empty pieces are kept
        ("a/b/", 2, ""),  # a trailing one too
        ("a/b", 2, None),
        ("a/b", -1, None),
        ("", 0, None),  # an empty string has no pieces
        (None, 0, None),
    ],
)
def test_split_index_is_zero_based_and_none_out_of_range(text, index, expected):
    assert q22.split_index(pa.array([text], pa.string()), "/", index).to_pylist() == [expected]


def python_split_index(text: str | None, index: int) -> str | None:
    if not text or index < 0:
        return None
    pieces = text.split("/")
    return pieces[index] if index < len(pieces) else None


@given(st.lists(st.text(alphabet="/ab") | st.none(), max_size=10), st.integers(-2, 7))
def test_split_index_is_pythons_split(texts, index):
    found = q22.split_index(pa.array(texts, pa.string()), "/", index)
    assert found.to_pylist() == [python_split_index(text, index) for text in texts]


@given(st.lists(st.text(alphabet="/ab") | st.none(), max_size=10))
def test_url_directories_are_split_index_3_4_5(urls):
    directories = q22.url_directories(pa.array(urls, pa.string()))
    assert [found.to_pylist() for found in directories] == [
        [python_split_index(url, n) for url in urls] for n in (3, 4, 5)
    ]


# ---- q5: the auctions at a window's maximum ------------------------------------------------------


class WindowContext:
    """What a ProcessWindowFunction sees of its window (the rest is not used here)."""

    def __init__(self, window: TimeWindow) -> None:
        self._window = window

    def window(self) -> TimeWindow:
        return self._window


def q5_by_its_functions(bids: list[Bid], batch_size: int) -> Counter:
    """q5's steps by hand, as (window end, auction, num) rows: `slice_counts` on batches of
    `batch_size` bids, `SliceTotals` per slice (keyed by the rows' slice, windowed by their
    timestamps), then `HotItems` and `AuctionsAtMax` per sliding window."""
    tumbling = q5.TumblingEventTimeWindows.of(q5.SLIDE)
    totals = q5.SliceTotals()
    slices: dict[TimeWindow, Any] = {}
    for first in range(0, len(bids), batch_size):
        batch = with_event_times(record_batch_of(bids[first : first + batch_size]))
        for row in q5.slice_counts(batch).to_pylist():
            (window,) = tumbling.assign_windows(row, row["_timestamp"], None)
            assert window.start == row["slice"]  # keyed by the window it falls in
            slices[window] = totals.add(row, slices.get(window, totals.create_accumulator()))
    hot = q5.HotItems()
    hop = q5.SlidingEventTimeWindows.of(q5.WINDOW, q5.SLIDE)
    windows: dict[TimeWindow, Any] = {}
    for window, accumulator in slices.items():
        counts = totals.get_result(accumulator)
        for hop_window in hop.assign_windows(counts, window.max_timestamp(), None):
            windows[hop_window] = hot.add(counts, windows.get(hop_window, hot.create_accumulator()))
    rows: Counter = Counter()
    for window, accumulator in windows.items():
        context = WindowContext(window)
        for row in q5.AuctionsAtMax().process(0, context, [hot.get_result(accumulator)]):
            rows[(window.end, row["auction"], row["num"])] += 1
    return rows


def q5_by_its_sql(bids: list[Bid]) -> Counter:
    """HOP(10 s, 2 s) counts (a bid is in the windows ending in (dateTime, dateTime + 10 s])
    joined with each window's maximum: (window end, auction, num) rows."""
    counts: Counter = Counter()
    for one in bids:
        first_end = one.date_time - one.date_time % 2_000 + 2_000
        for end in range(first_end, one.date_time + 10_001, 2_000):
            counts[(end, one.auction)] += 1
    maxima: dict[int, int] = {}
    for (end, _), num in counts.items():
        maxima[end] = max(maxima.get(end, 0), num)
    return Counter(
        (end, auction, num) for (end, auction), num in counts.items() if num == maxima[end]
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.builds(bid, st.integers(-3_000, 25_000), auction=st.integers(1, 4))),
    st.integers(1, 12),
)
def test_q5_finds_the_auctions_at_each_hop_windows_maximum(bids, batch_size):
    assert q5_by_its_functions(bids, batch_size) == q5_by_its_sql(bids)


def test_q5_keeps_every_auction_tied_at_the_maximum():
    bids = [bid(100, auction=a) for a in (1, 2, 2, 3, 3, 4)] + [bid(2_100, auction=1)]
    rows = q5_by_its_functions(bids, 3)
    assert {(auction, num) for end, auction, num in rows if end == 2_000} == {(2, 2), (3, 2)}
    assert {(auction, num) for end, auction, num in rows if end == 4_000} == {
        (1, 2),
        (2, 2),
        (3, 2),
    }
    assert {(auction, num) for end, auction, num in rows if end == 12_000} == {(1, 1)}
    assert rows == q5_by_its_sql(bids)


def test_q5_sums_counts_exactly_as_integers():
    big = 2**53 + 1  # a float sum would lose the last unit
    counts = q5.summed([7, 7, 8], [big, 2, 1])
    assert counts.auctions.tolist() == [7, 8] and counts.nums.tolist() == [big + 2, 1]


# ---- q8: distinct new sellers --------------------------------------------------------------------


def q8_window(values: list[dict[str, Any]], start: int = 10_000) -> list[dict]:
    new_sellers = q8.NewSellers()
    halves = [new_sellers.create_accumulator(), new_sellers.create_accumulator()]
    for n, value in enumerate(values):
        halves[n % 2] = new_sellers.add(value, halves[n % 2])
    result = new_sellers.get_result(new_sellers.merge(*halves))
    return list(
        q8.WithWindowStart().process(7, WindowContext(TimeWindow(start, start + 10)), [result])
    )


ANN = {"id": 7, "name": "Ann", "sells": False}
SALE = {"id": 7, "name": None, "sells": True}


def test_new_sellers_need_a_sale_in_the_window_and_come_once():
    assert q8_window([SALE, ANN, ANN, SALE]) == [{"id": 7, "name": "Ann", "stime": 10_000}]
    assert q8_window([ANN]) == []
    assert q8_window([SALE]) == []


def q8_by_its_functions(events: list[Any], batch_size: int) -> Counter:
    """q8 by hand: `persons_and_sellers` on batches, rows keyed by id in tumbling windows."""
    tumbling = q8.TumblingEventTimeWindows.of(q8.WINDOW)
    new_sellers = q8.NewSellers()
    windows: dict[tuple[int, TimeWindow], Any] = {}
    for first in range(0, len(events), batch_size):
        batch = with_event_times(record_batch_of(events[first : first + batch_size]))
        for row in q8.persons_and_sellers(batch).to_pylist():
            (window,) = tumbling.assign_windows(row, row["_timestamp"], None)
            key = (row["id"], window)
            accumulator = windows.get(key, new_sellers.create_accumulator())
            windows[key] = new_sellers.add(row, accumulator)
    return Counter(
        tuple(row.values())
        for (person_id, window), accumulator in windows.items()
        for row in q8.WithWindowStart().process(
            person_id, WindowContext(window), [new_sellers.get_result(accumulator)]
        )
    )


def q8_by_its_sql(events: list[Any]) -> Counter:
    """flink-nexmark's join of distinct (id, name, window) persons with distinct
    (seller, window) auctions."""
    persons = {(e.id, e.name, e.date_time // 10_000 * 10_000) for e in events if type(e) is Person}
    sellers = {(e.seller, e.date_time // 10_000 * 10_000) for e in events if type(e) is Auction}
    return Counter((pid, name, start) for pid, name, start in persons if (pid, start) in sellers)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(
                lambda t, i, n: Person(i, n, "", "", "", "", t, ""),
                st.integers(-15_000, 35_000),
                st.integers(1, 3),
                st.sampled_from(["Ann", "Bob"]),
            ),
            st.builds(
                lambda t, s: Auction(1, "", "", 0, 0, t, t + 1, s, 10, ""),
                st.integers(-15_000, 35_000),
                st.integers(1, 3),
            ),
            st.builds(bid, st.integers(-15_000, 35_000)),
        ),
        max_size=30,
    ),
    st.integers(1, 8),
)
def test_q8_finds_what_its_sql_join_finds(events, batch_size):
    assert q8_by_its_functions(events, batch_size) == q8_by_its_sql(events)


# ---- q11: sessions from a batch's bids per bidder ------------------------------------------------


class CountEach(q11.CountBids):
    """flink-nexmark's count(*): one per bid (the plain query, for reference)."""

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1


def session_rows(bids: list[list[Bid]], lags: list[int], rows_of, assigner, count) -> Counter:
    """The real window logic over what `rows_of(batch)` makes of each batch of `bids`
    ((bidder, value, timestamp) rows), as the window operator runs it: before batch i the
    watermark moves to the largest bid time before it minus lags[i] (never back; the
    source's watermark trails what it emitted) and the due timers fire; at the end
    everything fires."""
    timers = InMemoryWindowTimers()
    logic = WindowLogic(
        assigner,
        AggregatingWindowContents(count, BidderWindowRow()),
        InMemoryWindowState(),
        timers,
    )
    rows: Counter = Counter()

    def advance(watermark: int) -> None:
        while (timer := timers.poll_event_time_timer(watermark)) is not None:
            for result in logic.on_event_time(timer.key, timer.window, timer.timestamp, watermark):
                rows[tuple(result.value.values())] += 1

    watermark, latest = -(2**62), -(2**62)
    for batch, lag in zip(bids, lags, strict=True):
        watermark = max(watermark, latest - lag)
        advance(watermark)
        for bidder, value, timestamp in rows_of(batch):
            logic.process_element(bidder, value, timestamp, watermark)
        latest = max([latest, *(one.date_time for one in batch)])
    advance(2**62)
    return rows


def q11_one_by_one(batches: list[list[Bid]], lags: list[int]) -> Counter:
    """The plain query: each bid in a session window of 10 s, counted."""

    def rows_of(batch: list[Bid]) -> list[tuple[Any, Any, int]]:
        return [(one.bidder, one, one.date_time) for one in batch]

    assigner = EventTimeSessionWindows.with_gap(q11.GAP_MS)
    return session_rows(batches, lags, rows_of, assigner, CountEach())


def q11_by_its_functions(batches: list[list[Bid]], lags: list[int]) -> Counter:
    """q11 as built: `BidsPerBidder` rows (one step, remembering across batches) in
    sessions whose gap each row sets."""
    step = q11.BidsPerBidder()

    def rows_of(batch: list[Bid]) -> list[tuple[Any, Any, int]]:
        rows = step(with_event_times(record_batch_of(batch))).to_pylist() if batch else []
        return [(row["bidder"], row, row.pop("_timestamp")) for row in rows]

    assigner = q11.DynamicEventTimeSessionWindows.with_dynamic_gap(q11.run_gap)
    return session_rows(batches, lags, rows_of, assigner, q11.CountBids())


session_bids = st.builds(
    bid,
    st.one_of(st.integers(0, 60_000), st.sampled_from([0, 10_000, 20_000, 20_001, 30_000])),
    bidder=st.integers(1, 3),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(session_bids, max_size=8), st.integers(0, 15_000)), max_size=8))
def test_q11_rows_make_the_sessions_the_bids_make_one_by_one_late_bids_included(batches):
    """Whatever the watermark (at most the largest time seen, as the source's), with bids
    far out of order, some late: the same sessions and counts as the plain query."""
    bids, lags = [batch for batch, _ in batches], [lag for _, lag in batches]
    assert q11_by_its_functions(bids, lags) == q11_one_by_one(bids, lags)


def test_q11_groups_a_bidders_bids_in_a_batch_into_one_row():
    step = q11.BidsPerBidder()
    rows = step(
        with_event_times(
            record_batch_of([bid(t, bidder=b) for b, t in [(1, 5_000), (2, 6_000), (1, 9_000)]])
        )
    )
    assert rows.to_pylist() == [
        {"bidder": 1, "bids": 2, "first": 5_000, "last": 9_000, "_timestamp": 5_000},
        {"bidder": 2, "bids": 1, "first": 6_000, "last": 6_000, "_timestamp": 6_000},
    ]
    assert q11.run_gap(rows.to_pylist()[0]) == 9_000 - 5_000 + q11.GAP_MS


def test_q11_keeps_a_bidders_bids_as_they_came_when_one_may_be_late():
    step = q11.BidsPerBidder()
    step(with_event_times(record_batch_of([bid(30_000, bidder=9)])))
    # 20,001 + 9,999 = 30,000 <= the latest time: bidder 1's window may be late
    rows = step(with_event_times(record_batch_of([bid(t, bidder=1) for t in (25_000, 20_001)])))
    assert [(row["bids"], row["first"]) for row in rows.to_pylist()] == [(1, 25_000), (1, 20_001)]
    rows = step(with_event_times(record_batch_of([bid(t, bidder=1) for t in (25_000, 20_002)])))
    assert [(row["bids"], row["first"]) for row in rows.to_pylist()] == [(2, 20_002)]


# ---- q7: the highest bids, window ends included --------------------------------------------------


class ValueState:
    def __init__(self) -> None:
        self.value_ = None

    def value(self) -> Any:
        return self.value_

    def update(self, value: Any) -> None:
        self.value_ = value

    def clear(self) -> None:
        self.value_ = None


class KeyedContext:
    """One key's state and timers, as a KeyedProcessFunction sees them."""

    def __init__(self) -> None:
        self.states: dict[Any, ValueState] = defaultdict(ValueState)
        self.timers: dict[Any, set[int]] = defaultdict(set)
        self.key: Any = None

    def get_state(self, descriptor: Any) -> ValueState:
        return self  # type: ignore[return-value]  # the function's one state, per key

    def value(self) -> Any:
        return self.states[self.key].value()

    def update(self, value: Any) -> None:
        self.states[self.key].update(value)

    def clear(self) -> None:
        self.states[self.key].clear()

    def timer_service(self) -> KeyedContext:
        return self

    def register_event_time_timer(self, timestamp: int) -> None:
        self.timers[self.key].add(timestamp)


def q7_by_its_functions(bids: list[Bid], batch_size: int = 3) -> Counter:
    """q7's operators driven by hand: the pre-filter on batches of `batch_size` bids, windows
    per auction, then the merge per window end."""
    assigner = q7.SlidingEventTimeWindows.of(q7.SIZE + 1, q7.SIZE)
    highest_bids = q7.HighestBids()
    accumulators: dict[tuple[int, TimeWindow], Any] = {}
    may_be_highest = q7.MayBeHighest()
    may_be_highest.WINDOWS_REMEMBERED = 2  # forgets sooner: more bids come back out of order
    passed = [
        row
        for first in range(0, len(bids), batch_size)
        for row in may_be_highest(record_batch_of(bids[first : first + batch_size])).to_pylist()
    ]
    for one in passed:
        for window in assigner.assign_windows(one, one["dateTime"], None):
            key = (one["auction"], window)
            if key not in accumulators:
                accumulators[key] = highest_bids.create_accumulator()
            accumulators[key] = highest_bids.add(one, accumulators[key])
    parts = []
    for (auction, window), accumulator in accumulators.items():
        result = highest_bids.get_result(accumulator)
        parts.extend(q7.AuctionHighest().process(auction, WindowContext(window), [result]))
    context = KeyedContext()
    merge = q7.WindowHighest()
    merge.open(context)
    for part in parts:
        context.key = q7.window_end_of(part)
        assert part.window_end % q7.SIZE == 0
        merge.process_element(part, context)
    rows: Counter = Counter()
    for key, timers in list(context.timers.items()):
        assert timers == {key}  # one timer per window, at its end
        context.key = key
        rows.update(tuple(row.values()) for row in merge.on_timer(key, context))
    return rows


def q7_by_its_sql(bids: list[Bid]) -> Counter:
    """flink-nexmark's q7 evaluated literally: each tumbling window's max price, joined with
    every bid at that price with window_end - 10 s <= dateTime <= window_end."""
    maxima: dict[int, int] = {}
    for one in bids:
        end = one.date_time - one.date_time % q7.SIZE + q7.SIZE
        maxima[end] = max(maxima.get(end, one.price), one.price)
    return Counter(
        (one.auction, one.bidder, one.price, one.date_time, one.extra)
        for end, highest in maxima.items()
        for one in bids
        if one.price == highest and end - q7.SIZE <= one.date_time <= end
    )


edge_heavy_times = st.one_of(
    st.sampled_from([0, 1, 9_999, 10_000, 10_001, 19_999, 20_000, 30_000]),
    st.integers(0, 30_000),
)
bids_near_edges = st.lists(
    st.builds(
        bid,
        edge_heavy_times,
        price=st.integers(1, 4),
        auction=st.integers(1, 3),
        bidder=st.integers(1, 50),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(bids_near_edges, st.integers(1, 8))
def test_q7_finds_what_its_sql_join_finds(bids, batch_size):
    assert q7_by_its_functions(bids, batch_size) == q7_by_its_sql(bids)


def test_a_bid_at_a_window_end_matches_that_windows_maximum_without_raising_it():
    bids = [bid(5_000, 3, bidder=1), bid(10_000, 3, bidder=2), bid(10_000, 9, bidder=3)]
    # Window [0, 10 s): max 3, matched by bidders 1 and 2 (at its end); bidder 3's 9 is in
    # window [10 s, 20 s) only, where it is the max and matches itself.
    expected = Counter(
        {(1, 1, 3, 5_000, ""): 1, (1, 2, 3, 10_000, ""): 1, (1, 3, 9, 10_000, ""): 1}
    )
    assert q7_by_its_functions(bids) == q7_by_its_sql(bids) == expected


def test_a_bid_at_a_window_end_can_match_both_windows():
    bids = [bid(3_000, 5, auction=1), bid(10_000, 5, auction=2)]
    rows = q7_by_its_functions(bids)
    assert rows[(2, 1, 5, 10_000, "")] == 2  # the max of [0, 10 s) and of [10 s, 20 s)
    assert rows == q7_by_its_sql(bids)


# ---- every query: its rows' columns --------------------------------------------------------------


HOT_BID = bid(0, 2_000_000, channel="Google")
ROWS = {
    q0: lambda: q0.bid_columns(record_batch_of([HOT_BID])).to_pylist()[0],
    q1: lambda: q1.euro_bids(record_batch_of([HOT_BID])).to_pylist()[0],
    q2: lambda: q2.selected_bids(record_batch_of([HOT_BID._replace(auction=246)])).to_pylist()[0],
    q5: lambda: next(q5.AuctionsAtMax().process(0, None, [q5.summed([1], [3])])),
    q7: lambda: q7.bid_row(q7.MayBeHighest()(record_batch_of([HOT_BID])).to_pylist()[0]),
    q8: lambda: q8_window([ANN, SALE])[0],
    q11: lambda: next(BidderWindowRow().process(1, WindowContext(TimeWindow(0, 10)), [2])),
    q12: lambda: next(BidderWindowRow().process(1, WindowContext(TimeWindow(0, 10)), [2])),
    q14: lambda: q14.calculated_bids(record_batch_of([HOT_BID])).to_pylist()[0],
    q21: lambda: q21.with_channel_ids(record_batch_of([HOT_BID])).to_pylist()[0],
    q22: lambda: q22.with_directories(record_batch_of([HOT_BID])).to_pylist()[0],
}


@pytest.mark.parametrize("query", ROWS, ids=lambda query: query.__name__.rsplit(".", 1)[1])
def test_rows_have_the_querys_columns_in_order(query):
    assert tuple(ROWS[query]()) == query.COLUMNS
    assert query.UPDATING is False  # all of these are append-only in Flink too
