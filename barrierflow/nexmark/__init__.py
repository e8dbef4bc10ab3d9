"""Nexmark, the streaming benchmark: its events, a deterministic generator, and the queries
written with the DataStream API (`barrierflow nexmark generate|run`)."""
