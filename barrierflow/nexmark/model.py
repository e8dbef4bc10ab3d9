"""The three Nexmark event kinds: a person registers, opens an auction, bids on one.

Field names are flink-nexmark's in snake_case (`dateTime` is `date_time`); times are
epoch milliseconds. In files and in query output the flink-nexmark names are used:
`TABLE_NAMES` maps each field to its column name. An events file holds one event per
row in flink-nexmark's table shape, `{"event_type": 0|1|2, "person": {...} or None,
"auction": {...} or None, "bid": {...} or None}` (`to_table_row`, `from_table_row`).

>>> bid = Bid(1000, 1001, 52, "Google", "https://www.nexmark.com/a/b/c", 1_000, "")
>>> row = to_table_row(bid)
>>> row["event_type"], row["bid"]["dateTime"], row["person"]
(2, 1000, None)
>>> from_table_row(row) == bid
True
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "AUCTION",
    "BID",
    "PERSON",
    "TABLE_NAMES",
    "Auction",
    "Bid",
    "Event",
    "Person",
    "event_type_of",
    "from_table_row",
    "is_bid",
    "to_table_row",
]

PERSON = 0
"""`event_type` of a Person."""
AUCTION = 1
"""`event_type` of an Auction."""
BID = 2
"""`event_type` of a Bid."""


class Person(NamedTuple):
    """Someone who registered: sells in auctions and bids in them."""

    id: int
    name: str
    email_address: str
    credit_card: str
    city: str
    state: str
    date_time: int
    extra: str


class Auction(NamedTuple):
    """An item a person (`seller`) put up for auction until `expires`."""

    id: int
    item_name: str
    description: str
    initial_bid: int
    reserve: int
    date_time: int
    expires: int
    seller: int
    category: int
    extra: str


class Bid(NamedTuple):
    """A bid of `price` by `bidder` (a person id) on `auction` (an auction id)."""

    auction: int
    bidder: int
    price: int
    channel: str
    url: str
    date_time: int
    extra: str


Event = Person | Auction | Bid
"""One Nexmark event."""

_KINDS: tuple[tuple[int, str, type], ...] = (
    (PERSON, "person", Person),
    (AUCTION, "auction", Auction),
    (BID, "bid", Bid),
)
_TYPE_OF = {cls: event_type for event_type, _, cls in _KINDS}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


TABLE_NAMES: dict[type, tuple[str, ...]] = {
    cls: tuple(_camel(field) for field in cls._fields) for _, _, cls in _KINDS
}
"""Each event class's flink-nexmark column names, in field order (`dateTime`, `emailAddress`)."""


def event_type_of(event: Event) -> int:
    """0 for a Person, 1 for an Auction, 2 for a Bid."""
    return _TYPE_OF[type(event)]


def is_bid(event: Any) -> bool:
    """Whether the event is a Bid (for `filter`)."""
    return type(event) is Bid


def to_table_row(event: Event) -> dict[str, Any]:
    """The event in flink-nexmark's table shape (one nested row set, the other two None)."""
    event_type = _TYPE_OF[type(event)]
    row: dict[str, Any] = {"event_type": event_type, "person": None, "auction": None, "bid": None}
    _, column, cls = _KINDS[event_type]
    row[column] = dict(zip(TABLE_NAMES[cls], event, strict=True))
    return row


def from_table_row(row: dict[str, Any]) -> Event:
    """The event a table-shaped row holds; a row that is not one raises ValueError."""
    event_type = row.get("event_type")
    if event_type not in (PERSON, AUCTION, BID):
        raise ValueError(f"event_type must be 0, 1 or 2, got {event_type!r}")
    _, column, cls = _KINDS[event_type]
    nested = row.get(column)
    if not isinstance(nested, dict):
        raise ValueError(f"an event of type {event_type} needs its '{column}' row, got {nested!r}")
    try:
        return cls(*(nested[name] for name in TABLE_NAMES[cls]))
    except KeyError as missing:
        raise ValueError(f"the '{column}' row lacks the field {missing}") from None
