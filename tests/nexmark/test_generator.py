"""The Nexmark generator: flink-nexmark's event mix, ids and references, made per event number."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow.errors import ConfigurationError
from barrierflow.nexmark.generator import (
    DEFAULT_BASE_TIME,
    FIRST_AUCTION_ID,
    FIRST_PERSON_ID,
    HOT_CHANNELS,
    ID_LEAD,
    GeneratorConfig,
    event_at,
    event_time,
    generate_events,
    generate_numbers,
)
from barrierflow.nexmark.model import Auction, Bid, Person

DEFAULT = GeneratorConfig()
EVENTS = generate_events(DEFAULT, 50_000)
"""1,000 of flink-nexmark's 50-event epochs, shared by the distribution tests."""


def of_kind(events, kind):
    return [event for event in events if isinstance(event, kind)]


# ---- the event mix and the ids -----------------------------------------------------------------


def test_every_50_events_are_1_person_then_3_auctions_then_46_bids():
    pattern = ["Person"] + ["Auction"] * 3 + ["Bid"] * 46
    for start in range(0, len(EVENTS), 50):
        assert [type(event).__name__ for event in EVENTS[start : start + 50]] == pattern


def test_other_proportions_repeat_in_the_same_way():
    config = GeneratorConfig(person_proportion=2, auction_proportion=1, bid_proportion=3)
    kinds = [type(event).__name__ for event in generate_events(config, 12)]
    assert kinds == ["Person", "Person", "Auction", "Bid", "Bid", "Bid"] * 2


def test_person_and_auction_ids_count_up_from_1000_without_gaps():
    persons, auctions = of_kind(EVENTS, Person), of_kind(EVENTS, Auction)
    assert [p.id for p in persons] == list(range(FIRST_PERSON_ID, FIRST_PERSON_ID + 1000))
    assert [a.id for a in auctions] == list(range(FIRST_AUCTION_ID, FIRST_AUCTION_ID + 3000))


def test_auction_categories_are_10_to_14_and_all_used():
    categories = Counter(a.category for a in of_kind(EVENTS, Auction))
    assert sorted(categories) == [10, 11, 12, 13, 14]
    assert min(categories.values()) > 3000 / 5 * 0.85


def test_event_time_advances_at_the_first_event_rate_from_the_base_time():
    assert [event.date_time - DEFAULT_BASE_TIME for event in EVENTS[:25:6]] == [0, 0, 1, 1, 2]
    assert EVENTS[-1].date_time == DEFAULT_BASE_TIME + 4_999  # event 49,999 at 10,000/s
    slow = GeneratorConfig(first_event_rate=4, base_time=0)
    assert [event_time(slow, n) for n in range(6)] == [0, 250, 500, 750, 1000, 1250]
    assert all(event.date_time == event_time(DEFAULT, n) for n, event in enumerate(EVENTS))


# ---- references between events ----------------------------------------------------------------


def references(events):
    """(kind, referenced id, newest id of that kind made so far) for every reference."""
    last_person = last_auction = None
    out = []
    for event in events:
        if isinstance(event, Person):
            last_person = event.id
        elif isinstance(event, Auction):
            last_auction = event.id
            out.append(("seller", event.seller, last_person))
        else:
            out.append(("auction", event.auction, last_auction))
            out.append(("bidder", event.bidder, last_person))
    return out


def test_sellers_auctions_and_bidders_exist_by_then_or_are_at_most_the_lead_ahead():
    refs = references(EVENTS)
    assert all(FIRST_PERSON_ID <= ref <= newest + ID_LEAD for _, ref, newest in refs)
    existing = Counter(kind for kind, ref, newest in refs if ref <= newest)
    total = Counter(kind for kind, _, _ in refs)
    for kind in total:  # flink-nexmark's lead: only a few point past the newest id
        assert existing[kind] / total[kind] > 0.94, kind


def test_non_hot_references_stay_among_the_recent_ids():
    config = GeneratorConfig(num_in_flight_auctions=20, num_active_people=50)
    checked = 0
    for kind, ref, newest in references(generate_events(config, 20_000)):
        window = 20 if kind == "auction" else 50
        hot = (newest - 1000) // 100 * 100 + 1000 + (kind == "bidder")
        if ref != hot and newest - 1000 >= window:
            assert ref >= newest - window, (kind, ref, newest)
            checked += 1
    assert checked > 5_000


