"""Q22 (get URL directories): every bid with the first three directories of its URL.

Built as one vectorized step (`map_batches`, `with_directories`) on the events' Arrow
columns. A directory is flink-nexmark's `SPLIT_INDEX(url, '/', n)` for n = 3, 4, 5: the
n-th (0-based) piece of the URL split at every '/', empty pieces kept, None when there are
not that many pieces (or the URL is empty or None). Each URL is split once.

>>> url = "https://www.nexmark.com/abc/def/ghi/item.htm?query=1"
>>> [split_index(pa.array([url]), "/", n).to_pylist() for n in (3, 4, 5)]
[['abc'], ['def'], ['ghi']]
>>> split_index(pa.array(["https://a/b"]), "/", 5).to_pylist()
[None]
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream
from barrierflow.nexmark.queries._columns import bids_of, column, rows

__all__ = [
    "COLUMNS",
    "UPDATING",
    "build",
    "pieces_at",
    "split_index",
    "url_directories",
    "with_directories",
]

COLUMNS = ("auction", "bidder", "price", "channel", "dir1", "dir2", "dir3")
UPDATING = False


def pieces_at(texts: pa.Array, separator: str, indexes: tuple[int, ...]) -> list[pa.Array]:
    """Flink's SPLIT_INDEX for each of `indexes`, splitting each text once: the index-th
    (0-based) piece of the text split at `separator`, empty pieces kept; null if the index
    is negative or out of range, or the text is empty or null."""
    pieces = pc.split_pattern(texts, separator)
    counts = (
        pc.if_else(pc.equal(texts, ""), 0, pc.list_value_length(pieces))
        .fill_null(0)
        .to_numpy(zero_copy_only=False)
    )
    firsts = pieces.offsets.to_numpy()[:-1]
    values = pieces.values
    return [
        values.take(pa.array(firsts + index, mask=~((index >= 0) & (counts > index))))
        for index in indexes
    ]


def split_index(texts: pa.Array, separator: str, index: int) -> pa.Array:
    """Flink's SPLIT_INDEX on each text (see `pieces_at`)."""
    (found,) = pieces_at(texts, separator, (index,))
    return found


def url_directories(urls: pa.Array) -> list[pa.Array]:
    """`split_index(urls, "/", n)` for n = 3, 4, 5, splitting each URL once."""
    return pieces_at(urls, "/", (3, 4, 5))


def with_directories(events: pa.RecordBatch) -> pa.RecordBatch:
    """The bids among `events` with their URL's directories, in flink-nexmark's q22 columns."""
    bids = bids_of(events)
    dir1, dir2, dir3 = url_directories(column(bids, "url"))
    return rows(
        bids,
        {
            "auction": column(bids, "auction"),
            "bidder": column(bids, "bidder"),
            "price": column(bids, "price"),
            "channel": column(bids, "channel"),
            "dir1": dir1,
            "dir2": dir2,
            "dir3": dir3,
        },
    )


def build(events: DataStream) -> DataStream:
    return events.map_batches(with_directories).name("q22")
