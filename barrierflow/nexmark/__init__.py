"""Nexmark, the streaming benchmark: its events, a deterministic generator, sources of
generated or recorded events, and the queries written with the DataStream API
(`barrierflow nexmark generate|run`; docs/benchmarks.md).

>>> from barrierflow.nexmark import GeneratorConfig, generate_events, query
>>> [type(event).__name__ for event in generate_events(GeneratorConfig(), 5)]
['Person', 'Auction', 'Auction', 'Auction', 'Bid']
>>> query("q5").columns
('auction', 'num')
"""

from barrierflow.nexmark.events_file import write_events
from barrierflow.nexmark.generator import GeneratorConfig, event_at, generate_events
from barrierflow.nexmark.job import events_from_file, events_from_generator
from barrierflow.nexmark.model import Auction, Bid, Person
from barrierflow.nexmark.queries import QUERY_NAMES, Query, query
from barrierflow.nexmark.runner import RunReport, RunSettings, run
from barrierflow.nexmark.source import NexmarkFileSource, NexmarkSource

__all__ = [
    "QUERY_NAMES",
    "Auction",
    "Bid",
    "GeneratorConfig",
    "NexmarkFileSource",
    "NexmarkSource",
    "Person",
    "Query",
    "RunReport",
    "RunSettings",
    "event_at",
    "events_from_file",
    "events_from_generator",
    "generate_events",
    "query",
    "run",
    "write_events",
]