@pytest.mark.parametrize(
    ("ratios", "expected"),
    [((2, 4, 4), (0.5, 0.75, 0.75)), ((10, 2, 5), (0.9, 0.5, 0.8))],
    ids=["flink-defaults", "other-ratios"],
)
def test_hot_ratios_show_in_how_often_the_hot_id_is_chosen(ratios, expected):
    auction_ratio, sellers_ratio, bidders_ratio = ratios
    config = GeneratorConfig(
        hot_auction_ratio=auction_ratio,
        hot_sellers_ratio=sellers_ratio,
        hot_bidders_ratio=bidders_ratio,
    )
    events = EVENTS if ratios == (2, 4, 4) else generate_events(config, 50_000)
    hot = Counter()
    total = Counter()
    last_person = last_auction = 0
    for event in events:
        if isinstance(event, Person):
            last_person = event.id - FIRST_PERSON_ID
        elif isinstance(event, Auction):
            last_auction = event.id - FIRST_AUCTION_ID
            total["seller"] += 1
            hot["seller"] += event.seller - FIRST_PERSON_ID == last_person // 100 * 100
        else:
            total["bid"] += 1
            hot["auction"] += event.auction - FIRST_AUCTION_ID == last_auction // 100 * 100
            hot["bidder"] += event.bidder - FIRST_PERSON_ID == last_person // 100 * 100 + 1
    observed = (
        hot["auction"] / total["bid"],
        hot["seller"] / total["seller"],
        hot["bidder"] / total["bid"],
    )
    # A non-hot draw hits the hot id now and then: a little above 1 - 1/ratio.
    for seen, want in zip(observed, expected, strict=True):
        assert want - 0.02 < seen < want + 0.04, (observed, expected)


# ---- the fields -------------------------------------------------------------------------------


def test_auctions_expire_after_they_open_and_reserves_cover_the_initial_bid():
    for auction in of_kind(EVENTS, Auction):
        assert auction.expires > auction.date_time
        assert 100 <= auction.initial_bid <= auction.reserve <= 200_000_000
    lengths = [a.expires - a.date_time for a in of_kind(EVENTS, Auction)]
    # 100 auctions in flight: 100 * 50 / 3 events ahead, 1,666 events at 10,000/s, twice.
    assert 120 < sum(lengths) / len(lengths) < 210


def test_prices_spread_log_uniformly_between_1_and_1_000_000_dollars():
    prices = [bid.price for bid in of_kind(EVENTS, Bid)]
    assert min(prices) >= 100
    assert max(prices) <= 100_000_000
    decades = Counter(len(str(price)) for price in prices)  # 3 digits: $1-$9.99, ...
    assert sorted(decades) == [3, 4, 5, 6, 7, 8]
    assert min(decades.values()) > len(prices) / 6 * 0.9


def test_extra_pads_events_to_their_average_sizes():
    def average(values):
        values = list(values)
        return sum(values) / len(values)

    bids = average(32 + len(b.extra) for b in of_kind(EVENTS, Bid))
    persons = average(
        8 + len(p.name + p.email_address + p.credit_card + p.city + p.state + p.extra)
        for p in of_kind(EVENTS, Person)
    )
    auctions = average(
        48 + len(a.item_name) + len(a.description) + len(a.extra) for a in of_kind(EVENTS, Auction)
    )
    assert bids == pytest.approx(100, abs=1)
    assert persons == pytest.approx(200, abs=3)
    assert auctions == pytest.approx(500, abs=5)
    assert all(len(b.extra) in range(54, 82) for b in of_kind(EVENTS, Bid))


def test_half_the_bids_come_from_hot_channels_and_most_others_carry_a_channel_id():
    bids = of_kind(EVENTS, Bid)
    hot = [b for b in bids if b.channel in HOT_CHANNELS]
    others = [b for b in bids if b.channel not in HOT_CHANNELS]
    assert 0.48 < len(hot) / len(bids) < 0.52
    assert all(re.fullmatch(r"channel-\d{1,4}", b.channel) for b in others)
    # flink-nexmark's q21 extracts the id; q22 splits the URL into directories.
    ids = [re.search(r"(&|^)channel_id=([^&]*)", b.url) for b in others]
    assert 0.85 < sum(found is not None for found in ids) / len(ids) < 0.95
    assert not any("channel_id" in b.url for b in hot)
    for bid in bids[:1000]:
        assert bid.url.startswith("https://www.nexmark.com/")
        assert len(bid.url.split("/")) == 7  # https: '' host dir1 dir2 dir3 item.htm?...
    by_channel = {}
    for bid in bids:  # a channel always has the same URL
        assert by_channel.setdefault(bid.channel, bid.url) == bid.url


def test_persons_look_like_flink_nexmarks():
    for person in of_kind(EVENTS, Person)[:200]:
        assert re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", person.name)
        assert re.fullmatch(r"[a-z ]*@[a-z ]*\.com", person.email_address)
        assert re.fullmatch(r"\d{4} \d{4} \d{4} \d{4}", person.credit_card)
        assert person.state in {"AZ", "CA", "ID", "OR", "WA", "WY"}


