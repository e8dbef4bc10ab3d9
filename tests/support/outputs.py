"""Outputs that record what the code under test emits, for scenario tables to compare."""

from __future__ import annotations

from barrierflow.runtime.elements import StreamStatus, Watermark


class RecordingOutput:
    """Collects the watermarks and stream statuses emitted (by a valve, a multiplexer), in
    order; `pop_all` hands over what came since the last call."""

    def __init__(self) -> None:
        self.emitted: list[Watermark | StreamStatus] = []

    def emit_watermark(self, watermark: Watermark) -> None:
        self.emitted.append(watermark)

    def emit_stream_status(self, status: StreamStatus) -> None:
        self.emitted.append(status)

    def pop_all(self) -> list[Watermark | StreamStatus]:
        emitted, self.emitted = self.emitted, []
        return emitted
