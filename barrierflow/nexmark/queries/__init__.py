"""The Nexmark queries, each written with the DataStream API in a module of its own (`q5.py`).

A query module defines:

- `COLUMNS`: its output's column names, as flink-nexmark's SQL names them;
- `UPDATING`: True when the query's result is updated as events arrive (an aggregate
  without a window, a join keeping the best row): then every output row starts with an
  `"op"` field, Flink's changelog kinds `"+I"` (insert), `"-U"` (the row before an
  update), `"+U"` (the row after it) and `"-D"` (delete), so the rows taken as a multiset,
  each `+` counting once and each `-` taking one back, are the query's result;
- `build(events) -> DataStream`: the query over `events`, a stream of `Person`, `Auction`
  and `Bid` (`barrierflow.nexmark.model`) whose timestamps are their `date_time` and
  whose watermark trails the largest seen by 4 s; it returns a stream of dicts with
  `COLUMNS` as keys (after `"op"` when UPDATING).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["EXTRA_QUERY_NAMES", "QUERY_NAMES", "Query", "query"]

QUERY_NAMES = (
    "q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q11", "q12",
    "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22",
)  # fmt: skip
"""The queries barrierflow runs, in flink-nexmark's numbering."""

EXTRA_QUERY_NAMES = ("count",)
"""Queries beside Nexmark's, for comparisons: `count`, bids per auction as a keyed running
count (the job PyFlink's Python DataStream API is measured with)."""


@dataclass(frozen=True)
class Query:
    """One query: its name, output columns, whether it updates, and how to build it."""

    name: str
    columns: tuple[str, ...]
    updating: bool
    build: Callable[[Any], Any]
    description: str


def query(name: str) -> Query:
    """The query called `name` ("q5"); an unknown name raises ValueError listing the known."""
    if name not in QUERY_NAMES + EXTRA_QUERY_NAMES:
        known = ", ".join(QUERY_NAMES + EXTRA_QUERY_NAMES)
        raise ValueError(f"unknown Nexmark query {name!r}; known: {known}")
    module = importlib.import_module(f"{__name__}.{name}")
    return Query(
        name,
        tuple(module.COLUMNS),
        bool(module.UPDATING),
        module.build,
        (module.__doc__ or "").strip().splitlines()[0],
    )
