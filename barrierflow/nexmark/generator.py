"""The Nexmark event generator: event number `n` is a pure function of `(config, n)`.

It follows flink-nexmark's generator: out of every 50 events 1 is a Person, 3 are
Auctions and 46 are Bids (in that order); person and auction ids count up from 1000;
an auction's seller and a bid's auction and bidder are mostly "hot" ids (the first of
the last batch of 100) and otherwise one of the recent ids; event `n` happens at
`base_time + n * 1000 // first_event_rate` ms; `extra` pads each event to an average size.

Unlike flink-nexmark, which draws from one `SplittableRandom` in sequence, every random
draw here is a counter-based hash (splitmix64) of the seed, the event number and the
draw's index, so any event can be made on its own: a split resumes at any event number
and every machine makes the same events. Where this differs from flink-nexmark, on purpose:

- strings (names, descriptions, `extra`) are slices of fixed pseudo-random pools, with
  flink-nexmark's lengths and alphabets, not drawn character by character;
- a price is one of 65,536 log-spaced values from 1.00 to 1,000,000.00 (in cents, as
  flink-nexmark's `10^(6u) * 100`), read from an integer table, so that no floating-point
  function decides an event;
- a bid's bidder is `1000 + person`, where flink-nexmark adds 1000 twice (a bug);
- the channel URLs are one fixed table (flink-nexmark draws them anew in every JVM);
- the rate is constant: flink-nexmark's generator also uses only its first event rate
  (its `nextEventRate` and rate shape never reach the inter-event delay).

As in flink-nexmark, a reference may run a little ahead of the ids made so far: a
non-hot seller, bidder or auction is drawn from the recent ids plus the next 10
(`ID_LEAD`), and the hot bidder of the first batch of 100 people is person 1001.

>>> config = GeneratorConfig(seed=7)
>>> [type(event).__name__ for event in generate_events(config, 5)]
['Person', 'Auction', 'Auction', 'Auction', 'Bid']
>>> person = event_at(config, 0)
>>> person.id, person.date_time == config.base_time
(1000, True)
>>> generate_events(config, 3, first=48) == [event_at(config, n) for n in (48, 49, 50)]
True
>>> event_time(config, 25) - config.base_time  # 10,000 events/s: 0.1 ms apart
2
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import numpy as np

from barrierflow.errors import ConfigurationError
from barrierflow.nexmark.model import AUCTION, BID, PERSON, Auction, Bid, Event, Person

__all__ = [
    "DEFAULT_BASE_TIME",
    "FIRST_AUCTION_ID",
    "FIRST_CATEGORY_ID",
    "FIRST_PERSON_ID",
    "HOT_CHANNELS",
    "ID_LEAD",
    "NUM_CATEGORIES",
    "GeneratedEvents",
    "GeneratorConfig",
    "event_at",
    "event_time",
    "generate_events",
    "generate_numbers",
]

DEFAULT_BASE_TIME = 1_767_225_600_000
"""2026-01-01T00:00:00Z in epoch ms: when event 0 happens unless told otherwise."""
FIRST_PERSON_ID = 1000
"""The id of the first person (flink-nexmark's: small datasets still find matches)."""
FIRST_AUCTION_ID = 1000
"""The id of the first auction."""
FIRST_CATEGORY_ID = 10
"""Auction categories are `FIRST_CATEGORY_ID .. FIRST_CATEGORY_ID + NUM_CATEGORIES - 1`."""
NUM_CATEGORIES = 5
"""How many auction categories there are."""
HOT_BATCH = 100
"""A hot seller, bidder or auction is the first (bidder: second) of the last batch of this many."""
ID_LEAD = 10
"""A non-hot reference may name one of this many ids not made yet (flink-nexmark's lead)."""
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
"""The channels of half the bids; the other half use `channel-0 .. channel-9999`."""
NUM_CHANNELS = 10_000
"""How many ordinary channels there are."""

_SHUFFLE_MULTIPLIER = 953
"""flink-nexmark's: event `n` of an out-of-order group of size k takes number `(n * 953) % k`."""
_MAX_AVG_SIZE = 50_000
"""The largest average event size accepted (the `extra` pool must hold 1.2x of it)."""


@dataclass(frozen=True)
class GeneratorConfig:
    """What the generator makes; the defaults are flink-nexmark's.

    `base_time=None` means "the wall clock when the job starts": a source decides it once,
    on the driver (`with_base_time`), so that every subtask and every restart agrees.

    >>> GeneratorConfig(first_event_rate=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    barrierflow.errors.ConfigurationError: GeneratorConfig: first_event_rate must be an int >= 1...
    """

    seed: int = 0
    """Any int: a different seed gives different events (same ids and times)."""
    first_event_rate: int = 10_000
    """Events per second of event time: event `n` happens `n * 1000 // rate` ms after base."""
    base_time: int | None = DEFAULT_BASE_TIME
    """Epoch ms of event 0; None: the wall clock at job start (see `with_base_time`)."""
    out_of_order_group_size: int = 1
    """Events come shuffled within consecutive groups of this many (1: in order)."""
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    hot_auction_ratio: int = 2
    """A bid is for a hot auction with probability `1 - 1 / hot_auction_ratio`."""
    hot_sellers_ratio: int = 4
    """An auction is by a hot seller with probability `1 - 1 / hot_sellers_ratio`."""
    hot_bidders_ratio: int = 4
    """A bid is by a hot bidder with probability `1 - 1 / hot_bidders_ratio`."""
    num_in_flight_auctions: int = 100
    """Average number of open auctions: sets auction lengths and which auctions get bids."""
    num_active_people: int = 1000
    """Non-hot sellers and bidders are among the last this many people."""
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100

    def __post_init__(self) -> None:
        minimums = {
            "first_event_rate": 1,
            "out_of_order_group_size": 1,
            "person_proportion": 1,
            "auction_proportion": 0,
            "bid_proportion": 0,
            "hot_auction_ratio": 1,
            "hot_sellers_ratio": 1,
            "hot_bidders_ratio": 1,
            "num_in_flight_auctions": 1,
            "num_active_people": 1,
            "avg_person_byte_size": 0,
            "avg_auction_byte_size": 0,
            "avg_bid_byte_size": 0,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if not _is_int(value) or value < minimum:
                raise ConfigurationError(
                    f"GeneratorConfig: {name} must be an int >= {minimum}, got {value!r}"
                )
        if not _is_int(self.seed):
            raise ConfigurationError(f"GeneratorConfig: seed must be an int, got {self.seed!r}")
        if self.base_time is not None and (not _is_int(self.base_time) or self.base_time < 0):
            raise ConfigurationError(
                "GeneratorConfig: base_time must be None or epoch milliseconds (an int >= 0), "
                f"got {self.base_time!r}"
            )
        if self.out_of_order_group_size % _SHUFFLE_MULTIPLIER == 0:
            raise ConfigurationError(
                "GeneratorConfig: out_of_order_group_size must not be a multiple of "
                f"{_SHUFFLE_MULTIPLIER} (the shuffle would repeat events), "
                f"got {self.out_of_order_group_size}"
            )
        if self.bid_proportion > 0 and self.auction_proportion == 0:
            raise ConfigurationError(
                "GeneratorConfig: bids need auctions: auction_proportion must be >= 1 "
                "when bid_proportion is"
            )
        for name in ("avg_person_byte_size", "avg_auction_byte_size", "avg_bid_byte_size"):
            if getattr(self, name) > _MAX_AVG_SIZE:
                raise ConfigurationError(
                    f"GeneratorConfig: {name} must be at most {_MAX_AVG_SIZE}, "
                    f"got {getattr(self, name)}"
                )

    @property
    def total_proportion(self) -> int:
        """The length of the repeating person/auction/bid pattern (50 by default)."""
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    def with_base_time(self, epoch_ms: int) -> GeneratorConfig:
        """This config with event 0 at `epoch_ms` (fixes a `base_time` of None)."""
        return dataclasses.replace(self, base_time=epoch_ms)


def event_time(config: GeneratorConfig, n: int) -> int:
    """The epoch ms of event number `n` (its `date_time`)."""
    return _time_of(config, _shuffled(config, n))


def event_at(config: GeneratorConfig, n: int) -> Event:
    """Event number `n` (>= 0), made on its own: the reference for `generate_events`."""
    if not _is_int(n) or n < 0:
        raise ValueError(f"an event number is an int >= 0, got {n!r}")
    m = _shuffled(config, n)
    kind = _kind_of(config, m)
    key = _key(config.seed)
    if kind == PERSON:
        return _person(config, m, [_draw(key, m, k) for k in range(_PERSON_DRAWS)])
    if kind == AUCTION:
        return _auction(config, m, [_draw(key, m, k) for k in range(_AUCTION_DRAWS)])
    return _bid(config, m, [_draw(key, m, k) for k in range(_BID_DRAWS)])


def generate_events(config: GeneratorConfig, count: int, first: int = 0) -> list[Event]:
    """Events `first .. first + count - 1`, equal to `event_at` of each, made in bulk."""
    return generate_numbers(config, range(first, first + count)).events()


def generate_numbers(config: GeneratorConfig, numbers: range) -> GeneratedEvents:
    """The events numbered by `numbers` (any step: a split's `range(k, end, splits)`),
    as columns per kind; `.events()` gives them in order."""
    if numbers.start < 0 or (len(numbers) and numbers[-1] < 0):
        raise ValueError(f"event numbers are >= 0, got {numbers!r}")
    return GeneratedEvents.make(config, np.arange(numbers.start, numbers.stop, numbers.step))


# ---- bulk generation -------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneratedEvents:
    """A run of generated events, kept by kind: what a writer or a columnar reader wants.

    `kinds[i]` is the event type of the i-th event; the persons, auctions and bids appear
    in `persons`, `auctions` and `bid_columns` in the same relative order. Bids are columns
    (`Bid._fields` order; ints as numpy int64 arrays, strings as lists), the rarer persons
    and auctions are rows.
    """

    kinds: np.ndarray
    persons: list[Person]
    auctions: list[Auction]
    bid_columns: tuple[Sequence[Any], ...]

    def __len__(self) -> int:
        return len(self.kinds)

    @property
    def bids(self) -> list[Bid]:
        columns = [c.tolist() if isinstance(c, np.ndarray) else c for c in self.bid_columns]
        new = tuple.__new__
        return [new(Bid, row) for row in zip(*columns, strict=True)]

    def events(self) -> list[Event]:
        """The events in order."""
        kinds = self.kinds
        if not len(kinds):
            return []
        if not self.persons and not self.auctions:
            return self.bids  # type: ignore[return-value]
        out: list[Any] = [None] * len(kinds)
        for kind, rows in ((PERSON, self.persons), (AUCTION, self.auctions), (BID, self.bids)):
            if rows:
                for index, row in zip(np.flatnonzero(kinds == kind).tolist(), rows, strict=True):
                    out[index] = row
        return out

    @classmethod
    def make(cls, config: GeneratorConfig, numbers: np.ndarray) -> GeneratedEvents:
        numbers = numbers.astype(np.int64, copy=False)
        k = config.out_of_order_group_size
        m = numbers if k == 1 else numbers - numbers % k + (numbers * _SHUFFLE_MULTIPLIER) % k
        offset = m % config.total_proportion
        kinds = np.full(len(m), BID, dtype=np.int8)
        kinds[offset < config.person_proportion + config.auction_proportion] = AUCTION
        kinds[offset < config.person_proportion] = PERSON
        key = _key(config.seed)
        persons: list[Person] = []
        auctions: list[Auction] = []
        for kind, draws, build, rows in (
            (PERSON, _PERSON_DRAWS, _person, persons),
            (AUCTION, _AUCTION_DRAWS, _auction, auctions),
        ):
            chosen = m[kinds == kind]
            if len(chosen):
                table = _draws(key, chosen, draws).T.tolist()
                rows.extend(map(build, [config] * len(chosen), chosen.tolist(), table))
        return cls(kinds, persons, auctions, _bid_columns(config, key, m[kinds == BID]))


def _bid_columns(config: GeneratorConfig, key: int, m: np.ndarray) -> tuple[Sequence[Any], ...]:
    """The columns of the bids numbered `m`: `_bid` for many at once (equal, tested)."""
    if config.base_time is None:
        _needs_base_time()
    tables = _tables()
    draws = _draws(key, m, _BID_DRAWS)
    total = config.total_proportion
    epoch = m // total
    last_auction = epoch * config.auction_proportion + config.auction_proportion - 1
    last_person = epoch * config.person_proportion + config.person_proportion - 1

    hot = _below(draws[0], config.hot_auction_ratio) > 0
    low = np.maximum(last_auction - config.num_in_flight_auctions, 0)
    recent = low + _below(draws[1], last_auction - low + 1 + ID_LEAD)
    auction = np.where(hot, last_auction // HOT_BATCH * HOT_BATCH, recent) + FIRST_AUCTION_ID

    hot = _below(draws[2], config.hot_bidders_ratio) > 0
    people = last_person + 1
    active = np.minimum(people, config.num_active_people)
    recent = people - active + _below(draws[3], active + ID_LEAD)
    bidder = np.where(hot, last_person // HOT_BATCH * HOT_BATCH + 1, recent) + FIRST_PERSON_ID

    price = tables.prices[(draws[4] >> np.uint64(48)).astype(np.int64)]
    hot = _below(draws[5], 2) > 0
    channel = np.where(hot, _below(draws[6], 4), 4 + _below(draws[6], NUM_CHANNELS))
    date_time = config.base_time + m * 1000 // config.first_event_rate
    sizes, offsets = _extras(draws[7], draws[8], _BID_SIZE, config.avg_bid_byte_size)
    pool = tables.letters
    extra = [pool[o : o + s] for o, s in zip(offsets.tolist(), sizes.tolist(), strict=True)]
    return (
        auction,
        bidder,
        price,
        tables.channel_names[channel].tolist(),
        tables.channel_urls[channel].tolist(),
        date_time,
        extra,
    )


def _extras(
    size_draw: np.ndarray, offset_draw: np.ndarray, current: int, average: int
) -> tuple[np.ndarray, np.ndarray]:
    """`_extra`'s sizes and pool offsets for events of fixed size `current`."""
    if current > average:
        zeros = np.zeros(len(size_draw), dtype=np.int64)
        return zeros, zeros
    desired = average - current
    delta = (2 * desired + 5) // 10
    sizes = desired - delta + (_below(size_draw, 2 * delta) if delta else 0)
    sizes = np.broadcast_to(np.asarray(sizes, dtype=np.int64), size_draw.shape)
    return sizes, _below(offset_draw, len(_tables().letters) - sizes)


def _below(draws: np.ndarray, bound: Any) -> np.ndarray:
    """Each draw mod its bound, as int64 (`bound` an int or an int64 array, all >= 1)."""
    return (draws % np.asarray(bound).astype(np.uint64)).astype(np.int64)


# ---- one event -------------------------------------------------------------------------------

_PERSON_DRAWS = 11
_AUCTION_DRAWS = 12
_BID_DRAWS = 9
_DRAW_STRIDE = 16
"""Draws reserved per event number: draw `k` of event `m` hashes `m * 16 + k`."""
_BID_SIZE = 8 + 8 + 8 + 8
"""flink-nexmark counts a bid as 32 bytes before its extra."""


def _person(config: GeneratorConfig, m: int, draws: Sequence[int]) -> Person:
    tables = _tables()
    name = f"{tables.first_names[draws[0] % 11]} {tables.last_names[draws[1] % 9]}"
    email = f"{_string(draws[2], draws[3], 7)}@{_string(draws[4], draws[5], 5)}.com"
    quads = draws[6]
    card = " ".join(f"{(quads >> shift) % 10_000:04d}" for shift in (0, 16, 32, 48))
    city = tables.cities[draws[7] % len(tables.cities)]
    state = tables.states[draws[8] % len(tables.states)]
    size = 8 + len(name) + len(email) + len(card) + len(city) + len(state)
    return Person(
        _last_person(config, m) + FIRST_PERSON_ID,
        name,
        email,
        card,
        city,
        state,
        _time_of(config, m),
        _extra(draws[9], draws[10], size, config.avg_person_byte_size),
    )


def _auction(config: GeneratorConfig, m: int, draws: Sequence[int]) -> Auction:
    if draws[0] % config.hot_sellers_ratio > 0:
        seller = _last_person(config, m) // HOT_BATCH * HOT_BATCH
    else:
        seller = _recent_person(config, m, draws[1])
    timestamp = _time_of(config, m)
    ahead = config.num_in_flight_auctions * config.total_proportion // config.auction_proportion
    horizon = _time_of(config, m + ahead) - timestamp
    initial_bid = _price(draws[3])
    name = _string(draws[5], draws[6], 20)
    description = _string(draws[7], draws[8], 100)
    size = 8 + len(name) + len(description) + 8 + 8 + 8 + 8 + 8
    return Auction(
        _last_auction(config, m) + FIRST_AUCTION_ID,
        name,
        description,
        initial_bid,
        initial_bid + _price(draws[9]),
        timestamp,
        timestamp + 1 + draws[4] % max(horizon * 2, 1),
        seller + FIRST_PERSON_ID,
        FIRST_CATEGORY_ID + draws[2] % NUM_CATEGORIES,
        _extra(draws[10], draws[11], size, config.avg_auction_byte_size),
    )


def _bid(config: GeneratorConfig, m: int, draws: Sequence[int]) -> Bid:
    """One bid; `_bid_columns` makes many at once and must agree with this."""
    tables = _tables()
    last_auction = _last_auction(config, m)
    if draws[0] % config.hot_auction_ratio > 0:
        auction = last_auction // HOT_BATCH * HOT_BATCH
    else:
        low = max(last_auction - config.num_in_flight_auctions, 0)
        auction = low + draws[1] % (last_auction - low + 1 + ID_LEAD)
    if draws[2] % config.hot_bidders_ratio > 0:
        bidder = _last_person(config, m) // HOT_BATCH * HOT_BATCH + 1
    else:
        bidder = _recent_person(config, m, draws[3])
    channel = draws[6] % 4 if draws[5] % 2 > 0 else 4 + draws[6] % NUM_CHANNELS
    return Bid(
        auction + FIRST_AUCTION_ID,
        bidder + FIRST_PERSON_ID,
        _price(draws[4]),
        tables.channel_names[channel],
        tables.channel_urls[channel],
        _time_of(config, m),
        _extra(draws[7], draws[8], _BID_SIZE, config.avg_bid_byte_size),
    )


def _recent_person(config: GeneratorConfig, m: int, draw: int) -> int:
    """One of the last `num_active_people` people or the next `ID_LEAD` (base 0)."""
    people = _last_person(config, m) + 1
    active = min(people, config.num_active_people)
    return people - active + draw % (active + ID_LEAD)


def _last_person(config: GeneratorConfig, m: int) -> int:
    """The newest person id (base 0) at event `m`: its own if `m` is a person."""
    epoch, offset = divmod(m, config.total_proportion)
    return epoch * config.person_proportion + min(offset, config.person_proportion - 1)


def _last_auction(config: GeneratorConfig, m: int) -> int:
    """The newest auction id (base 0) at event `m`: its own if `m` is an auction."""
    epoch, offset = divmod(m, config.total_proportion)
    persons, auctions = config.person_proportion, config.auction_proportion
    if offset < persons:
        return epoch * auctions - 1
    return epoch * auctions + min(offset - persons, auctions - 1)


def _kind_of(config: GeneratorConfig, m: int) -> int:
    offset = m % config.total_proportion
    if offset < config.person_proportion:
        return PERSON
    if offset < config.person_proportion + config.auction_proportion:
        return AUCTION
    return BID


def _shuffled(config: GeneratorConfig, n: int) -> int:
    """The number whose content and time event `n` takes (flink-nexmark's out-of-order)."""
    k = config.out_of_order_group_size
    return n - n % k + (n * _SHUFFLE_MULTIPLIER) % k


def _time_of(config: GeneratorConfig, m: int) -> int:
    if config.base_time is None:
        _needs_base_time()
    return config.base_time + m * 1000 // config.first_event_rate


def _needs_base_time() -> None:
    raise ConfigurationError(
        "GeneratorConfig.base_time is None (the wall clock at job start): fix it first "
        "with config.with_base_time(epoch_ms), as NexmarkSource does"
    )


def _price(draw: int) -> int:
    return int(_tables().prices[draw >> 48])


def _string(length_draw: int, offset_draw: int, max_length: int) -> str:
    """flink-nexmark's `nextString`: 3 to `max_length - 1` letters and spaces, trimmed."""
    pool = _tables().words
    length = 3 + length_draw % (max_length - 3)
    start = offset_draw % (len(pool) - length)
    return pool[start : start + length].strip()


def _extra(size_draw: int, offset_draw: int, current: int, average: int) -> str:
    """Letters that bring an event of `current` bytes to `average` bytes on average (+-20%)."""
    if current > average:
        return ""
    desired = average - current
    delta = (2 * desired + 5) // 10  # round(desired * 0.2), in integers
    size = desired - delta + (size_draw % (2 * delta) if delta else 0)
    pool = _tables().letters
    start = offset_draw % (len(pool) - size)
    return pool[start : start + size]


# ---- the counter-based random draws ----------------------------------------------------------

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def _mix(z: int) -> int:
    """splitmix64's finalizer: a bijection of 64-bit ints that scatters every bit."""
    z = (z ^ (z >> 30)) * _MIX1 & _MASK
    z = (z ^ (z >> 27)) * _MIX2 & _MASK
    return z ^ (z >> 31)


def _mix_array(z: np.ndarray) -> np.ndarray:
    """`_mix` of every element (uint64, wrapping like `& _MASK`)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def _key(seed: int) -> int:
    return _mix((seed * _GAMMA + 0x6E65786D61726B) & _MASK)


def _draw(key: int, m: int, k: int) -> int:
    """Draw `k` of event number `m`: 64 uniform bits."""
    return _mix((key + (m * _DRAW_STRIDE + k) * _GAMMA) & _MASK)


def _draws(key: int, m: np.ndarray, count: int) -> np.ndarray:
    """Draws `0 .. count - 1` of every event number in `m`: shape (count, len(m)), uint64."""
    with np.errstate(over="ignore"):
        base = m.astype(np.uint64) * np.uint64(_DRAW_STRIDE * _GAMMA & _MASK) + np.uint64(key)
        steps = np.arange(count, dtype=np.uint64) * np.uint64(_GAMMA)
        return _mix_array(base[None, :] + steps[:, None])


# ---- fixed tables ----------------------------------------------------------------------------


_FIRST_NAMES = (
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
)  # fmt: skip
_LAST_NAMES = (
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
)  # fmt: skip
_CITIES = (
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
    "Kent", "Cheyenne",
)  # fmt: skip
_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
"""flink-nexmark's names and places (a few, so that queries find matches)."""


@dataclass(frozen=True)
class _Tables:
    first_names: tuple[str, ...]
    last_names: tuple[str, ...]
    cities: tuple[str, ...]
    states: tuple[str, ...]
    words: str
    """Letters with a space 1 time in 13 (flink-nexmark's `nextString` alphabet)."""
    letters: str
    """Lowercase letters (for `extra`)."""
    prices: np.ndarray
    """65,536 + 1 log-spaced prices in cents, 100 to 100,000,000 (int64)."""
    channel_names: np.ndarray
    """`HOT_CHANNELS` then `channel-0 .. channel-9999` (object array of str)."""
    channel_urls: np.ndarray


@functools.cache
def _tables() -> _Tables:
    """Made once per process from integers only: the same on every machine."""
    key = _key(0x7461626C6573)  # "tables"
    with np.errstate(over="ignore"):
        bits = _mix_array(np.arange(1 << 17, dtype=np.uint64) * np.uint64(_GAMMA) + np.uint64(key))
    letters = (bits % np.uint64(26)).astype(np.uint8) + ord("a")
    words = np.where((bits >> np.uint64(32)) % np.uint64(13) == 0, ord(" "), letters)
    underscored = np.where((bits >> np.uint64(40)) % np.uint64(13) == 0, ord("_"), letters)
    url_parts = underscored.astype(np.uint8).tobytes().decode("ascii")

    hot = len(HOT_CHANNELS)
    names = [*HOT_CHANNELS, *(f"channel-{i}" for i in range(NUM_CHANNELS))]
    urls = []
    for i, draws in enumerate(_draws(key, np.arange(hot + NUM_CHANNELS), 7).T.tolist()):
        parts = []
        for k in range(3):
            length = 3 + draws[2 * k] % 2  # flink-nexmark's nextString(5, '_'): 3 or 4
            start = draws[2 * k + 1] % (len(url_parts) - length)
            parts.append(url_parts[start : start + length])
        address = f"https://www.nexmark.com/{'/'.join(parts)}/item.htm?query=1"
        if i >= hot and draws[6] % 10 > 0:  # 9 in 10 ordinary channels carry their id
            address += f"&channel_id={_channel_id(i - hot)}"
        urls.append(address)
    return _Tables(
        first_names=_FIRST_NAMES,
        last_names=_LAST_NAMES,
        cities=_CITIES,
        states=_STATES,
        words=words.astype(np.uint8).tobytes().decode("ascii"),
        letters=letters.tobytes().decode("ascii"),
        prices=_price_table(),
        channel_names=np.array(names, dtype=object),
        channel_urls=np.array(urls, dtype=object),
    )


def _price_table() -> np.ndarray:
    """`round(100 * 10^(6i / 65536))` for i in 0..65536, in exact fixed-point integers."""
    steps, shift = 1 << 16, 96
    with localcontext() as context:
        context.prec = 60
        ratio = int(Decimal(10) ** (Decimal(6) / steps) * (1 << shift))
    prices, value, half = [], 100 << shift, 1 << (shift - 1)
    for _ in range(steps + 1):
        prices.append((value + half) >> shift)
        value = value * ratio >> shift
    return np.array(prices, dtype=np.int64)


def _channel_id(i: int) -> int:
    """flink-nexmark's `abs(Integer.reverse(i))`: the 32 bits of `i` reversed, signed."""
    reversed_bits = int(f"{i:032b}"[::-1], 2)
    return abs(reversed_bits - (1 << 32) if reversed_bits >= 1 << 31 else reversed_bits)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
