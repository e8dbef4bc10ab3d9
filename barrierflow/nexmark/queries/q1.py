"""Q1 (currency conversion): every bid with its price in euros, 0.908 times the dollar price.

Built as one vectorized step (`map_batches`) on the events' Arrow columns. flink-nexmark's
price is a DECIMAL(23, 3), the exact `price * 0.908`; here it is a float, `price * 908 /
1000`, the double nearest that decimal (`price * 908` is an exact integer below 2^53 and
IEEE division rounds correctly, as Python's `/` on two ints does; a larger price, above
2^53 / 908 cents, is an error, never a rounded result). While the decimal has at most 15
digits (prices below 10^12; generated ones stay below 10^9),
`Decimal(row["price"]).quantize(Decimal("0.001"))` gives it back exactly.

>>> from barrierflow.nexmark.events_file import record_batch_of
>>> from barrierflow.nexmark.model import Bid
>>> events = record_batch_of([Bid(7, 8, 1_001, "Google", "https://www.nexmark.com/a", 0, "")])
>>> euro_bids(events).column("price").to_pylist()
[908.908]
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream
from barrierflow.nexmark.queries._columns import bids_of, column, rows

__all__ = ["COLUMNS", "UPDATING", "build", "euro_bids", "euro_prices"]

COLUMNS = ("auction", "bidder", "price", "dateTime", "extra")
UPDATING = False


def euro_prices(dollar_prices: pa.Array) -> pa.Array:
    """`price * 908 / 1000` as the double nearest the exact decimal (also used by q14)."""
    return pc.divide(pc.cast(pc.multiply(dollar_prices, 908), pa.float64()), 1000.0)


def euro_bids(events: pa.RecordBatch) -> pa.RecordBatch:
    """The bids among `events`, their price in euros, in flink-nexmark's q1 columns."""
    bids = bids_of(events)
    columns = {name: column(bids, name) for name in COLUMNS}
    columns["price"] = euro_prices(columns["price"])
    return rows(bids, columns)


def build(events: DataStream) -> DataStream:
    return events.map_batches(euro_bids).name("q1")