# ---- determinism ------------------------------------------------------------------------------


def test_the_same_seed_makes_the_same_events_and_another_seed_other_ones():
    assert generate_events(GeneratorConfig(seed=0), 2_000) == EVENTS[:2_000]
    other = generate_events(GeneratorConfig(seed=1), 2_000)
    assert other != EVENTS[:2_000]
    # Same shape: ids and times do not depend on the seed, the drawn fields do.
    assert [(type(e), e.date_time) for e in other] == [
        (type(e), e.date_time) for e in EVENTS[:2_000]
    ]
    assert (
        sum(a.price != b.price for a, b in zip(other, EVENTS, strict=False) if isinstance(a, Bid))
        > 1800
    )


configs = st.builds(
    GeneratorConfig,
    seed=st.integers(-(2**70), 2**70),
    first_event_rate=st.integers(1, 50_000),
    base_time=st.integers(0, 2**45),
    out_of_order_group_size=st.integers(1, 200),
    person_proportion=st.integers(1, 3),
    auction_proportion=st.integers(1, 4),
    bid_proportion=st.integers(0, 20),
    hot_auction_ratio=st.integers(1, 5),
    hot_sellers_ratio=st.integers(1, 5),
    hot_bidders_ratio=st.integers(1, 5),
    num_in_flight_auctions=st.integers(1, 300),
    num_active_people=st.integers(1, 300),
    avg_person_byte_size=st.integers(0, 400),
    avg_auction_byte_size=st.integers(0, 900),
    avg_bid_byte_size=st.integers(0, 300),
)


@given(
    config=configs,
    start=st.integers(0, 10**12),
    step=st.integers(1, 60),
    count=st.integers(0, 120),
)
def test_bulk_generation_equals_making_each_event_alone(config, start, step, count):
    numbers = range(start, start + step * count, step)
    made = generate_numbers(config, numbers).events()
    assert made == [event_at(config, n) for n in numbers]
    assert [event.date_time for event in made] == [event_time(config, n) for n in numbers]


@given(config=configs, start=st.integers(0, 10**6), count=st.integers(0, 300))
def test_any_stretch_resumes_the_same_events(config, start, count):
    whole = generate_events(config, count + 50, first=start)
    assert generate_events(config, count, first=start + 50) == whole[50:]


def test_out_of_order_groups_shuffle_whole_events_within_each_group():
    shuffled = GeneratorConfig(out_of_order_group_size=20)
    events = generate_events(shuffled, 2_000)
    assert events != EVENTS[:2_000]
    for start in range(0, 2_000, 20):
        group = events[start : start + 20]
        assert sorted(group, key=repr) == sorted(EVENTS[start : start + 20], key=repr)
    times = [event.date_time for event in events]
    assert times != sorted(times)
    assert all(event.date_time == event_time(shuffled, n) for n, event in enumerate(events))


# ---- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"first_event_rate": 0}, "first_event_rate must be an int >= 1, got 0"),
        ({"first_event_rate": 2.5}, "first_event_rate must be an int >= 1, got 2.5"),
        ({"seed": "x"}, "seed must be an int, got 'x'"),
        ({"base_time": -1}, "base_time must be None or epoch milliseconds"),
        ({"out_of_order_group_size": 0}, "out_of_order_group_size must be an int >= 1"),
        ({"out_of_order_group_size": 1906}, "must not be a multiple of 953"),
        ({"person_proportion": 0}, "person_proportion must be an int >= 1"),
        ({"auction_proportion": 0}, "bids need auctions"),
        ({"hot_bidders_ratio": True}, "hot_bidders_ratio must be an int >= 1, got True"),
        ({"avg_bid_byte_size": 10**6}, "avg_bid_byte_size must be at most 50000"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(settings, message):
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        GeneratorConfig(**settings)


def test_a_wall_clock_base_time_must_be_fixed_before_events_are_made():
    config = GeneratorConfig(base_time=None)
    with pytest.raises(ConfigurationError, match="with_base_time"):
        event_at(config, 0)
    with pytest.raises(ConfigurationError, match="with_base_time"):
        generate_events(config, 10)
    fixed = config.with_base_time(123_000)
    assert event_at(fixed, 0).date_time == 123_000
    assert generate_events(fixed, 10) == [event_at(fixed, n) for n in range(10)]


def test_auctions_without_bids_are_fine():
    events = generate_events(GeneratorConfig(auction_proportion=2, bid_proportion=0), 9)
    assert [type(e).__name__ for e in events] == ["Person", "Auction", "Auction"] * 3


def test_a_negative_event_number_is_refused():
    with pytest.raises(ValueError, match="event number"):
        event_at(DEFAULT, -1)
